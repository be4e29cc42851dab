package ocp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/cdr"
	"github.com/chf-testbed/testbed/cdr/cdrtest"
	"github.com/chf-testbed/testbed/cdr/collector"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/ocp"
)

// TestCDRSinkSeesEveryAnsweredRequest charges through Charge and
// ChargeBatch with a CDR recorder as the sink: the records (decoded
// independently) charge what the balance lost, a refused request adds
// nothing, and the session's records end with its release.
func TestCDRSinkSeesEveryAnsweredRequest(t *testing.T) {
	e := newEnv(t, abm.Config{})
	e.provision(supi, 1000)
	dir := t.TempDir()
	cfg := cdr.DefaultConfig()
	cfg.Dir, cfg.Node = dir, "ocp-test"
	rec, err := cdr.NewRecorder(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.p.SetSink(rec)
	e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "s1", Seq: 1, Lines: []chf.UsageLine{data(0, true)}})
	e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s1", Seq: 2, Lines: []chf.UsageLine{data(2_500_000, true)}})
	reqs := []*chf.ChargeRequest{
		{Op: chf.OpEvent, SUPI: supi, Key: 7, Lines: []chf.UsageLine{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 2}}}},
		{Op: chf.OpUpdate, SUPI: "", Session: "s1", Seq: 3}, // invalid: no subscriber
		{Op: chf.OpRelease, SUPI: supi, Session: "s1", Seq: 3, Lines: []chf.UsageLine{data(1_000_000, false)}},
	}
	resps := []*chf.ChargeResponse{{}, {}, {}}
	errs := make([]error, 3)
	e.p.ChargeBatch(context.Background(), reqs, resps, errs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("batch item %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := cdrtest.DecodeDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	bal := e.charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi})
	var charged int64
	for _, r := range rs {
		charged += r.Charged
	}
	if len(rs) != 2 || rs[0].Session != cdr.EventSessionID(7) || rs[1].Session != "s1" || rs[1].Cause != int64(cdr.CauseNormalRelease) ||
		len(rs[1].Usage) != 2 || rs[1].Usage[0].Volume != 2_500_000 || charged != 1000-bal.Balance || charged != 3+10+1 {
		t.Fatalf("records %+v charge %d, balance %d", rs, charged, bal.Balance)
	}
}

// errAnswerLost is the fault loseAnswers injects: the ABM applied the
// request, its answer never reached the OCP (a timeout, a dropped
// connection, an ABM killed after its write).
var errAnswerLost = errors.New("abm answer lost")

// loseAnswers applies every request on the real ABM and, for the
// requests lose picks, drops the answer and fails in doubt.
type loseAnswers struct {
	ocp.Accounts
	lose func(*chf.ApplyRequest) bool
}

func (l *loseAnswers) Apply(ctx context.Context, req *chf.ApplyRequest, resp *chf.ChargeResponse) error {
	if err := l.Accounts.Apply(ctx, req, resp); err != nil {
		return err
	}
	if l.lose(req) {
		*resp = chf.ChargeResponse{Lines: resp.Lines[:0]}
		return errAnswerLost
	}
	return nil
}

// TestCDRsHoldRequestsWhoseAnswerWasLost: the ABM's answer to the first
// transmission of a create, an update, a release and an event is lost
// (the ABM applied and debited); each is retried with its identity (the
// create, as an Nchf client does, under a new session id) and answered
// as a replay. With one OCP, its records charge what the balance lost,
// with no duplicate; with two (a retry landing on the other OCP, and an
// answer recorded by one and lost on its way to the client, retried on
// the other) the collector rule keeps each request once.
func TestCDRsHoldRequestsWhoseAnswerWasLost(t *testing.T) {
	e := newEnv(t, abm.Config{})
	e.provision(supi, 1000)
	lost := map[string]bool{}
	acc := &loseAnswers{Accounts: e.abm, lose: func(ar *chf.ApplyRequest) bool {
		k := fmt.Sprintf("%d/%s/%d/%d", ar.Op, ar.Session, ar.Seq, ar.Key)
		if ar.Op == chf.OpCreate || ar.Op == chf.OpEvent {
			k = fmt.Sprintf("%d/%d", ar.Op, ar.Key)
		}
		first := !lost[k]
		lost[k] = true
		return first && !strings.HasPrefix(ar.Session, "kept")
	}}
	ocps := make([]*ocp.Processor, 2)
	recs := make([]*cdr.Recorder, 2)
	dirs := make([]string, 2)
	for i := range ocps {
		dirs[i] = t.TempDir()
		cfg := cdr.DefaultConfig()
		cfg.Dir, cfg.Node = dirs[i], fmt.Sprintf("ocp-%d", i+1)
		var err error
		if recs[i], err = cdr.NewRecorder(cfg, nil, nil); err != nil {
			t.Fatal(err)
		}
		ocps[i] = ocp.NewProcessor(nil, acc)
		ocps[i].SetSink(recs[i])
	}
	// charge sends req to OCP i until it has an answer, as a client
	// retrying after a failure does (a create under a new session id).
	charge := func(i int, req chf.ChargeRequest) chf.ChargeResponse {
		t.Helper()
		for try := 0; ; try++ {
			var resp chf.ChargeResponse
			err := ocps[i].Charge(context.Background(), &req, &resp)
			switch {
			case err == nil:
				return resp
			case !errors.Is(err, errAnswerLost) || try > 0:
				t.Fatalf("%+v: %v", req, err)
			case req.Op == chf.OpCreate:
				req.Session += "-retry"
			}
		}
	}
	sms := chf.UsageLine{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 2}}
	// One OCP: every answer lost once, every request retried on it.
	r := charge(0, chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "s1", Seq: 1, Key: 11, Lines: []chf.UsageLine{data(1_500_000, true)}})
	if !r.Replayed || r.Session != "s1" || r.Charged != 2 {
		t.Fatalf("retried create: %+v", r)
	}
	charge(0, chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s1", Seq: 2, Lines: []chf.UsageLine{data(2_500_000, true)}})
	charge(0, chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: "s1", Seq: 3, Lines: []chf.UsageLine{data(1_000_000, false)}})
	charge(0, chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Key: 12, Lines: []chf.UsageLine{sms}})
	// and an answer the OCP recorded, lost on its way to the client
	// (kept: the fake keeps the ABM's answer), retried on the same OCP
	kept := chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "kept1", Seq: 1, Key: 13, Lines: []chf.UsageLine{data(0, true)}}
	charge(0, kept)
	kept.Op, kept.Seq, kept.Key, kept.Lines = chf.OpUpdate, 2, 0, []chf.UsageLine{data(3_000_000, true)}
	charge(0, kept)
	if r := charge(0, kept); !r.Replayed || r.Charged != 3 {
		t.Fatalf("repeated update: %+v", r)
	}
	one := e.charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi}).Balance
	if err := recs[0].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs, err := collector.DecodeDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, dropped := collector.Collect(rs); dropped != 0 || sum(rs) != 1000-one || sum(rs) != 2+3+1+10+3 {
		t.Fatalf("one OCP: records charge %d (%d duplicates), the balance lost %d: %+v", sum(rs), dropped, 1000-one, rs)
	}

	// Two OCPs, the first one's records set aside: a retry after a lost
	// answer lands on the other OCP; an answer recorded by OCP 2 and
	// lost on its way to the client is retried on OCP 1.
	ocps[0], recs[0] = ocps[1], recs[1] // OCP 1 is now a fresh one...
	cfg := cdr.DefaultConfig()
	dirs[0] = t.TempDir()
	cfg.Dir, cfg.Node = dirs[0], "ocp-1b"
	if recs[0], err = cdr.NewRecorder(cfg, nil, nil); err != nil {
		t.Fatal(err)
	}
	ocps[0] = ocp.NewProcessor(nil, acc)
	ocps[0].SetSink(recs[0])
	up := chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "kept1", Seq: 3, Lines: []chf.UsageLine{data(4_000_000, true)}}
	charge(1, up)
	if r := charge(0, up); !r.Replayed {
		t.Fatalf("update retried on OCP 1: %+v", r)
	}
	ev := chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Key: 14, Lines: []chf.UsageLine{sms}}
	var resp chf.ChargeResponse
	if err := ocps[0].Charge(context.Background(), &ev, &resp); !errors.Is(err, errAnswerLost) {
		t.Fatalf("event on OCP 1: %v", err)
	}
	if r := charge(1, ev); !r.Replayed || r.Charged != 10 {
		t.Fatalf("event retried on OCP 2: %+v", r)
	}
	charge(1, chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: "kept1", Seq: 4})
	two := e.charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi}).Balance
	for _, rec := range recs {
		if err := rec.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var all []collector.Record
	for _, d := range dirs {
		rs, err := collector.DecodeDir(d)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rs...)
	}
	kept2, dropped := collector.Collect(all)
	if dropped != 1 || sum(kept2) != one-two || sum(kept2) != 4+10 {
		t.Fatalf("two OCPs: collected records charge %d (%d duplicates dropped), the balance lost %d: %+v", sum(kept2), dropped, one-two, all)
	}
}

func sum(rs []collector.Record) int64 {
	var n int64
	for _, r := range rs {
		n += r.Charged
	}
	return n
}
