package hops

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// service is a fake service's /metrics: real client_golang histograms
// under the names the CHF's services export, served over HTTP.
type service struct {
	reg *prometheus.Registry
	h   map[string]*prometheus.HistogramVec
	srv *httptest.Server
}

var buckets = []float64{.001, .0025, .005, .01}

func newService(t *testing.T, fams map[string][]string) *service {
	s := &service{reg: prometheus.NewRegistry(), h: map[string]*prometheus.HistogramVec{}}
	for name, labels := range fams {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: name, Buckets: buckets}, labels)
		s.reg.MustRegister(v)
		s.h[name] = v
	}
	s.srv = httptest.NewServer(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) observe(name string, seconds float64, n int, labels ...string) {
	for range n {
		s.h[name].WithLabelValues(labels...).Observe(seconds)
	}
}

// TestDelta: the hops between two scrapes count only what was observed
// between them, replicas are summed, and the quantiles are the buckets'
// (interpolated within one), in the request path's order.
func TestDelta(t *testing.T) {
	cgw := newService(t, map[string][]string{
		"chf_cgw_request_duration_seconds":     {"operation"},
		"chf_rpc_client_duration_seconds":      {"peer", "result"},
		"http_client_request_duration_seconds": {"peer_service"},
		"chf_rpc_client_stage_seconds":         {"peer", "stage"},
	})
	ocp1 := newService(t, map[string][]string{"http_server_request_duration_seconds": {"http_route"}})
	ocp2 := newService(t, map[string][]string{"http_server_request_duration_seconds": {"http_route"}})
	// Before the window: must not count.
	cgw.observe("chf_cgw_request_duration_seconds", 0.02, 500, "create")
	ocp1.observe("http_server_request_duration_seconds", 0.02, 50, "/ocp/v1/charge")

	sc := New(map[string]string{"cgw": cgw.srv.URL, "ocp-1": ocp1.srv.URL, "ocp-2": ocp2.srv.URL})
	a := sc.Snapshot(context.Background())
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	// 100 requests: 50 within 1 ms, 49 in (1, 2.5], 1 over 10 ms, over
	// two label sets.
	cgw.observe("chf_cgw_request_duration_seconds", 0.0005, 50, "create")
	cgw.observe("chf_cgw_request_duration_seconds", 0.002, 49, "update")
	cgw.observe("chf_cgw_request_duration_seconds", 0.5, 1, "update")
	// Calls: 10 ok, 10 errors, all in (2.5, 5] ms.
	cgw.observe("chf_rpc_client_duration_seconds", 0.003, 10, "ocp", "ok")
	cgw.observe("chf_rpc_client_duration_seconds", 0.003, 10, "ocp", "error")
	cgw.observe("http_client_request_duration_seconds", 0.0007, 4, "ocp")
	cgw.observe("chf_rpc_client_stage_seconds", 0.0002, 20, "ocp", "queue")
	cgw.observe("chf_rpc_client_stage_seconds", 0.0004, 20, "ocp", "resume")
	ocp1.observe("http_server_request_duration_seconds", 0.0006, 3, "/ocp/v1/charge")
	ocp2.observe("http_server_request_duration_seconds", 0.0006, 1, "/ocp/v1/charge")
	b := sc.Snapshot(context.Background())
	if b.Err != nil {
		t.Fatal(b.Err)
	}
	got := Delta(a, b)
	want := []report.Hop{
		// The 50th of 100 is in the first bucket (≤ 1 ms: no lower bound
		// to interpolate from); the 99th lies in (1, 2.5] (the 49 there
		// are 51..99); the 99.9th beyond 10 ms.
		{Service: "cgw", Hop: "request", Count: 100, P50Ms: 1, P50Bound: "below", P99Ms: 2.5, P999Ms: 10, P999Bound: "above"},
		{Service: "cgw", Hop: "call → ocp", Count: 20, P50Ms: 3.75, P99Ms: 4.975, P999Ms: 4.9975},
		{Service: "cgw", Hop: "queue → ocp", Count: 20, P50Ms: 1, P99Ms: 1, P999Ms: 1, P50Bound: "below", P99Bound: "below", P999Bound: "below"},
		{Service: "cgw", Hop: "round trip → ocp", Count: 4, P50Ms: 1, P99Ms: 1, P999Ms: 1, P50Bound: "below", P99Bound: "below", P999Bound: "below"},
		{Service: "cgw", Hop: "resume → ocp", Count: 20, P50Ms: 1, P99Ms: 1, P999Ms: 1, P50Bound: "below", P99Bound: "below", P999Bound: "below"},
		{Service: "ocp", Hop: "serving", Count: 4, P50Ms: 1, P99Ms: 1, P999Ms: 1, P50Bound: "below", P99Bound: "below", P999Bound: "below"},
	}
	if len(got) != len(want) {
		t.Fatalf("hops %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Service != w.Service || g.Hop != w.Hop || g.Count != w.Count || g.P50Bound != w.P50Bound || g.P99Bound != w.P99Bound || g.P999Bound != w.P999Bound ||
			!near(g.P50Ms, w.P50Ms) || !near(g.P99Ms, w.P99Ms) || !near(g.P999Ms, w.P999Ms) {
			t.Errorf("hop %d = %+v, want %+v", i, g, w)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestSnapshotErrors: a service that cannot be scraped (gone, not
// Prometheus text, an error status) is named in Err and left out; the
// others still count; every scrape ends within ScrapeTimeout.
func TestSnapshotErrors(t *testing.T) {
	good := newService(t, map[string][]string{"chf_cgw_request_duration_seconds": {"operation"}})
	good.observe("chf_cgw_request_duration_seconds", 0.0005, 3, "create")
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("chf_cgw_request_duration_seconds_bucket{le=\"x\"} nonsense\n"))
	}))
	defer garbage.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer failing.Close()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	sc := New(map[string]string{"cgw": good.srv.URL, "ocp": garbage.URL, "abm": failing.URL, "slow": slow.URL, "gone": gone.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 3*ScrapeTimeout)
	defer cancel()
	snap := sc.Snapshot(ctx)
	if ctx.Err() != nil {
		t.Fatal("the snapshot outlived its scrapes' timeout")
	}
	for _, name := range []string{"ocp", "abm", "slow", "gone"} {
		if snap.Err == nil || !strings.Contains(snap.Err.Error(), name+":") {
			t.Errorf("error %v does not name %s", snap.Err, name)
		}
	}
	if strings.Contains(snap.Err.Error(), "cgw:") {
		t.Errorf("error %v names the good service", snap.Err)
	}
	hops := Delta(Snapshot{}, snap)
	if len(hops) != 1 || hops[0].Service != "cgw" || hops[0].Count != 3 {
		t.Errorf("hops %+v, want the cgw's 3 requests", hops)
	}
}

// TestQuantileEdges: everything in the first bucket (its bound, below),
// beyond the last (the last bound, above), in one bucket between
// (interpolated); no change and counts that went down (a restart) are
// left out.
func TestQuantileEdges(t *testing.T) {
	bounds := []float64{.001, .002, math.Inf(+1)}
	if ms, b := quantile(0.5, bounds, []float64{4, 4, 4}); ms != 1 || b != "below" {
		t.Errorf("all in the first bucket: %v %q, want 1 below", ms, b)
	}
	if ms, b := quantile(0.99, bounds, []float64{0, 0, 4}); ms != 2 || b != "above" {
		t.Errorf("all beyond: %v %q, want 2 above", ms, b)
	}
	if ms, b := quantile(0.5, bounds, []float64{0, 4, 4}); ms != 1.5 || b != "" {
		t.Errorf("all in the second bucket: %v %q, want 1.5 interpolated", ms, b)
	}
	k := key{service: "cgw", hop: "request"}
	a := Snapshot{hists: map[key]*hist{k: {bounds: bounds, counts: []float64{5, 6, 7}}}}
	b := Snapshot{hists: map[key]*hist{k: {bounds: bounds, counts: []float64{1, 2, 3}}}}
	if h := Delta(a, b); len(h) != 0 {
		t.Errorf("counts that went down gave %+v", h)
	}
	if h := Delta(a, a); len(h) != 0 {
		t.Errorf("no change gave %+v", h)
	}
}
