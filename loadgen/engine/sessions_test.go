package engine

import (
	"context"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// Sessions with a drawn length send an update every think time while
// they last and release at their length: the counts of creates, updates
// and releases match the scenario's means, and the sessions open at once
// follow Little's law.
func TestSessionLengths(t *testing.T) {
	srv := startFake(t, fakechf.Options{Accounts: 1000, Balance: 1 << 40})
	sc := scenario.Default()
	sc.Mix = scenario.Mix{Data: 1}
	sc.Subscribers.Count = 1000
	sc.Data.Updates = 0
	sc.Data.ThinkTime = scenario.Duration(100 * time.Millisecond)
	sc.Data.Length = &scenario.Length{Min: scenario.Duration(200 * time.Millisecond), Max: scenario.Duration(600 * time.Millisecond)}
	sc.Load = scenario.Load{SessionsPerSecond: 150}
	sc.Phases = scenario.Phases{WarmUp: scenario.Duration(time.Second), Duration: scenario.Duration(2 * time.Second)}
	sc.Timeout = scenario.Duration(2 * time.Second)
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), Config{Scenario: sc, Driver: newDriver(t, "h2c", srv.Addr()), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	cr, up, rel := st.Ops[OpCreate].Count, st.Ops[OpUpdate].Count, st.Ops[OpRelease].Count
	if cr < 200 || rel < 200 {
		t.Fatalf("creates %d releases %d, want about 300 each", cr, rel)
	}
	// lengths uniform in [200, 600] ms, an update at every 100 ms before
	// the length: 1..5 updates, 3 on average
	if got, want := float64(up)/float64(cr), sc.Data.MeanUpdates(); got < want*0.85 || got > want*1.15 {
		t.Fatalf("updates per session %.2f, want %.2f", got, want)
	}
	if e := st.Ops[OpCreate].Errors + st.Ops[OpUpdate].Errors + st.Ops[OpRelease].Errors; e > 0 {
		t.Fatalf("%d errors", e)
	}
	// 150/s x 0.4 s = 60 (wide: on a loaded machine the worker falls
	// behind, and the sessions whose release is late are still open)
	want := sc.OpenSessions()
	if got := float64(st.OpenSessionsEnd); got < want*0.6 || got > want*2.5 {
		t.Fatalf("open sessions at the end %v, want about %.0f (Little's law)", got, want)
	}
	if st.SessionLimited != 0 {
		t.Fatalf("%d sessions limited", st.SessionLimited)
	}
}

// A session that would exceed max_open_sessions is not started: it is
// counted dropped and in SessionLimited, and the open sessions never
// exceed the bound.
func TestMaxOpenSessions(t *testing.T) {
	srv := startFake(t, fakechf.Options{Accounts: 1000, Balance: 1 << 40})
	sc := scenario.Default()
	sc.Mix = scenario.Mix{Data: 1}
	sc.Subscribers.Count = 1000
	sc.Data.Updates, sc.Data.ThinkTime = 1, scenario.Duration(time.Second)
	sc.Load = scenario.Load{SessionsPerSecond: 200}
	sc.Phases = scenario.Phases{Duration: scenario.Duration(2 * time.Second)}
	sc.MaxOpenSessions = 50
	st, err := Run(context.Background(), Config{Scenario: sc, Driver: newDriver(t, "h2c", srv.Addr()), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.OpenSessionsPeak > 50 {
		t.Fatalf("peak %d open sessions, bound 50", st.OpenSessionsPeak)
	}
	if st.SessionLimited < 100 || st.Ops[OpCreate].Dropped < 100 {
		t.Fatalf("limited %d, dropped creates %d: want most of the 400 sessions refused", st.SessionLimited, st.Ops[OpCreate].Dropped)
	}
	if st.Ops[OpCreate].Count == 0 {
		t.Fatal("no session started")
	}
	if last := st.Series[len(st.Series)-1]; last.OpenSessions != 0 && st.Abandoned == 0 {
		t.Fatalf("%d sessions still open at the end", last.OpenSessions)
	}
}

// What the engine holds per open session between requests stays small:
// the request state (Charge, Outcome, callback) is pooled per request in
// flight, not per session, and a notified session's notification state
// is beside it (noticeState), not in it. 112 bytes: 96 for the session
// and its schedule, 16 for the notification and threshold-driven fields
// kept in the flow (loadgen/docs/measurement.md, Memory per open session).
func TestFlowBytes(t *testing.T) {
	if FlowBytes > 112 {
		t.Fatalf("flow is %d bytes, want at most 112", FlowBytes)
	}
}

// With phases.steady_start the sessions of the steady state are open by
// the end of the ramp-up (without it, they are not until the longest
// session's length has passed), and they keep ending at the steady
// state's rate: the open count stays level through the window.
func TestSteadyStart(t *testing.T) {
	srv := startFake(t, fakechf.Options{Accounts: 1000, Balance: 1 << 40})
	sc := scenario.Default()
	sc.Mix = scenario.Mix{Data: 1}
	sc.Subscribers.Count = 1000
	sc.Data.ThinkTime = scenario.Duration(500 * time.Millisecond)
	sc.Data.Length = &scenario.Length{Min: scenario.Duration(2 * time.Second), Max: scenario.Duration(4 * time.Second)}
	sc.Load = scenario.Load{SessionsPerSecond: 100}
	sc.Phases = scenario.Phases{RampUp: scenario.Duration(time.Second), Duration: scenario.Duration(3 * time.Second), SteadyStart: true}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	if d, v := sc.PrefillSessions(); d < 240 || d > 260 || v != 0 {
		t.Fatalf("prefill %d data %d voice, want about 250 (300 steady less 50 from the ramp)", d, v)
	}
	st, err := Run(context.Background(), Config{Scenario: sc, Driver: newDriver(t, "h2c", srv.Addr()), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := sc.OpenSessions() // 100/s x 3 s
	for _, x := range st.Series {
		if x.Phase != "measure" {
			continue
		}
		// (an upper bound as wide as in TestSessionLengths: a slow server
		// on a loaded machine keeps sessions open past their length)
		if got := float64(x.OpenSessions); got < want*0.75 || got > want*2 {
			t.Errorf("second %d: %v sessions open, want about %.0f from the start of the window", x.Second, got, want)
		}
	}
	if e := st.Ops[OpCreate].Errors + st.Ops[OpUpdate].Errors + st.Ops[OpRelease].Errors; e > 0 {
		t.Fatalf("%d errors", e)
	}
	if last := st.Series[len(st.Series)-1]; last.OpenSessions != 0 && st.Abandoned == 0 {
		t.Fatalf("%d sessions still open at the end", last.OpenSessions)
	}
}
