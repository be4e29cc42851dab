// Package hops breaks a run's latency down by hop, from the services' own
// latency histograms: each service's /metrics is scraped when the
// measured window opens and when it closes, and the difference of each
// histogram's buckets is the window's distribution of that hop.
//
// The hops of each service, the services in the order a Nchf request
// crosses them (cgw, ocp, abm):
//
//   - request: the CGW's time for a Nchf request, from its headers to
//     its answer (chf_cgw_request_duration_seconds); Gy request, for a
//     Diameter credit-control request (chf_gy_request_duration_seconds);
//   - serving: the OCP or ABM answering one HTTP request from its caller,
//     a whole batch (http_server_request_duration_seconds);
//   - call → PEER: one call to a peer service as its caller waited for
//     it, queueing behind the batch in flight included
//     (chf_rpc_client_duration_seconds);
//   - queue → PEER: of a call, the wait for its batch to leave
//     (chf_rpc_client_stage_seconds{stage="queue"});
//   - round trip → PEER: one HTTP request to the peer, a whole batch
//     (http_client_request_duration_seconds);
//   - resume → PEER: of a call, from its batch's answer decoded until
//     its caller ran again (chf_rpc_client_stage_seconds{stage="resume"});
//   - aerospike command: one command of the ABM's to Aerospike, a batch
//     or a single record (chf_abm_aerospike_duration_seconds).
//
// A call's time well above its round trip's is time spent waiting for a
// batch, not on the wire or at the peer. Quantiles are interpolated
// linearly within a bucket, as Prometheus's histogram_quantile does, so
// they are only as fine as the buckets; one in the first bucket is
// reported as its bound with Bound "below", one beyond the last finite
// bound as that bound with "above".
package hops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// ScrapeTimeout bounds each scrape of one service.
const ScrapeTimeout = 2 * time.Second

// maxBody bounds what one scrape reads: a service's /metrics is some
// hundreds of kB.
const maxBody = 16 << 20

// family is one histogram this package reads: its metric name, the hop
// it measures, and the label naming the peer, if any.
type family struct {
	name, hop, peerLabel string
	// stage, when set, keeps only the series whose label stage has this
	// value.
	stage string
	order int
}

var families = []family{
	{name: "chf_cgw_request_duration_seconds", hop: "request", order: 0},
	{name: "chf_gy_request_duration_seconds", hop: "Gy request", order: 0},
	{name: "http_server_request_duration_seconds", hop: "serving", order: 1},
	{name: "chf_rpc_client_duration_seconds", hop: "call → ", peerLabel: "peer", order: 2},
	{name: "chf_rpc_client_stage_seconds", hop: "queue → ", peerLabel: "peer", stage: "queue", order: 3},
	{name: "http_client_request_duration_seconds", hop: "round trip → ", peerLabel: "peer_service", order: 4},
	{name: "chf_rpc_client_stage_seconds", hop: "resume → ", peerLabel: "peer", stage: "resume", order: 5},
	{name: "chf_abm_aerospike_duration_seconds", hop: "aerospike command", order: 6},
}

// serviceOrder is the order of the services along the request path.
var serviceOrder = map[string]int{"cgw": 0, "ocp": 1, "abm": 2}

// Scraper scrapes the /metrics of a set of service instances.
type Scraper struct {
	targets map[string]string // instance name ("cgw", "ocp-2") -> URL
	client  *http.Client
}

// New returns a Scraper of targets: instance name ("cgw", or "ocp-2" for
// a replica) to its /metrics URL. Replicas of a service are summed.
func New(targets map[string]string) *Scraper {
	t := make(map[string]string, len(targets))
	for k, v := range targets {
		t[k] = v
	}
	return &Scraper{targets: t, client: &http.Client{Timeout: ScrapeTimeout}}
}

// Snapshot is the cumulative buckets of every hop's histogram at one
// instant, per service (replicas summed).
type Snapshot struct {
	hists map[key]*hist
	// Err says which services could not be scraped (left out).
	Err error
}

type key struct {
	service, hop string
	order        int
}

// hist is a cumulative histogram: counts[i] observations <= bounds[i]
// (seconds), bounds ascending and ending with +Inf.
type hist struct {
	bounds []float64
	counts []float64
}

// Snapshot scrapes every target at once, each within ScrapeTimeout.
func (s *Scraper) Snapshot(ctx context.Context) Snapshot {
	type scraped struct {
		name string
		fams map[string]*dto.MetricFamily
		err  error
	}
	out := make(chan scraped, len(s.targets))
	var wg sync.WaitGroup
	for name, url := range s.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fams, err := s.scrape(ctx, url)
			out <- scraped{name, fams, err}
		}()
	}
	wg.Wait()
	close(out)
	snap := Snapshot{hists: map[key]*hist{}}
	var errs []error
	for sc := range out {
		if sc.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sc.name, sc.err))
			continue
		}
		snap.add(serviceOf(sc.name), sc.fams)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	snap.Err = errors.Join(errs...)
	return snap
}

