package abm

import (
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
