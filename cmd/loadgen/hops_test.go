package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// TestRunHopsFromCPUSources: `loadgen run` scrapes the services named by
// --cpu NAME=http://…/metrics for the report's hops too; without such a
// source the report says why it has none.
func TestRunHopsFromCPUSources(t *testing.T) {
	srv, err := fakechf.Start(fakechf.Options{Accounts: 100, Balance: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// A service's /metrics: its process CPU (for --cpu) and a CGW request
	// histogram that counts 10 requests of 2 ms before each scrape.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chf_cgw_request_duration_seconds", Help: "h", Buckets: []float64{.001, .0025, .005}})
	reg.MustRegister(h)
	served := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 10 {
			h.Observe(0.002)
		}
		served.ServeHTTP(w, r)
	}))
	defer metrics.Close()

	dir := t.TempDir()
	base := []string{"--target", "http://" + srv.Addr(), "--rate", "100", "--duration", "500ms", "--warmup", "0", "--ramp-up", "0",
		"--subscribers", "100", "--audit", "off", "--progress", "off"}
	run := func(extra ...string) *report.Result {
		t.Helper()
		js := filepath.Join(dir, "r.json")
		if err := runCmd(append(append([]string{"--json", js}, base...), extra...)); err != nil {
			t.Fatal(err)
		}
		res, err := report.ReadJSON(js)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run("--cpu", "cgw="+metrics.URL+"/metrics")
	if len(res.Hops) != 1 || res.Hops[0].Service != "cgw" || res.Hops[0].Hop != "request" || res.Hops[0].Count < 10 || res.Hops[0].Count%10 != 0 || res.HopsNote != "" {
		// 10 per scrape; the CPU sampler may scrape within the window too.
		t.Fatalf("hops %+v (note %q), want the cgw's requests between the window's scrapes", res.Hops, res.HopsNote)
	}
	if p := res.Hops[0].P50Ms; p <= 1 || p > 2.5 {
		t.Errorf("p50 %v ms, want within the (1, 2.5] ms bucket", p)
	}
	res = run()
	if len(res.Hops) != 0 || !strings.Contains(res.HopsNote, "--cpu NAME=http://") {
		t.Fatalf("without a metrics source: hops %+v, note %q", res.Hops, res.HopsNote)
	}
}