// serviceOf is the service of an instance name: "ocp-2" -> "ocp".
func serviceOf(instance string) string {
	if i := strings.LastIndexByte(instance, '-'); i > 0 {
		if _, known := serviceOrder[instance[:i]]; known {
			return instance[:i]
		}
	}
	return instance
}

func (s *Scraper) scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return fams, nil
}

// add sums the hop histograms of one instance of service into s.
func (s *Snapshot) add(service string, fams map[string]*dto.MetricFamily) {
	for _, f := range families {
		mf := fams[f.name]
		if mf == nil || mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range mf.GetMetric() {
			if f.stage != "" && label(m, "stage") != f.stage {
				continue
			}
			hop := f.hop
			if f.peerLabel != "" {
				peer := label(m, f.peerLabel)
				if peer == "" {
					peer = "?"
				}
				hop += peer
			}
			k := key{service: service, hop: hop, order: f.order}
			h := s.hists[k]
			if h == nil {
				h = &hist{}
				s.hists[k] = h
			}
			h.add(m.GetHistogram())
		}
	}
}

// label is the value of m's label name, "" without it.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// add sums the buckets of m into h; a histogram with other bounds than
// those h already holds is left out (one family has one set of buckets).
func (h *hist) add(m *dto.Histogram) {
	bs := m.GetBucket()
	bounds := make([]float64, 0, len(bs)+1)
	counts := make([]float64, 0, len(bs)+1)
	for _, b := range bs {
		if math.IsInf(b.GetUpperBound(), +1) {
			continue
		}
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, float64(b.GetCumulativeCount()))
	}
	bounds = append(bounds, math.Inf(+1))
	counts = append(counts, float64(m.GetSampleCount()))
	if h.bounds == nil {
		h.bounds, h.counts = bounds, counts
		return
	}
	if len(bounds) != len(h.bounds) {
		return
	}
	for i := range bounds {
		if bounds[i] != h.bounds[i] {
			return
		}
	}
	for i := range counts {
		h.counts[i] += counts[i]
	}
}

// Delta returns each hop's distribution between a and b, in the order a
// request crosses them; hops with no observation in between are left
// out. Counts that went down (a service restarted) are left out too.
func Delta(a, b Snapshot) []report.Hop {
	var keys []key
	for k := range b.hists {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ki, kj := keys[i], keys[j]
		if oi, oj := order(ki.service), order(kj.service); oi != oj {
			return oi < oj
		}
		if ki.service != kj.service {
			return ki.service < kj.service
		}
		if ki.order != kj.order {
			return ki.order < kj.order
		}
		return ki.hop < kj.hop
	})
	var out []report.Hop
	for _, k := range keys {
		hb, ha := b.hists[k], a.hists[k]
		d := make([]float64, len(hb.counts))
		copy(d, hb.counts)
		if ha != nil {
			if len(ha.counts) != len(d) {
				continue
			}
			for i := range d {
				d[i] -= ha.counts[i]
			}
		}
		n := d[len(d)-1]
		if n <= 0 || !monotone(d) {
			continue
		}
		h := report.Hop{Service: k.service, Hop: k.hop, Count: int64(n)}
		h.P50Ms, h.P50Bound = quantile(0.5, hb.bounds, d)
		h.P99Ms, h.P99Bound = quantile(0.99, hb.bounds, d)
		h.P999Ms, h.P999Bound = quantile(0.999, hb.bounds, d)
		out = append(out, h)
	}
	return out
}

func order(service string) int {
	if o, ok := serviceOrder[service]; ok {
		return o
	}
	return len(serviceOrder)
}

// monotone reports whether cumulative counts never decrease and none is
// negative.
func monotone(c []float64) bool {
	prev := 0.0
	for _, v := range c {
		if v < prev {
			return false
		}
		prev = v
	}
	return true
}

// quantile is the q-quantile in milliseconds of cumulative counts c over
// bounds (seconds, the last +Inf), interpolated linearly within its
// bucket; in the first bucket it is that bucket's bound with bound
// "below" (interpolating from 0 would invent a value the histogram
// cannot tell), beyond the last finite bound that bound with "above".
func quantile(q float64, bounds, c []float64) (ms float64, bound string) {
	n := c[len(c)-1]
	rank := q * n
	for i, v := range c {
		if v < rank {
			continue
		}
		switch {
		case math.IsInf(bounds[i], +1) && i == 0:
			return 0, "above"
		case math.IsInf(bounds[i], +1):
			return 1000 * bounds[i-1], "above"
		case i == 0:
			return 1000 * bounds[0], "below"
		}
		lo, below := bounds[i-1], c[i-1]
		return 1000 * (lo + (bounds[i]-lo)*(rank-below)/(v-below)), ""
	}
	return 0, ""
}
