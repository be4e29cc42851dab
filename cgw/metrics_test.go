package cgw

import (
	"net/http"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/telemetry/telemetrytest"
)

// TestMetricsFronts checks that /metrics counts Nchf requests over h2c
// and HTTP/1.1 alike, by operation, status code and cause, and that the
// exposition passes promtool and carries no target label.
func TestMetricsFronts(t *testing.T) {
	s := startServer(t, &fakeCharger{}, 0)
	url := "http://" + s.Addr()
	before := telemetrytest.Scrape(t, url+"/metrics")
	const n = 7
	for name, c := range clients(t) {
		for range n {
			if r := do(t, c, http.MethodPost, url+NchfBase, createBody); r.status != http.StatusCreated {
				t.Fatalf("%s create: %d %s", name, r.status, r.body)
			}
		}
		if r := do(t, c, http.MethodPost, url+NchfBase+"/nope/update", createBody); r.status != http.StatusNotFound {
			t.Fatalf("%s bad update: %d %s", name, r.status, r.body)
		}
	}
	after := telemetrytest.Scrape(t, url+"/metrics")
	for _, fr := range []string{"h2c", "http1"} {
		ok := map[string]string{"front": fr, "operation": "create", "code": "201", "cause": ""}
		if d := telemetrytest.Value(t, after, "chf_cgw_requests_total", ok) - telemetrytest.Value(t, before, "chf_cgw_requests_total", ok); d != n {
			t.Errorf("%s creates counted %v, want %d", fr, d, n)
		}
		lat := map[string]string{"front": fr, "operation": "create", "code": "201"}
		if d := telemetrytest.Value(t, after, "chf_cgw_request_duration_seconds", lat) - telemetrytest.Value(t, before, "chf_cgw_request_duration_seconds", lat); d != n {
			t.Errorf("%s create latencies observed %v, want %d", fr, d, n)
		}
		bad := map[string]string{"front": fr, "operation": "update", "code": "404", "cause": "RESOURCE_CONTEXT_NOT_FOUND"}
		if d := telemetrytest.Value(t, after, "chf_cgw_requests_total", bad) - telemetrytest.Value(t, before, "chf_cgw_requests_total", bad); d != 1 {
			t.Errorf("%s bad updates counted %v, want 1", fr, d)
		}
	}
	telemetrytest.CheckLabels(t, after)
	telemetrytest.Promtool(t, after)
}

// TestMetricsShed checks the shed counter and the 503 it goes with.
func TestMetricsShed(t *testing.T) {
	bc := &blockingCharger{entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := startServer(t, bc, 1)
	url := "http://" + s.Addr()
	before := telemetrytest.Scrape(t, url+"/metrics")
	c := clients(t)["h2c"]
	done := make(chan struct{})
	go func() {
		defer close(done)
		do(t, c, http.MethodPost, url+NchfBase, createBody)
	}()
	<-bc.entered
	if r := do(t, c, http.MethodPost, url+NchfBase, createBody); r.status != http.StatusServiceUnavailable {
		t.Fatalf("second create: %d, want 503", r.status)
	}
	close(bc.release)
	<-done
	after := telemetrytest.Scrape(t, url+"/metrics")
	shed := map[string]string{"reason": "inflight"}
	if d := telemetrytest.Value(t, after, "chf_cgw_shed_total", shed) - telemetrytest.Value(t, before, "chf_cgw_shed_total", shed); d != 1 {
		t.Errorf("shed %v, want 1", d)
	}
}

func TestObserveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	x := &Exchange{Status: 403, op: opUpdate, cause: "QUOTA_LIMIT_REACHED"}
	start := time.Now()
	observe(frontH2C, x, start)
	if n := testing.AllocsPerRun(1000, func() { observe(frontH2C, x, start) }); n != 0 {
		t.Fatalf("observe allocates %v times", n)
	}
}

// BenchmarkObserve is the cost the Nchf metrics add per request.
func BenchmarkObserve(b *testing.B) {
	x := &Exchange{Status: 201, op: opCreate}
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		observe(frontH2C, x, start)
	}
}
