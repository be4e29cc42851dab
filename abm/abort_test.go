package abm

import (
	"bytes"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// TestAbortBarsUpdates: OpAbortSessions lists the open sessions (as
// OpSessions does) and bars each, in the record: an update of a barred
// session is refused with END_USER_SERVICE_DENIED and charges nothing, a
// retry of an update answered before the abort still gets its answer,
// and the release takes the final usage and frees the reservation.
func TestAbortBarsUpdates(t *testing.T) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 4, maxClosed: 4}
	a := &account{balance: 1000, currency: "EUR"}
	var resp chf.ChargeResponse
	now := int64(1000)
	do := func(req chf.ApplyRequest) bool {
		t.Helper()
		resp = chf.ChargeResponse{}
		return a.apply(&req, now, &lim, &resp)
	}
	do(chf.ApplyRequest{Op: chf.OpCreate, Session: "s", Seq: 0, Lines: []chf.RatedLine{dataLine(0, 10_000_000)}, Notify: []byte("http://smf/1")})
	do(chf.ApplyRequest{Op: chf.OpUpdate, Session: "s", Seq: 1, Lines: []chf.RatedLine{dataLine(2_000_000, 10_000_000)}})
	if resp.Result != chf.ResultSuccess || resp.Charged != 2 {
		t.Fatalf("update before the abort: %+v", resp)
	}
	if !do(chf.ApplyRequest{Op: chf.OpAbortSessions}) || len(resp.Targets) != 1 || resp.Targets[0].URI != "http://smf/1" {
		t.Fatalf("abort: %+v", resp)
	}
	if do(chf.ApplyRequest{Op: chf.OpAbortSessions}) || len(resp.Targets) != 1 {
		t.Fatalf("a second abort wrote, or listed %+v", resp.Targets)
	}
	// The barred state survives the record.
	var b account
	if err := b.decodeSessions(a.appendSessions(nil)); err != nil || !b.sessions[0].aborted {
		t.Fatalf("decoded %v %+v", err, b.sessions)
	}
	a = &b
	a.balance = 998
	do(chf.ApplyRequest{Op: chf.OpUpdate, Session: "s", Seq: 1, Lines: []chf.RatedLine{dataLine(2_000_000, 10_000_000)}})
	if resp.Result != chf.ResultSuccess || !resp.Replayed || resp.Charged != 2 || a.balance != 998 {
		t.Fatalf("retry of the update answered before the abort (a replay of its charge of 2, balance 998 untouched): %+v, balance %d", resp, a.balance)
	}
	do(chf.ApplyRequest{Op: chf.OpUpdate, Session: "s", Seq: 2, Lines: []chf.RatedLine{dataLine(2_000_000, 10_000_000)}})
	if resp.Result != chf.ResultEndUserServiceDenied || resp.Charged != 0 || a.balance != 998 {
		t.Fatalf("update after the abort: %+v, balance %d", resp, a.balance)
	}
	do(chf.ApplyRequest{Op: chf.OpRelease, Session: "s", Seq: 3, Lines: []chf.RatedLine{dataLine(3_000_000, 0)}})
	if resp.Result != chf.ResultSuccess || resp.Charged != 3 || resp.Reserved != 0 {
		t.Fatalf("release after the abort: %+v", resp)
	}
}

// TestAbortBarsAccount: OpAbortSessions also bars the account, even one
// without sessions: a create or an event is refused with
// END_USER_SERVICE_DENIED and charges nothing, a repeat of a create
// answered before the abort gets its answer, a top-up leaves the bar,
// OpUnbar lifts it (writing once); the bar survives the record and a
// version 4 record (written before it existed) decodes unbarred.
func TestAbortBarsAccount(t *testing.T) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 4, maxClosed: 4, maxRecent: MaxRecent}
	a := &account{balance: 1000, currency: "EUR"}
	var resp chf.ChargeResponse
	do := func(req chf.ApplyRequest) bool {
		t.Helper()
		resp = chf.ChargeResponse{}
		return a.apply(&req, 1000, &lim, &resp)
	}
	create := chf.ApplyRequest{Op: chf.OpCreate, Session: "s", Key: 7, Digest: 9, Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}
	do(create)
	if resp.Result != chf.ResultSuccess || resp.Reserved == 0 {
		t.Fatalf("create: %+v", resp)
	}
	if !do(chf.ApplyRequest{Op: chf.OpAbortSessions}) || !resp.Barred || !a.barred {
		t.Fatalf("abort: %+v", resp)
	}
	// An old record has no flag: it decodes unbarred. (Encoded without
	// the recent identities, which before version 6 had a second key.)
	recent := a.recent
	a.recent = nil
	v3 := a.appendSessions(nil)
	a.recent = recent
	v3[0] = 4
	i := bytes.Index(v3, []byte{1, 1, 1, 's'}) // the account flags, then 1 session "s"
	if i < 0 {
		t.Fatalf("no account flags before the session in % x", v3)
	}
	var old account
	if err := old.decodeSessions(append(v3[:i:i], v3[i+1:]...)); err != nil || old.barred || len(old.sessions) != 1 {
		t.Fatalf("version 4 record: %v barred %v, %d sessions", err, old.barred, len(old.sessions))
	}
	var b account
	if err := b.decodeSessions(a.appendSessions(nil)); err != nil || !b.barred {
		t.Fatalf("decoded %v barred %v", err, b.barred)
	}
	b.balance, b.currency = a.balance, a.currency
	a = &b
	bal := a.balance
	if do(chf.ApplyRequest{Op: chf.OpCreate, Session: "t", Key: 8, Digest: 1, Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}) ||
		resp.Result != chf.ResultEndUserServiceDenied || resp.Charged != 0 {
		t.Fatalf("create on a barred account: %+v", resp)
	}
	if do(chf.ApplyRequest{Op: chf.OpEvent, Key: 10, Digest: 2, Lines: []chf.RatedLine{smsLine(5)}}) ||
		resp.Result != chf.ResultEndUserServiceDenied || resp.Charged != 0 || a.balance != bal {
		t.Fatalf("event on a barred account: %+v, balance %d", resp, a.balance)
	}
	do(create)
	if resp.Result != chf.ResultSuccess || len(resp.Lines) != 1 || resp.Lines[0].Granted.IsZero() || resp.Charged != 0 {
		t.Fatalf("repeat of the create answered before the abort: %+v", resp)
	}
	do(chf.ApplyRequest{Op: chf.OpTopUp, TopUp: chf.TopUp{Amount: 10}})
	if !resp.Barred {
		t.Fatalf("a top-up lifted the bar: %+v", resp)
	}
	if !do(chf.ApplyRequest{Op: chf.OpUnbar}) || resp.Barred || a.barred {
		t.Fatalf("unbar: %+v", resp)
	}
	if do(chf.ApplyRequest{Op: chf.OpUnbar}) {
		t.Fatal("a second unbar wrote")
	}
	do(chf.ApplyRequest{Op: chf.OpEvent, Key: 10, Digest: 2, Lines: []chf.RatedLine{smsLine(5)}})
	if resp.Result != chf.ResultSuccess || resp.Charged != 5 {
		t.Fatalf("event after the unbar: %+v", resp)
	}
}
