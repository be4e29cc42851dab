package abm

import (
	"context"
	"fmt"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/chf"
)

// TestSweepReauthorizesOlderTariff: sessions granted under an older
// tariff epoch are queued for re-authorisation once the ABM has seen a
// newer one, once; an account whose only session was re-granted under
// the new epoch is not; a full queue drops and the next pass queues
// again; the queue answers OpNotifications, at most NotificationsMax at
// a time.
func TestSweepReauthorizesOlderTariff(t *testing.T) {
	cl := startStore(t)
	svc := New(cl, Config{NotifyQueue: 2})
	provisionAccounts(t, cl, "imsi-001010000000001", 3, 1000)
	ctx := context.Background()
	var resp chf.ChargeResponse
	apply := func(req chf.ApplyRequest) {
		t.Helper()
		if err := svc.Apply(ctx, &req, &resp); err != nil || resp.Result != chf.ResultSuccess {
			t.Fatalf("%+v: %v %+v", req, err, resp)
		}
	}
	take := func() []chf.NotifyTarget {
		t.Helper()
		apply(chf.ApplyRequest{Op: chf.OpNotifications})
		return append([]chf.NotifyTarget(nil), resp.Targets...)
	}
	sweep := func() {
		t.Helper()
		if _, err := svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	line := []chf.RatedLine{dataLine(0, 1_000_000)}
	// Account 1: two sessions under epoch 7, one without a notifyUri.
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001010000000001", Session: "a", Lines: line, Notify: []byte("http://smf/a"), Epoch: 7})
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001010000000001", Session: "b", Lines: line, Epoch: 7})
	// Account 2: one session, re-granted under epoch 8.
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001010000000002", Session: "c", Lines: line, Notify: []byte("http://smf/c"), Epoch: 7})
	sweep()
	if got := take(); len(got) != 0 {
		t.Fatalf("queued before a tariff change: %v", got)
	}
	apply(chf.ApplyRequest{Op: chf.OpUpdate, SUPI: "imsi-001010000000002", Session: "c", Seq: 1, Lines: line, Epoch: 8})
	// Account 3: two sessions under 7 with notifyUris.
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001010000000003", Session: "d", Lines: line, Notify: []byte("http://smf/d"), Epoch: 7})
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001010000000003", Session: "e", Lines: line, Notify: []byte("http://smf/e"), Epoch: 7})
	// A create on account 1 under 8: its other sessions still hold 7.
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001010000000001", Session: "f", Lines: line, Notify: []byte("http://smf/f"), Epoch: 8})

	// A queue of 2: one account's two targets fit, the other's are
	// dropped and queued by the next pass (the first's epoch recorded).
	sweep()
	got := take()
	if len(got) != 2 || svc.notes.dropped.Load() != 2 {
		t.Fatalf("first pass: %v, %d dropped", got, svc.notes.dropped.Load())
	}
	sweep()
	got = append(got, take()...)
	uris := map[string]bool{}
	for _, g := range got {
		uris[g.URI] = true
	}
	if len(got) != 4 || !uris["http://smf/a"] || !uris["http://smf/f"] || !uris["http://smf/d"] || !uris["http://smf/e"] {
		t.Fatalf("two passes: %v", got)
	}
	sweep()
	if got := take(); len(got) != 0 {
		t.Fatalf("third pass: %v", got)
	}
	if q := svc.notes.queued[reasonTariff].Load(); q != 4 {
		t.Fatalf("queued %d", q)
	}
}

// TestSweepReauthorizesExpiredBucket: a session whose reservation holds
// units of a bucket that expired is queued (by the injected clock); one
// granted in money is not.
func TestSweepReauthorizesExpiredBucket(t *testing.T) {
	cl := startStore(t)
	clk := newFakeClock()
	svc := New(cl, Config{Now: clk.Now})
	provisionAccounts(t, cl, "imsi-001010000000001", 2, 1000)
	ctx := context.Background()
	var resp chf.ChargeResponse
	apply := func(req chf.ApplyRequest) {
		t.Helper()
		if err := svc.Apply(ctx, &req, &resp); err != nil || resp.Result != chf.ResultSuccess {
			t.Fatalf("%+v: %v %+v", req, err, resp)
		}
	}
	apply(chf.ApplyRequest{Op: chf.OpTopUp, SUPI: "imsi-001010000000001", TopUp: chf.TopUp{Bucket: chf.Bucket{Service: chf.ServiceData, Units: 5_000_000, Expires: 30}}})
	line := []chf.RatedLine{dataLine(0, 1_000_000)}
	line[0].ValidityTime = 600
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001010000000001", Session: "a", Lines: line, Notify: []byte("http://smf/a")})
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001010000000002", Session: "b", Lines: line, Notify: []byte("http://smf/b")})
	if _, err := svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if len(svc.notes.ch) != 0 {
		t.Fatalf("%d queued while the bucket lives", len(svc.notes.ch))
	}
	clk.AdvanceSeconds(31)
	if _, err := svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	apply(chf.ApplyRequest{Op: chf.OpNotifications})
	if len(resp.Targets) != 1 || resp.Targets[0].URI != "http://smf/a" || svc.notes.queued[reasonBucket].Load() != 1 {
		t.Fatalf("after expiry: %v", resp.Targets)
	}
}

// TestSweepPaced: a capped pass is spread over at least accounts / rate
// (the store examines every account, due or not) and reads at most rate
// records due a second; a spread pass takes at least its spread; a
// cancelled pass ends early.
func TestSweepPaced(t *testing.T) {
	cl := startStore(t)
	svc := New(cl, Config{})
	const n = 3000
	provisionAccounts(t, cl, "imsi-001010000000001", n, 1000)
	ctx := context.Background()
	pass := func(rate float64, spread time.Duration, wantRead int64, least time.Duration) {
		t.Helper()
		before := svc.sweep.scanned.Load()
		start := time.Now()
		if _, err := svc.sweepPass(ctx, rate, spread); err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		if read := svc.sweep.scanned.Load() - before; read != uint64(wantRead) || svc.sweep.lastCount.Load() != wantRead {
			t.Fatalf("rate %v, spread %v: read %d, want %d", rate, spread, read, wantRead)
		}
		if el < least {
			t.Fatalf("rate %v, spread %v: pass took %v, want at least %v", rate, spread, el, least)
		}
	}
	// Nothing due: nothing read, but 3000 accounts at 10,000/s spread the
	// pass over 0.3 s (its last scan starts at 255/256 of it).
	pass(10000, 0, 0, 290*time.Millisecond)
	if got := svc.sweep.accounts.Load(); got != n {
		t.Fatalf("accounts counted %d, want %d", got, n)
	}
	pass(0, 200*time.Millisecond, 0, 190*time.Millisecond)
	// Every record due: all read, at most 10,000 a second.
	for i := range n {
		k, err := as.NewKey(svc.cfg.Namespace, svc.cfg.Set, fmt.Sprintf("imsi-%015d", 1010000000001+i))
		if err != nil {
			t.Fatal(err)
		}
		if aerr := cl.Put(nil, k, as.BinMap{BinDue: 1}); aerr != nil {
			t.Fatal(aerr)
		}
	}
	pass(10000, 0, n, 290*time.Millisecond)
	// Cancelled: the pass ends early without an error.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := svc.sweepPass(cctx, 100, 0); err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("cancelled pass: %v after %v", err, time.Since(start))
	}
}
