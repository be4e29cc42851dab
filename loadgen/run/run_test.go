package run

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

func options(addr string) Options {
	sc := scenario.Default()
	sc.Subscribers.Count = 200
	sc.Load = scenario.Load{TPS: 300}
	sc.Data.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Voice.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Phases = scenario.Phases{WarmUp: scenario.Duration(100 * time.Millisecond), Duration: scenario.Duration(700 * time.Millisecond)}
	return Options{
		Scenario: sc, Targets: []string{addr}, ProgressMode: ProgressJSON, ProgressOut: io.Discard,
		CPU: []cpu.Source{cpu.Self("fake")}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func execute(t *testing.T, o Options) (*report.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Execute(ctx, o)
}

func TestAuditPasses(t *testing.T) {
	fake, err := fakechf.Start(fakechf.Options{Accounts: 200, Balance: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	res, err := execute(t, options(fake.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	a := res.Audit
	if !a.OK || a.Checked != a.Touched || a.Charged == 0 || a.Charged != a.Debited || a.Touched == 0 {
		t.Fatalf("audit %+v", a)
	}
	if res.Errors != 0 || res.Transactions == 0 || res.SchemaVersion != report.SchemaVersion {
		t.Fatalf("result: %d transactions, %d errors", res.Transactions, res.Errors)
	}
	if _, ok := res.CPUPercent["fake"]; !ok {
		t.Fatalf("no CPU of the SUT component: %v", res.CPUPercent)
	}
	if _, ok := res.CPUPercent[report.LoadgenComponent]; !ok {
		t.Fatalf("no CPU of loadgen: %v", res.CPUPercent)
	}
	// Every report renders and the JSON reads back to the same figures.
	dir := t.TempDir()
	files, err := res.WriteAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	back, err := report.ReadJSON(files.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Recompute(); err != nil {
		t.Fatal(err)
	}
	if back.LatencyMs != res.LatencyMs || back.Transactions != res.Transactions || back.TPS != res.TPS {
		t.Fatalf("JSON round trip changed figures: %+v vs %+v", back.LatencyMs, res.LatencyMs)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	// A sub-second run has no per-second series: the spectrum only.
	if n := strings.Count(string(html), "<svg"); n < 1 || !strings.Contains(string(html), "No per-second series") ||
		strings.Contains(string(html), "<script") || strings.Contains(string(html), "http://www.w3.org/1999/xlink\" href") {
		t.Fatalf("HTML has %d charts (or external resources)", n)
	}
}

func TestAuditCatchesDoubleCharging(t *testing.T) {
	fake, err := fakechf.Start(fakechf.Options{Accounts: 200, Balance: 1_000_000, ChargeTwice: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	res, err := execute(t, options(fake.Addr()))
	if !errors.Is(err, ErrAudit) {
		t.Fatalf("err = %v, want ErrAudit", err)
	}
	if res == nil || res.Audit.OK || res.Audit.Mismatches == 0 || res.Audit.Debited != 2*res.Audit.Charged {
		t.Fatalf("audit %+v", res.Audit)
	}
}

func TestAuditWithKnownInitialBalance(t *testing.T) {
	fake, err := fakechf.Start(fakechf.Options{Accounts: 200, Balance: 5000})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	o := options(fake.Addr())
	o.InitialBalance = 4999 // wrong on purpose: every account seems debited by one
	o.Audit = AuditFull
	res, err := execute(t, o)
	if !errors.Is(err, ErrAudit) || res.Audit.Mismatches != 200 {
		t.Fatalf("err %v, audit %+v", err, res.Audit)
	}
}
