package abm

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// batchScript is a deterministic mix of events over a few accounts, cut
// into batches: sessions (create, update, release, retries, stale
// numbers), one-time events, inquiries, unknown subscribers and several
// events on one account inside one batch.
func batchScript(accounts int) [][]chf.ApplyRequest {
	supi := func(i int) string { return fmt.Sprintf("imsi-00101%010d", i%accounts+1) }
	var all []chf.ApplyRequest
	for round := range 6 {
		for a := range accounts {
			s := supi(a)
			sess := fmt.Sprintf("s%d", a)
			switch round {
			case 0:
				all = append(all, chf.ApplyRequest{Op: chf.OpCreate, SUPI: s, Session: sess, Seq: 0, Lines: []chf.RatedLine{dataLine(0, 5_000_000)}})
			case 1, 2:
				all = append(all, chf.ApplyRequest{Op: chf.OpUpdate, SUPI: s, Session: sess, Seq: uint32(round), Lines: []chf.RatedLine{dataLine(uint64(1_000_000*(a+1)), 5_000_000)}})
			case 3:
				// A retry of round 2 (charges nothing) and a stale number.
				all = append(all, chf.ApplyRequest{Op: chf.OpUpdate, SUPI: s, Session: sess, Seq: 2, Lines: []chf.RatedLine{dataLine(uint64(1_000_000*(a+1)), 5_000_000)}})
				all = append(all, chf.ApplyRequest{Op: chf.OpUpdate, SUPI: s, Session: sess, Seq: 1, Lines: []chf.RatedLine{dataLine(7, 0)}})
			case 4:
				all = append(all, chf.ApplyRequest{Op: chf.OpEvent, SUPI: s, Session: fmt.Sprintf("sms%d", a), Seq: 0, Lines: []chf.RatedLine{smsLine(int64(3 + a))}})
				all = append(all, chf.ApplyRequest{Op: chf.OpBalance, SUPI: s})
			case 5:
				all = append(all, chf.ApplyRequest{Op: chf.OpRelease, SUPI: s, Session: sess, Seq: 3, Lines: []chf.RatedLine{dataLine(2_500_000, 0)}})
			}
		}
		all = append(all, chf.ApplyRequest{Op: chf.OpEvent, SUPI: "imsi-001019999999999", Session: "x", Lines: []chf.RatedLine{smsLine(1)}})
	}
	var batches [][]chf.ApplyRequest
	for i, size := 0, 1; i < len(all); size = size%7 + 1 {
		n := min(size, len(all)-i)
		batches = append(batches, all[i:i+n])
		i += n
	}
	return batches
}

// TestApplyBatchAnswersWhatApplyAnswers runs the same events through
// ApplyBatch on one store and one by one through Apply on a twin store:
// every answer, every charge and every final balance must be equal.
func TestApplyBatchAnswersWhatApplyAnswers(t *testing.T) {
	for _, cache := range []int{0, 1000} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) {
			const accounts = 5
			const first = "imsi-001010000000001"
			clk := newFakeClock()
			clA, clB := startStore(t), startStore(t)
			provisionAccounts(t, clA, first, accounts, 1_000)
			provisionAccounts(t, clB, first, accounts, 1_000)
			batched := New(clA, Config{Now: clk.Now, AccountCache: cache})
			single := New(clB, Config{Now: clk.Now})
			ctx := context.Background()
			var charged int64
			for bi, batch := range batchScript(accounts) {
				reqs := make([]*chf.ApplyRequest, len(batch))
				resps := make([]*chf.ChargeResponse, len(batch))
				errs := make([]error, len(batch))
				for i := range batch {
					reqs[i], resps[i] = &batch[i], new(chf.ChargeResponse)
				}
				batched.ApplyBatch(ctx, reqs, resps, errs)
				for i := range batch {
					var want chf.ChargeResponse
					werr := single.Apply(ctx, &batch[i], &want)
					if (errs[i] == nil) != (werr == nil) {
						t.Fatalf("batch %d item %d (%+v): error %v, Apply says %v", bi, i, batch[i], errs[i], werr)
					}
					got := *resps[i]
					if len(got.Lines) == 0 && len(want.Lines) == 0 {
						got.Lines, want.Lines = nil, nil
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("batch %d item %d (%+v):\n got %+v\nwant %+v", bi, i, batch[i], got, want)
					}
					charged += got.Charged
				}
				clk.AdvanceSeconds(1)
			}
			if charged == 0 {
				t.Fatal("the script charged nothing")
			}
			for a := range accounts {
				s := fmt.Sprintf("imsi-00101%010d", a+1)
				var ra, rb chf.ChargeResponse
				if err := batched.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: s}, &ra); err != nil {
					t.Fatal(err)
				}
				if err := single.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: s}, &rb); err != nil {
					t.Fatal(err)
				}
				if ra.Balance != rb.Balance || ra.Debited != rb.Debited || ra.Reserved != 0 || ra.Balance+ra.Debited != 1_000 {
					t.Errorf("%s: batched balance %d debited %d reserved %d; one by one %d/%d", s, ra.Balance, ra.Debited, ra.Reserved, rb.Balance, rb.Debited)
				}
			}
			if cache > 0 && batched.Stats().CacheHits == 0 {
				t.Error("batches never used the account cache")
			}
		})
	}
}

