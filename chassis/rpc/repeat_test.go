package rpc

import (
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// TestRepeatableNoAlloc: a round trip is repeatable only when every request in it
// carries an identity the ABM keeps (or changes nothing); asking allocates nothing.
func TestRepeatableNoAlloc(t *testing.T) {
	f := func(want bool, reqs ...chf.ChargeRequest) {
		t.Helper()
		calls := make([]*call[*chf.ChargeRequest, *chf.ChargeResponse], len(reqs))
		for i := range reqs {
			calls[i] = &call[*chf.ChargeRequest, *chf.ChargeResponse]{req: &reqs[i]}
		}
		if got := repeatable(calls); got != want {
			t.Fatalf("repeatable(%+v) = %v, want %v", reqs, got, want)
		}
	}
	create := chf.ChargeRequest{Op: chf.OpCreate, SUPI: "imsi-1", Session: "s", Key: 7}
	update := chf.ChargeRequest{Op: chf.OpUpdate, SUPI: "imsi-1", Session: "s", Seq: 1}
	event := chf.ChargeRequest{Op: chf.OpEvent, SUPI: "imsi-1", Key: 9}
	inquiry := chf.ChargeRequest{Op: chf.OpBalance, SUPI: "imsi-1"}
	topUp := chf.ChargeRequest{Op: chf.OpTopUp, SUPI: "imsi-1", TopUp: chf.TopUp{Amount: 5}}
	anonymous := chf.ChargeRequest{Op: chf.OpEvent, SUPI: "imsi-1"}
	f(true, create)
	f(true, create, update, event, inquiry)
	f(false, topUp)
	f(false, create, topUp)
	f(false, anonymous)
	f(false, chf.ChargeRequest{Op: chf.OpAbortSessions, SUPI: "imsi-1"})
	reqs := []chf.ChargeRequest{create, update, event, inquiry}
	calls := make([]*call[*chf.ChargeRequest, *chf.ChargeResponse], len(reqs))
	for i := range reqs {
		calls[i] = &call[*chf.ChargeRequest, *chf.ChargeResponse]{req: &reqs[i]}
	}
	if n := testing.AllocsPerRun(100, func() { repeatableSink = repeatable(calls) }); n != 0 {
		t.Fatalf("repeatable allocates %v times", n)
	}
}

var repeatableSink bool
