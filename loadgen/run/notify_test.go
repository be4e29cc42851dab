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
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/loadgen/testbed"
	"github.com/chf-testbed/testbed/ocp"
)

// notifyingCHF runs the real charging core in process behind both CGW
// fronts, with the operator API open (loopback), ChargingNotify and
// RAR/ASR wired, and the scenario's account plans provisioned.
func notifyingCHF(t *testing.T, sc *scenario.Scenario, balance int64) (httpAddr, gyAddr string) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl := aslitetest.Start(t)
	ctx := context.Background()
	if _, err := provision.Run(ctx, cl, provision.Config{First: sc.Subscribers.First, Count: sc.Subscribers.Count, Balance: balance, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
	plans, _, err := testbed.Plans(sc, balance)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		first, _ := provision.SUPI(sc.Subscribers.First, p.Offset)
		if _, err := provision.Run(ctx, cl, provision.Config{First: first, Count: p.Count, Balance: p.Balance, Overwrite: true,
			CreditLimit: p.CreditLimit, Buckets: p.Buckets}, nil); err != nil {
			t.Fatal(err)
		}
	}
	core := ocp.NewProcessor(nil, abm.New(cl, abm.Config{Logger: quiet}))
	n := cgw.NewNotifier(cgw.NotifierConfig{})
	t.Cleanup(n.Close)
	return serveFronts(t, core, cgw.HandlerConfig{OperatorOpen: true, Notifier: n})
}

// serveFronts serves core behind both CGW fronts on loopback, Diameter Gy
// and Nchf with h (its Charger, Logger and Gy filled in here), stopped at
// the test's end.
func serveFronts(t *testing.T, core *ocp.Processor, h cgw.HandlerConfig) (httpAddr, gyAddr string) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dia, err := diameter.NewServer(diameter.Config{AllowRealms: []string{"loadgen.test"}, Logger: quiet}, core)
	if err != nil {
		t.Fatal(err)
	}
	if err := dia.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dia.Close() })
	h.Charger, h.Logger, h.Gy = core, quiet, dia
	web, err := cgw.NewServer(cgw.Config{Listen: "127.0.0.1:0", Logger: quiet, Handler: h})
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
	return web.Addr(), dia.Addr()
}

// TestNotificationsAndPlansEndToEnd drives, through the real services on
// Nchf and on Gy, a run in which the operator re-authorises and aborts a
// share of the sessions (answered by an update or a release), data
// sessions update on their grants' thresholds, and the range holds
// postpaid and bucket accounts (and, on Nchf, offline sessions): every
// notification is received and answered, and the audit, which models the
// plans, reconciles exactly.
func TestNotificationsAndPlansEndToEnd(t *testing.T) {
	for _, proto := range []string{"h2c", "gy"} {
		t.Run(proto, func(t *testing.T) {
			o := options("")
			sc := &o.Scenario
			sc.Subscribers.Count = 400
			sc.Load = scenario.Load{SessionsPerSecond: 150}
			sc.Phases = scenario.Phases{WarmUp: scenario.Duration(100 * time.Millisecond), Duration: scenario.Duration(1500 * time.Millisecond)}
			sc.Notifications = scenario.Notifications{Reauthorize: 0.2, Abort: 0.05}
			sc.Data.UpdateOn, sc.Data.Rate = scenario.UpdateOnThreshold, scenario.Units{TotalVolume: 40 << 20} // ~0.2 s per grant
			sc.Accounts = scenario.Accounts{Postpaid: 0.2, CreditLimit: 10_000_000, Buckets: 0.2, BucketPlan: []string{"voice:90", "sms:2"}}
			if proto == "h2c" {
				sc.Accounts.Offline = 0.1
			}
			if err := sc.Validate(); err != nil {
				t.Fatal(err)
			}
			const balance = 1_000_000
			httpAddr, gyAddr := notifyingCHF(t, sc, balance)
			_, o.InitialOf, _ = testbed.Plans(sc, balance)
			o.Targets, o.Audit, o.CPU = []string{httpAddr}, AuditFull, nil
			if proto == "gy" {
				o.Targets, o.Proto, o.Conns, o.BalanceTargets = []string{gyAddr}, "gy", 2, []string{httpAddr}
			}
			res, err := execute(t, o)
			if err != nil {
				t.Fatal(err)
			}
			a := res.Audit
			if !a.OK || !a.Independent || a.ExpectedMismatches != 0 || a.BucketValue == 0 || a.Unresolved != 0 {
				t.Fatalf("audit %+v", a)
			}
			if proto == "h2c" && a.Offline == 0 {
				t.Fatalf("no offline usage recorded: %+v", a)
			}
			nt := res.Notifications
			if nt == nil || nt.Operator == nil {
				t.Fatalf("no notifications in the result")
			}
			op := nt.Operator
			// An abort bars the account and every session of it at once
			// until the loadgen unbars it: an update that reaches the
			// CHF before the notification reaches the loadgen, or a
			// create or event in the window, is refused (403
			// END_USER_REQUEST_DENIED, Gy 4010) and counted barred, not
			// an error; nothing fails.
			if res.Errors != 0 || op.Barred > 4*op.Triggered["abort_charging"] {
				t.Fatalf("%d errors %v, %d barred", res.Errors, res.ErrorClasses, op.Barred)
			}
			barred := op.Barred
			t.Logf("%d aborts, %d unbarred, %d requests refused while barred", op.Triggered["abort_charging"], op.Unbarred, barred)
			calls := op.Triggered["reauthorization"] + op.Triggered["abort_charging"]
			if calls < 20 || op.OK != calls || op.Failed != 0 || op.Refused != 0 || op.NotifyFailed != 0 ||
				op.Unbarred != op.Triggered["abort_charging"] || op.UnbarFailed != 0 {
				t.Fatalf("operator calls %+v", op)
			}
			for typ, n := range nt.ByType {
				if n.Received < op.Triggered[typ] || n.Answered+n.Stale+n.Merged != n.Received || n.Failed > barred || n.LatencyMs == nil && n.Answered > 0 {
					t.Fatalf("%s: %+v (triggered %d)", typ, n, op.Triggered[typ])
				}
			}
			if op.RoundTripMs == nil || op.ToNoticeMs == nil {
				t.Fatalf("no round trip measured: %+v", op)
			}
		})
	}
}
