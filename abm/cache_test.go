package abm

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// smsLine is a rated one-time event costing cost minor units.
func smsLine(cost int64) chf.RatedLine {
	return chf.RatedLine{RatingGroup: 30, Service: chf.ServiceSMS, UsedUnits: 1, UsedCost: cost}
}

// TestAccountCacheSkipsReadsAndStaysExact: events through one service hit
// the cache; two services (two ABM pods) charging the same accounts at once
// keep each other's cache stale, and every debit still lands exactly once.
func TestAccountCacheSkipsReadsAndStaysExact(t *testing.T) {
	cl := startStore(t)
	const first = "imsi-001010000000001"
	const accounts, perWorker, workers = 3, 40, 4
	provision(t, cl, first, accounts, 1_000_000)
	a := New(cl, Config{})
	b := New(cl, Config{})
	ctx := context.Background()
	supi := func(i int) string { return fmt.Sprintf("imsi-00101%010d", i%accounts+1) }

	// One service alone: after the first write, events skip the read.
	for i := range 5 {
		var resp chf.ChargeResponse
		req := chf.ApplyRequest{Op: chf.OpEvent, SUPI: first, Session: fmt.Sprintf("solo%d", i), Seq: 1, Lines: []chf.RatedLine{smsLine(1)}}
		if err := a.Apply(ctx, &req, &resp); err != nil || resp.Result != chf.ResultSuccess || resp.Charged != 1 {
			t.Fatalf("solo event %d: %+v, %v", i, resp, err)
		}
	}
	if st := a.Stats(); st.CacheHits != 4 {
		t.Fatalf("cache hits after 5 events on one account = %d, want 4", st.CacheHits)
	}

	var mu sync.Mutex
	charged := map[string]int64{first: 5}
	var wg sync.WaitGroup
	for w := range workers {
		svc := a
		if w%2 == 1 {
			svc = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				s := supi(i + w)
				var resp chf.ChargeResponse
				req := chf.ApplyRequest{Op: chf.OpEvent, SUPI: s, Session: fmt.Sprintf("w%d-%d", w, i), Seq: 1, Lines: []chf.RatedLine{smsLine(int64(1 + i%7))}}
				if err := svc.Apply(ctx, &req, &resp); err != nil {
					t.Errorf("event: %v", err)
					return
				}
				mu.Lock()
				charged[s] += resp.Charged
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if st := a.Stats(); st.CacheStale+b.Stats().CacheStale == 0 {
		t.Errorf("two services on the same accounts never found a stale cache entry: %+v %+v", st, b.Stats())
	}
	for i := range accounts {
		s := supi(i)
		var resp chf.ChargeResponse
		req := chf.ApplyRequest{Op: chf.OpBalance, SUPI: s}
		if err := b.Apply(ctx, &req, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Balance != 1_000_000-charged[s] || resp.Debited != charged[s] {
			t.Errorf("%s: balance %d debited %d, want %d and %d", s, resp.Balance, resp.Debited, 1_000_000-charged[s], charged[s])
		}
	}
}

func TestNextGeneration(t *testing.T) {
	for _, tt := range []struct{ in, want uint32 }{{1, 2}, {0xFFFE, 0xFFFF}, {0xFFFF, 1}} {
		if got := nextGeneration(tt.in); got != tt.want {
			t.Errorf("nextGeneration(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestCacheChurnAllocatesNothing: a full cache storing accounts it does
// not hold reuses the entry it evicts (struct and blob), so that more
// accounts than it holds cost no allocation and leave no garbage, and it
// never holds more than its size.
func TestCacheChurnAllocatesNothing(t *testing.T) {
	c := newAccountCache(cacheShards, int64(1<<62)) // one entry per shard
	supis := make([]string, 4096)
	for i := range supis {
		supis[i] = fmt.Sprintf("imsi-00101%010d", i)
	}
	var acc account
	acc.balance, acc.currency = 100, "EUR"
	blob := acc.appendSessions(nil)
	for _, s := range supis {
		c.store(s, 1, 1, &acc, blob)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		c.store(supis[i%len(supis)], 1, 1, &acc, blob)
		i++
	}); n != 0 {
		t.Errorf("store into a full cache allocates %.1f times, want 0", n)
	}
	if n := c.len(); n > cacheShards {
		t.Errorf("cache holds %d entries, more than its %d", n, cacheShards)
	}
}

// TestCacheMemoryFollowsRecords: an entry that once held a large record
// does not keep its array when it holds small ones (entries are reused
// across accounts), so the cache's retained bytes follow what it holds
// instead of ratcheting up to its size times the largest record seen.
func TestCacheMemoryFollowsRecords(t *testing.T) {
	c := newAccountCache(cacheShards, int64(1<<62)) // one entry per shard
	big, small := make([]byte, 64<<10), make([]byte, 100)
	var acc account
	for i := range 4 * cacheShards {
		b := small
		if i < cacheShards { // every entry holds a large record once
			b = big
		}
		c.store(fmt.Sprintf("imsi-00101%010d", i), 1, 1, &acc, b)
	}
	held, stored := 0, 0
	for i := range c.shards {
		for _, e := range c.shards[i].m {
			held += cap(e.blob)
			stored += len(e.blob)
		}
	}
	if stored == 0 || held > 2*stored+cacheShards*blobSlack {
		t.Errorf("cache keeps %d bytes of arrays for %d bytes of records", held, stored)
	}
}

// BenchmarkCacheStoreChurn: stores into a full cache over more accounts
// than it holds (each store evicts).
func BenchmarkCacheStoreChurn(b *testing.B) {
	c := newAccountCache(1024, int64(1<<62))
	supis := make([]string, 8192)
	for i := range supis {
		supis[i] = fmt.Sprintf("imsi-00101%010d", i)
	}
	a := sampleAccount()
	blob := a.appendSessions(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.store(supis[i%len(supis)], 1, 1, a, blob)
	}
}
