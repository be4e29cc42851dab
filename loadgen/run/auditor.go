package run

import (
	"context"
	"fmt"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// auditor is a run's balance audit: whether it runs (and why not), the
// balances it reads before the run and the check after it. Balances are
// read over Nchf's HTTP API: through the load driver, or for Gy through
// an HTTP/1.1 Nchf driver of the auditor's own.
type auditor struct {
	o       Options
	sc      *scenario.Scenario
	mode    string // AuditAuto, AuditFull or AuditOff
	on      bool   // the audit runs
	res     audit.Result
	reader  *nchf.Driver
	own     *nchf.Driver // the Gy balance reader, closed by close
	first   scenario.SUPI
	initial *audit.Snapshot
}

// newAuditor decides whether the run is audited (Options.Audit, the range's
// size) with reader as the balance reader (nil for Gy).
func newAuditor(o Options, sc *scenario.Scenario, reader *nchf.Driver) *auditor {
	a := &auditor{o: o, sc: sc, mode: o.Audit, reader: reader, res: audit.Result{Skipped: true}}
	a.first, _ = scenario.ParseSUPI(sc.Subscribers.First)
	if a.mode == "" {
		a.mode = AuditAuto
	}
	a.on = a.mode != AuditOff
	if a.mode == AuditAuto && sc.Subscribers.Count > FullAuditMax && o.InitialBalance <= 0 {
		a.on = false
		a.res.Reason = fmt.Sprintf("range of %d subscribers is above %d and no --initial-balance given", sc.Subscribers.Count, FullAuditMax)
	}
	if a.mode == AuditOff {
		a.res.Reason = "disabled"
	}
	return a
}

// start opens the Gy run's balance reader (a full audit without one is an
// error, an auto one is skipped) and reads the initial balances unless
// Options.InitialBalance gives them.
func (a *auditor) start(ctx context.Context) error {
	if !a.on {
		return nil
	}
	if a.reader == nil {
		if len(a.o.BalanceTargets) == 0 {
			if a.mode == AuditFull {
				return fmt.Errorf("cannot audit a %s run: no HTTP endpoint to read balances from (--balance-url)", protoName(a.o.Proto))
			}
			a.on = false
			a.res.Reason = "no HTTP endpoint to read balances from over " + protoName(a.o.Proto) + " (--balance-url)"
			return nil
		}
		hd, err := nchf.New(driver.Config{Proto: "http1", Targets: a.o.BalanceTargets, Timeout: a.sc.Timeout.D(), TLS: a.o.TLS,
			OperatorToken: a.o.OperatorToken})
		if err != nil {
			return fmt.Errorf("cannot create the balance reader: %w", err)
		}
		a.reader, a.own = hd, hd
	}
	if a.o.InitialBalance > 0 {
		return nil
	}
	t0 := time.Now()
	initial, err := audit.Read(ctx, a.reader, a.first, audit.AllIndexes(a.sc.Subscribers.Count), a.o.AuditConcurrency)
	if err != nil {
		return fmt.Errorf("cannot read initial balances: %w", err)
	}
	a.initial = initial
	a.o.Log.Info("initial balances read", "accounts", a.sc.Subscribers.Count, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// close closes the auditor's own balance reader.
func (a *auditor) close() {
	if a.own != nil {
		a.own.Close()
	}
}

// final reads the final balances and checks them against the initial
// ones and st's ledger. An interrupted run is not audited (in-flight
// requests were abandoned: the balances cannot reconcile exactly, and
// the user asked to stop now). After faults, the final balances are read
// again every second, up to Options.ReservationSettle, until no
// reservation is left.
func (a *auditor) final(ctx context.Context, st *engine.Stats, interrupted, faults bool, tariff *audit.Tariff) audit.Result {
	if a.on && interrupted {
		a.on = false
		a.res = audit.Result{Skipped: true, Reason: "run interrupted"}
	}
	if !a.on {
		return a.res
	}
	// Reservations of sessions that ended are freed synchronously by the
	// CHF, so the final read can follow at once.
	// auto: the subscribers the run touched (untouched balances cannot
	// have moved); full: the whole range, which also proves that.
	idx := st.Ledger.TouchedList()
	if a.mode == AuditFull {
		idx = audit.AllIndexes(a.sc.Subscribers.Count)
	}
	t0 := time.Now()
	settle := time.Now().Add(a.o.ReservationSettle)
	for {
		final, err := audit.Read(context.Background(), a.reader, a.first, idx, a.o.AuditConcurrency)
		if err != nil {
			return audit.Result{Reason: err.Error()}
		}
		a.res = audit.Check(audit.Input{
			First: a.first, Initial: a.initial, InitialBalance: a.o.InitialBalance, Final: final,
			Ledger: st.Ledger, Expected: st.Ledger, Unresolved: st.Unresolved, NoHeader: st.MissingCharged,
			UsageLost: st.UsageLost, InitialOf: a.o.InitialOf, Tariff: tariff,
		})
		a.o.Log.Info("final balances read", "accounts", len(idx), "took", time.Since(t0).Round(time.Millisecond))
		// Only reservations can still change; mismatches cannot.
		if a.res.Reserved == 0 || !faults || time.Now().After(settle) || ctx.Err() != nil {
			return a.res
		}
		a.o.Log.Info("waiting for the reservations of sessions cut by a fault to expire", "accounts_with_reservations", a.res.Reserved, "until", settle.Format(time.TimeOnly))
		time.Sleep(time.Second)
	}
}
