package abm

import (
	"context"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// TestReplayReportsTheFirstCharge: through aslite and the official
// client, each charging request repeated with its identity (a create and
// an event by key, an update and a release by sequence number) is
// answered with what its first transmission charged and granted, marked
// Replayed, and debits nothing again; alone (Apply) and batched
// (ApplyBatch), with and without the account cache.
func TestReplayReportsTheFirstCharge(t *testing.T) {
	cl := startStore(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		cache int
		batch bool
	}{{"apply", -1, false}, {"apply/cache", 0, false}, {"batch", -1, true}, {"batch/cache", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			svc := New(cl, Config{AccountCache: tc.cache})
			const supi = "imsi-001010000000077"
			provisionAccounts(t, cl, supi, 1, 1000)
			apply := func(req *chf.ApplyRequest) chf.ChargeResponse {
				t.Helper()
				var resp chf.ChargeResponse
				var err error
				if tc.batch {
					// the request with an inquiry of the same account
					errs := make([]error, 2)
					var other chf.ChargeResponse
					svc.ApplyBatch(ctx, []*chf.ApplyRequest{req, {Op: chf.OpBalance, SUPI: supi}}, []*chf.ChargeResponse{&resp, &other}, errs)
					err = errs[0]
				} else {
					err = svc.Apply(ctx, req, &resp)
				}
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			balance := func() int64 {
				t.Helper()
				var r chf.ChargeResponse
				if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi}, &r); err != nil {
					t.Fatal(err)
				}
				return r.Balance
			}
			sms := chf.RatedLine{RatingGroup: 30, Service: chf.ServiceSMS, UsedUnits: 1, UsedCost: 5, Price: 5, UnitSize: 1}
			steps := []struct {
				name string
				req  chf.ApplyRequest
				cost int64
			}{
				{"create", chf.ApplyRequest{Op: chf.OpCreate, SUPI: supi, Session: "s1", Key: 11, Digest: 1,
					Lines: []chf.RatedLine{dataLine(0, 10_000_000)}}, 0},
				{"update", chf.ApplyRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s1", Seq: 1, Digest: 2,
					Lines: []chf.RatedLine{dataLine(3_000_000, 10_000_000)}}, 3},
				{"release", chf.ApplyRequest{Op: chf.OpRelease, SUPI: supi, Session: "s1", Seq: 2, Digest: 3,
					Lines: []chf.RatedLine{dataLine(4_000_000, 0)}}, 4},
				{"event", chf.ApplyRequest{Op: chf.OpEvent, SUPI: supi, Key: 21, Digest: 4,
					Lines: []chf.RatedLine{sms}}, 5},
			}
			for _, st := range steps {
				b0 := balance()
				first := apply(&st.req)
				if first.Result != chf.ResultSuccess || first.Replayed || first.Charged != st.cost || balance() != b0-st.cost {
					t.Fatalf("%s: first answer %+v, want charged %d from %d", st.name, first, st.cost, b0)
				}
				again := st.req
				for range 2 {
					r := apply(&again)
					if r.Result != chf.ResultSuccess || !r.Replayed || r.Charged != st.cost || len(r.Lines) != len(first.Lines) ||
						len(r.Lines) > 0 && r.Lines[0].Granted != first.Lines[0].Granted || r.Session != "" && st.req.Op != chf.OpCreate {
						t.Fatalf("%s: replay %+v, want the first answer %+v marked Replayed", st.name, r, first)
					}
					if b := balance(); b != b0-st.cost {
						t.Fatalf("%s: replay moved the balance to %d, want %d", st.name, b, b0-st.cost)
					}
				}
			}
		})
	}
}
