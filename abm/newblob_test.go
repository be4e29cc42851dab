package abm

import (
	"bytes"
	"math"
	"testing"

	"github.com/chf-testbed/testbed/abm/record"
	"github.com/chf-testbed/testbed/chf"
)

// TestNewBlobMatchesTheABM checks the blob provisioning writes
// (record.NewBlob, which does not link this package) against this
// package's twin: an empty account with the credit limit, topped up with
// each bucket, encoded by appendSessions, its BinDue from sweepDue. Both
// must write the same bytes and due, refuse the same plans, and the blob
// must decode to the plan.
func TestNewBlobMatchesTheABM(t *testing.T) {
	const now = int64(1_800_000_000)
	data := func(units uint64, validity int64) chf.Bucket {
		return chf.Bucket{Service: chf.ServiceData, Units: units, Expires: validity}
	}
	for _, tc := range []struct {
		name            string
		balance, credit int64
		buckets         []chf.Bucket
		wantErr         bool
	}{
		{name: "prepaid", balance: 100},
		{name: "postpaid", balance: 100, credit: 5000},
		{name: "buckets", balance: 0, buckets: []chf.Bucket{data(20_000_000, 3600), {Service: chf.ServiceVoice, Units: 600}, {Service: chf.ServiceSMS, Units: 10, Expires: 60}, data(1, 0)}},
		{name: "postpaid with a bucket", balance: 7, credit: 50, buckets: []chf.Bucket{data(5_000_000, 0)}},
		{name: "negative credit limit", credit: -1, wantErr: true},
		{name: "balance + credit limit overflows", balance: math.MaxInt64 - 5, credit: 6, wantErr: true},
		{name: "no service", buckets: []chf.Bucket{{Units: 1}}, wantErr: true},
		{name: "unknown service", buckets: []chf.Bucket{{Service: chf.ServiceSMS + 1, Units: 1}}, wantErr: true},
		{name: "no units", buckets: []chf.Bucket{data(0, 0)}, wantErr: true},
		{name: "negative validity", buckets: []chf.Bucket{data(1, -1)}, wantErr: true},
		{name: "units overflow in total", buckets: []chf.Bucket{data(math.MaxUint64, 0), data(1, 0)}, wantErr: true},
		{name: "validity overflows", buckets: []chf.Bucket{data(1, math.MaxInt64-now+1)}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blob, due, err := record.NewBlob(tc.balance, tc.credit, tc.buckets, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			// The twin.
			a := account{balance: tc.balance, creditLimit: tc.credit}
			for i := range tc.buckets {
				if p := a.topUp(&chf.TopUp{Bucket: tc.buckets[i]}, now); p != "" {
					t.Fatalf("the ABM refuses bucket %d: %s", i, p)
				}
			}
			want, wantDue := a.appendSessions(nil), a.sweepDue()
			if tc.credit == 0 && len(tc.buckets) == 0 {
				want = []byte{} // an empty blob: an account without sessions
			}
			if !bytes.Equal(blob, want) || due != wantDue {
				t.Fatalf("NewBlob = %x due %d, the ABM writes %x due %d", blob, due, want, wantDue)
			}
			var d account
			if err := d.decodeSessions(blob); err != nil {
				t.Fatal(err)
			}
			if d.creditLimit != tc.credit || len(d.buckets) != len(tc.buckets) || len(d.sessions) != 0 || d.barred {
				t.Fatalf("decoded %+v", d)
			}
		})
	}
}
