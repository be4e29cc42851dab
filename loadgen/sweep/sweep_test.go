package sweep

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// The knee of a fake CHF that serves at most 200 requests per second is
// found within one step. Beyond capacity the queue grows by the excess
// every second, so the overloaded steps miss the SLO by far more than the
// noise of a shared machine.
func TestKneeOfKnownCapacity(t *testing.T) {
	const capacity = 200.0
	fake, err := fakechf.Start(fakechf.Options{Accounts: 100, Balance: 1000, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	sc := scenario.Default()
	sc.Mix = scenario.Mix{Balance: 1}
	sc.Subscribers.Count = 100
	sc.Phases = scenario.Phases{WarmUp: scenario.Duration(500 * time.Millisecond), Duration: scenario.Duration(1500 * time.Millisecond)}
	step := func(ctx context.Context, tps float64) (*report.Result, error) {
		s := sc
		s.Load = scenario.Load{TPS: tps}
		return run.Execute(ctx, run.Options{Scenario: s, Targets: []string{fake.Addr()}, Audit: run.AuditOff, Workers: 1,
			ProgressMode: run.ProgressOff, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Start: 50, Step: 50, Max: 450, UntilBreak: true, RunStep: step,
		SLO: SLO{P99Ms: 300, MaxErrorRate: 0, MaxLateRate: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if res.KneeTPS < capacity-50 || res.KneeTPS > capacity {
		var b bytes.Buffer
		res.WriteMarkdown(&b)
		t.Fatalf("knee %.0f TPS, want within one step below %.0f\n%s", res.KneeTPS, capacity, b.String())
	}
	if res.FirstFailTPS != res.KneeTPS+50 || res.FirstFailReason == "" {
		t.Fatalf("first failure %.0f (%s)", res.FirstFailTPS, res.FirstFailReason)
	}
	var html bytes.Buffer
	if err := res.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if strings.Count(html.String(), "<svg") != 3 { // throughput, latency and CPU (loadgen) curves
		t.Fatalf("sweep page has %d charts", strings.Count(html.String(), "<svg"))
	}
}
