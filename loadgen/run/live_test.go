package run

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/telemetry/telemetrytest"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// TestLiveMetrics runs against a fake CHF with --metrics-listen and
// scrapes the endpoint while the run lasts; it is gone afterwards.
func TestLiveMetrics(t *testing.T) {
	fake, err := fakechf.Start(fakechf.Options{Accounts: 200, Balance: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	o := options(fake.Addr())
	o.MetricsListen = addr
	o.Audit = AuditOff
	// Ticks (the offered and completed counters) fire 1.25 s after the
	// start, then every second.
	o.Scenario.Phases.Duration = scenario.Duration(1800 * time.Millisecond)
	last := make(chan []byte, 1)
	stop := make(chan struct{})
	go func() {
		var body []byte
		defer func() { last <- body }()
		c := &http.Client{Timeout: time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			resp, err := c.Get("http://" + addr + "/metrics")
			if err != nil {
				continue
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && bytes.Contains(b, []byte("loadgen_offered_requests_total")) {
				body = b
			}
		}
	}()
	res, err := execute(t, o)
	close(stop)
	body := <-last
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		t.Fatal("no scrape of the live endpoint succeeded during the run")
	}
	if v := telemetrytest.Value(t, body, "loadgen_offered_requests_total", nil); v <= 0 {
		t.Errorf("offered = %v during a run of %d transactions", v, res.Transactions)
	}
	if v := telemetrytest.Value(t, body, "loadgen_request_duration_seconds", nil); v <= 0 {
		t.Errorf("no latency observed live")
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Errorf("live endpoint still open after the run")
	}
}
