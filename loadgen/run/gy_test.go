package run

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/aslite/aslitetest"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/ocp"
)

// inProcessCHF runs the real charging core in process (ocp.Processor over
// abm over aslite) behind both CGW fronts: Nchf/balances over HTTP and
// Diameter Gy. It returns their addresses.
func inProcessCHF(t *testing.T, accounts int, balance int64) (httpAddr, gyAddr string) {
	t.Helper()
	return inProcessCHFWith(t, accounts, balance, nil)
}

// inProcessCHFWith is inProcessCHF with the charging core wrapped by wrap
// (nil: as is) behind both fronts, for faults.
func inProcessCHFWith(t *testing.T, accounts int, balance int64, wrap func(chf.Charger) chf.Charger) (httpAddr, gyAddr string) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl := aslitetest.Start(t)
	if _, err := provision.Run(context.Background(), cl, provision.Config{
		First: "imsi-001010000000001", Count: accounts, Balance: balance, Overwrite: true,
	}, nil); err != nil {
		t.Fatal(err)
	}
	var core chf.Charger = ocp.NewProcessor(nil, abm.New(cl, abm.Config{Logger: quiet}))
	if wrap != nil {
		core = wrap(core)
	}

	web, err := cgw.NewServer(cgw.Config{Listen: "127.0.0.1:0", Handler: cgw.HandlerConfig{Charger: core, Logger: quiet}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		web.Shutdown(ctx)
	})
	dia, err := diameter.NewServer(diameter.Config{AllowRealms: []string{"loadgen.test"}, Logger: quiet}, core)
	if err != nil {
		t.Fatal(err)
	}
	if err := dia.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dia.Close() })
	return web.Addr(), dia.Addr()
}

// TestGyRunAuditPasses drives the default mix over Diameter Gy through the
// real charging core: no errors, every operation measured, and the
// balances read over HTTP reconcile with the Cost-Information amounts.
func TestGyRunAuditPasses(t *testing.T) {
	httpAddr, gyAddr := inProcessCHF(t, 200, 1_000_000)
	o := options(gyAddr)
	o.Proto, o.Conns = "gy", 3
	o.BalanceTargets = []string{httpAddr}
	o.Audit = AuditFull
	o.CPU = nil
	res, err := execute(t, o)
	if err != nil {
		t.Fatal(err)
	}
	a := res.Audit
	if !a.OK || a.Touched == 0 || a.Charged == 0 || a.Charged != a.Debited || a.NoHeader != 0 || a.Unresolved != 0 {
		t.Fatalf("audit %+v", a)
	}
	if res.Errors != 0 || res.Transactions == 0 || res.Proto != "gy" {
		t.Fatalf("%s: %d transactions, %d errors %v", res.Proto, res.Transactions, res.Errors, res.ErrorClasses)
	}
	for _, op := range []string{"create", "update", "release", "event", "balance"} {
		if s, ok := res.Ops[op]; !ok || s.Count == 0 {
			t.Errorf("no %s measured: %+v", op, res.Ops)
		}
	}
}

// TestGyRunWithoutBalanceURL skips the audit in auto mode and refuses a
// full audit: balances cannot be read over Gy.
func TestGyRunWithoutBalanceURL(t *testing.T) {
	_, gyAddr := inProcessCHF(t, 200, 1_000_000)
	o := options(gyAddr)
	o.Proto = "gy"
	o.Scenario.Phases.Duration = o.Scenario.Phases.WarmUp
	res, err := execute(t, o)
	if err != nil || !res.Audit.Skipped || res.Errors != 0 {
		t.Fatalf("auto: err %v, audit %+v", err, res.Audit)
	}
	o.Audit = AuditFull
	if _, err := execute(t, o); err == nil {
		t.Fatal("full audit over Gy without balance targets accepted")
	}
}
