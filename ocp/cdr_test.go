package ocp_test

import (
	"context"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/cdr"
	"github.com/chf-testbed/testbed/cdr/cdrtest"
	"github.com/chf-testbed/testbed/chf"
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
	if len(rs) != 2 || rs[0].Session != "" || rs[1].Session != "s1" || rs[1].Cause != int64(cdr.CauseNormalRelease) ||
		len(rs[1].Usage) != 2 || rs[1].Usage[0].Volume != 2_500_000 || charged != 1000-bal.Balance || charged != 3+10+1 {
		t.Fatalf("records %+v charge %d, balance %d", rs, charged, bal.Balance)
	}
}