// TestApplyBatchConflicts: another ABM writes the accounts between two
// batches of a caching ABM, so every cached write of the second batch meets
// a newer generation; each event is then applied alone on a fresh read and
// lands exactly once.
func TestApplyBatchConflicts(t *testing.T) {
	cl := startStore(t)
	const accounts = 4
	const first = "imsi-001010000000001"
	provisionAccounts(t, cl, first, accounts, 10_000)
	// The cache is sharded 64 ways with entries/64 per shard: 100 entries
	// kept one per shard, and two of the 4 accounts shared a shard (and
	// evicted each other) about once in 11 runs, whatever the code did.
	a := New(cl, Config{AccountCache: 64 * accounts})
	b := New(cl, Config{})
	ctx := context.Background()
	batch := func(round int) {
		t.Helper()
		reqs := make([]*chf.ApplyRequest, accounts)
		resps := make([]*chf.ChargeResponse, accounts)
		errs := make([]error, accounts)
		for i := range reqs {
			reqs[i] = &chf.ApplyRequest{Op: chf.OpEvent, SUPI: fmt.Sprintf("imsi-00101%010d", i+1), Session: fmt.Sprintf("a%d", round), Lines: []chf.RatedLine{smsLine(10)}}
			resps[i] = new(chf.ChargeResponse)
		}
		a.ApplyBatch(ctx, reqs, resps, errs)
		for i := range reqs {
			if errs[i] != nil || resps[i].Result != chf.ResultSuccess || resps[i].Charged != 10 {
				t.Fatalf("round %d item %d: %+v %v", round, i, resps[i], errs[i])
			}
		}
	}
	batch(0) // reads, writes, fills a's cache
	for i := range accounts {
		var resp chf.ChargeResponse
		req := chf.ApplyRequest{Op: chf.OpEvent, SUPI: fmt.Sprintf("imsi-00101%010d", i+1), Session: "b", Lines: []chf.RatedLine{smsLine(1)}}
		if err := b.Apply(ctx, &req, &resp); err != nil || resp.Charged != 1 {
			t.Fatalf("other ABM: %+v %v", resp, err)
		}
	}
	batch(1) // every cached entry is stale now
	if st := a.Stats(); st.CacheStale != accounts {
		t.Errorf("stale cache writes = %d, want %d (%+v)", st.CacheStale, accounts, st)
	}
	batch(2) // a wrote last again: cached writes succeed
	if st := a.Stats(); st.CacheHits < accounts {
		t.Errorf("cache hits = %d, want at least %d (%+v)", st.CacheHits, accounts, st)
	}
	for i := range accounts {
		var resp chf.ChargeResponse
		if err := b.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: fmt.Sprintf("imsi-00101%010d", i+1)}, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Balance != 10_000-31 || resp.Debited != 31 {
			t.Errorf("account %d: balance %d debited %d, want %d and 31", i+1, resp.Balance, resp.Debited, 10_000-31)
		}
	}
}
