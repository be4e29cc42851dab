package moneycheck

import (
	"testing"

	"github.com/chf-testbed/testbed/loadgen/audit"
)

func testModel(t *testing.T) *Model {
	t.Helper()
	tr, err := audit.ParseTariff([]byte(DefaultTariff))
	if err != nil {
		t.Fatal(err)
	}
	return NewModel(tr)
}

// TestModelSemantics checks the model's answers on the rules of issue 47
// (decisions.md), one script per rule, from a fresh account of 100.
func TestModelSemantics(t *testing.T) {
	m := testModel(t)
	create := func(sess int, seq uint32, rg uint32, req uint64) *Op {
		return &Op{Kind: KindCreate, Sess: sess, Seq: seq, Stamp: int64(seq), Lines: []Line{{RG: rg, Request: true, Requested: req}}}
	}
	event := func(seq uint32, typ string, l Line) *Op {
		return &Op{Kind: KindEvent, Seq: seq, Stamp: int64(seq), EventType: typ, Lines: []Line{l}}
	}
	type want struct {
		status  int
		charged int64
		units   uint64
		final   bool
	}
	f := func(name string, ops []*Op, wants []want, view AccountView) {
		t.Helper()
		s := &state{balance: 100}
		for i, op := range ops {
			obs := &Answer{Ref: "ref"}
			a := m.apply(s, op, obs)
			w := wants[i]
			var units uint64
			var final bool
			if len(a.Lines) > 0 {
				units, final = a.Lines[0].Units, a.Lines[0].Final
			}
			if a.Status != w.status || a.Charged != w.charged || units != w.units || final != w.final {
				t.Errorf("%s: op %d %s: %s, want status %d charged %d units %d final %v", name, i, op, a.String(), w.status, w.charged, w.units, w.final)
			}
		}
		view.Available = view.Balance - view.Reserved
		if got := s.view(); got != view {
			t.Errorf("%s: account {%s}, want {%s}", name, got, view)
		}
	}
	// Data at 7 per MB: the default grant 5 MB costs 35; maxGrant 20 MB.
	f("grant capped by maxGrant", []*Op{create(0, 1, rgData, 50_000_000)},
		[]want{{201, 0, 14_285_714, true}}, AccountView{Balance: 100, Reserved: 100}) // capped at 20 MB (140), shrunk to what 100 covers
	f("grant shrunk to the available balance", []*Op{create(0, 1, rgVoice, 0), create(1, 2, rgVoice, 0)},
		[]want{{201, 0, 50, true}, {403, 0, 0, false}}, AccountView{Balance: 100, Reserved: 100})
	f("IEC refused when not covered", []*Op{event(1, "IEC", Line{RG: rgSMS, Request: true, Requested: 10}), event(2, "IEC", Line{RG: rgSMS, Request: true, Requested: 30}), event(3, "", Line{RG: rgSMS, Request: true, Requested: 1})},
		[]want{{201, 50, 10, false}, {201, 50, 10, false}, {403, 0, 0, false}}, AccountView{Balance: 0, Debited: 100}) // 30 capped at maxGrant 10
	f("PEC debited with overage", []*Op{event(1, "PEC", Line{RG: rgSMS, Used: 30})},
		[]want{{201, 100, 30, false}}, AccountView{Balance: 0, Debited: 100, Overage: 50})
	f("retransmission answered once, charged once", []*Op{event(1, "", Line{RG: rgSMS, Used: 2}), event(1, "", Line{RG: rgSMS, Used: 2})},
		[]want{{201, 10, 2, false}, {201, 10, 2, false}}, AccountView{Balance: 90, Debited: 10})
	f("top-up overflow refused", []*Op{{Kind: KindTopUp, Amount: 1<<63 - 1}},
		[]want{{400, 0, 0, false}}, AccountView{Balance: 100})
	topUp := func(id int, amount int64) *Op { return &Op{ID: id, Kind: KindTopUp, Amount: amount} }
	f("top-up credited once by its key", []*Op{topUp(1, 50), topUp(1, 50), topUp(2, 50)},
		[]want{{200, 0, 0, false}, {200, 0, 0, false}, {200, 0, 0, false}}, AccountView{Balance: 200, Credited: 100})
	upd := &Op{Kind: KindUpdate, Sess: 0, Seq: 2, Lines: []Line{{RG: rgVoice, Used: 70, Offline: true}}}
	f("offline usage on an online grant charged online", []*Op{create(0, 1, rgVoice, 0), upd},
		[]want{{201, 0, 50, true}, {200, 100, 0, false}}, AccountView{Balance: 0, Debited: 100, Overage: 40})
}

// TestAdvanceAllowsEitherOrder checks the candidate sets: requests sent
// together may be served in any order, and a lost answer allows both
// outcomes.
func TestAdvanceAllowsEitherOrder(t *testing.T) {
	m := testModel(t)
	a := &Op{Kind: KindEvent, Seq: 1, Stamp: 1, Lines: []Line{{RG: rgSMS, Request: true, Requested: 10}}}
	b := &Op{Kind: KindEvent, Seq: 2, Stamp: 2, Lines: []Line{{RG: rgSMS, Request: true, Requested: 10}}}
	s := &state{balance: 60}
	// b was served first: a is refused.
	obs := []Answer{{Status: 403, Cause: causeQuota, HasCharged: true}, {Status: 201, HasCharged: true, Charged: 50, Lines: []LineAnswer{{RG: rgSMS, Result: resSuccess, Units: 10}}}}
	next, why, err := m.advance([]*state{s}, []*Op{a, b}, obs)
	if err != nil || len(next) != 1 || next[0].balance != 10 {
		t.Fatalf("advance: %d candidates, why %q, err %v", len(next), why, err)
	}
	// Both charged: impossible with 60.
	obs[0] = obs[1]
	if next, _, _ := m.advance([]*state{s}, []*Op{a, b}, obs); len(next) != 0 {
		t.Fatalf("advance accepted both events charged on 60")
	}
	// A lost answer: either outcome.
	obs[0] = Answer{InDoubt: true}
	obs[1] = Answer{Status: 201, HasCharged: true, Charged: 50, Lines: []LineAnswer{{RG: rgSMS, Result: resSuccess, Units: 10}}}
	next, _, _ = m.advance([]*state{s}, []*Op{a, b}, obs)
	if len(next) != 2 {
		t.Fatalf("a lost answer: %d candidates, want 2 (a refused before b, or a never arrived)", len(next))
	}
}

func TestParseFaults(t *testing.T) {
	f := func(in string, want int, ok bool) {
		t.Helper()
		got, err := ParseFaults(in)
		if (err == nil) != ok || len(got) != want {
			t.Errorf("ParseFaults(%q) = %v, %v; want %d faults, ok %v", in, got, err, want, ok)
		}
	}
	f("on", 8, true)
	f("off", 0, true)
	f("kill", 4, true)
	f("aslite", 2, true)
	f("kill:cgw,stop:aslite,kill:cgw", 2, true)
	f("kill:nope", 0, false)
	f("explode", 0, false)
}
