package abm

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	as "github.com/aerospike/aerospike-client-go/v7"

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
	provisionAccounts(t, cl, first, accounts, 1_000_000)
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
	c := newAccountCache(cacheShards, int64(1<<62), "chf", "accounts") // one entry per shard
	supis := make([]string, 4096)
	for i := range supis {
		supis[i] = fmt.Sprintf("imsi-00101%010d", i)
	}
	var acc account
	acc.balance, acc.currency = 100, "EUR"
	blob := acc.appendSessions(nil)
	for _, s := range supis {
		c.store(s, nil, 1, 1, &acc, blob)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		c.store(supis[i%len(supis)], nil, 1, 1, &acc, blob)
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
	c := newAccountCache(cacheShards, int64(1<<62), "chf", "accounts") // one entry per shard
	big, small := make([]byte, 64<<10), make([]byte, 100)
	var acc account
	for i := range 4 * cacheShards {
		b := small
		if i < cacheShards { // every entry holds a large record once
			b = big
		}
		c.store(fmt.Sprintf("imsi-00101%010d", i), nil, 1, 1, &acc, b)
	}
	held, stored := 0, 0
	for i := range c.shards {
		sh := &c.shards[i]
		held += cap(sh.arena)
		for _, e := range sh.slots {
			if e.used {
				stored += int(e.size)
			}
		}
	}
	if stored == 0 || held > 2*stored+cacheShards*(blobSlack+arenaSlack) {
		t.Errorf("cache keeps %d bytes of arena for %d bytes of records", held, stored)
	}
}

// BenchmarkCacheStoreChurn: stores into a full cache over more accounts
// than it holds (each store evicts).
func BenchmarkCacheStoreChurn(b *testing.B) {
	c := newAccountCache(1024, int64(1<<62), "chf", "accounts")
	supis := make([]string, 8192)
	for i := range supis {
		supis[i] = fmt.Sprintf("imsi-00101%010d", i)
	}
	a := sampleAccount()
	blob := a.appendSessions(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.store(supis[i%len(supis)], nil, 1, 1, a, blob)
	}
}

// TestCacheKeepsEachAccountsKey: the record key the cache keeps for an
// account is that account's, also in an entry reused from an evicted
// account (a wrong key would write one subscriber's balance into
// another's record), and the keys Apply and ApplyBatch charge through the
// cache are the ones as.NewKey builds.
func TestCacheKeepsEachAccountsKey(t *testing.T) {
	c := newAccountCache(cacheShards, int64(1<<62), "chf", "accounts") // one entry per shard
	var acc account
	acc.balance, acc.currency = 100, "EUR"
	blob := acc.appendSessions(nil)
	keyOf := func(supi string) *as.Key {
		k, err := as.NewKey("chf", "accounts", supi)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	// Two SUPIs of one shard: the second evicts the first.
	a := "imsi-001010000000001"
	b := ""
	_, sa := c.locate(a)
	for i := 2; b == ""; i++ {
		s := fmt.Sprintf("imsi-00101%010d", i)
		if _, sh := c.locate(s); sh == sa {
			b = s
		}
	}
	c.store(a, keyOf(a), 1, 1, &acc, blob)
	if k := c.key(a); k == nil || !bytes.Equal(k.Digest(), keyOf(a).Digest()) {
		t.Fatalf("key(%s) = %v, want its own", a, k)
	}
	c.store(b, keyOf(b), 1, 1, &acc, blob)
	if k := c.key(a); k != nil {
		t.Errorf("key(%s) after its eviction = %v, want nil", a, k)
	}
	if k := c.key(b); k == nil || !bytes.Equal(k.Digest(), keyOf(b).Digest()) {
		t.Errorf("key(%s) in the reused entry = %v, want its own", b, k)
	}
	if _, k, ok := c.load(b, 2, &acc); !ok || k == nil || !bytes.Equal(k.Digest(), keyOf(b).Digest()) {
		t.Errorf("load(%s) = key %v ok %v, want its own key", b, k, ok)
	}
	if _, k, ok := c.load(b, 1<<62+10, &acc); ok || k == nil {
		t.Errorf("load(%s) of a too old entry = key %v ok %v, want its key and not ok", b, k, ok)
	}

	// Through the service: every account charged holds its own key.
	cl := startStore(t)
	svc := New(cl, Config{})
	if svc.cache == nil {
		t.Fatal("the account cache is off by default")
	}
	supis := []string{"imsi-001010000000011", "imsi-001010000000012", "imsi-001010000000013"}
	for _, s := range supis {
		provisionAccounts(t, cl, s, 1, 1_000_000)
	}
	ctx := context.Background()
	reqs := make([]*chf.ApplyRequest, 0, 2*len(supis))
	for round := range 2 {
		reqs = reqs[:0]
		for i, s := range supis {
			reqs = append(reqs, &chf.ApplyRequest{Op: chf.OpEvent, SUPI: s, Key: uint64(100*round + i + 1), Lines: []chf.RatedLine{smsLine(5)}})
		}
		resps := make([]*chf.ChargeResponse, len(reqs))
		for i := range resps {
			resps[i] = new(chf.ChargeResponse)
		}
		errs := make([]error, len(reqs))
		svc.ApplyBatch(ctx, reqs, resps, errs)
		for i := range reqs {
			if errs[i] != nil || resps[i].Result != chf.ResultSuccess {
				t.Fatalf("round %d event %d: %v %v", round, i, errs[i], resps[i].Result)
			}
		}
	}
	var one chf.ChargeResponse
	if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpEvent, SUPI: supis[0], Key: 999, Lines: []chf.RatedLine{smsLine(5)}}, &one); err != nil || one.Result != chf.ResultSuccess {
		t.Fatal(err, one.Result)
	}
	for _, s := range supis {
		k := svc.cache.key(s)
		if k == nil {
			t.Errorf("no cached key for %s", s)
			continue
		}
		want, _ := as.NewKey(svc.cfg.Namespace, svc.cfg.Set, s)
		if !bytes.Equal(k.Digest(), want.Digest()) {
			t.Errorf("cached key of %s has digest %x, want %x", s, k.Digest(), want.Digest())
		}
	}
	// And each balance was debited by its own events only.
	for i, s := range supis {
		want := int64(1_000_000 - 2*5)
		if i == 0 {
			want -= 5
		}
		if got := balanceOf(t, cl, s); got != want {
			t.Errorf("balance of %s = %d, want %d", s, got, want)
		}
	}
}

// balanceOf reads supi's balance through a service of its own (so no
// cache of the service under test answers).
func balanceOf(t *testing.T, cl *as.Client, supi string) int64 {
	t.Helper()
	var r chf.ChargeResponse
	if err := New(cl, Config{}).Apply(context.Background(), &chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi}, &r); err != nil {
		t.Fatal(err)
	}
	return r.Balance
}

// TestCacheHoldsNoPointers: nothing the cache keeps per account is a
// pointer the garbage collector would follow (the slots, the index's keys
// and values), so a GC mark costs the same whatever the cache holds.
func TestCacheHoldsNoPointers(t *testing.T) {
	var walk func(path string, ty reflect.Type)
	walk = func(path string, ty reflect.Type) {
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.String, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			t.Errorf("%s is a %s: the GC follows it", path, ty.Kind())
		case reflect.Struct:
			for i := range ty.NumField() {
				walk(path+"."+ty.Field(i).Name, ty.Field(i).Type)
			}
		case reflect.Array:
			walk(path+"[]", ty.Elem())
		}
	}
	walk("cacheSlot", reflect.TypeFor[cacheSlot]())
	index := reflect.TypeFor[cacheShard]()
	f, _ := index.FieldByName("index")
	walk("index key", f.Type.Key())
	walk("index value", f.Type.Elem())
	a, _ := index.FieldByName("arena")
	walk("arena element", a.Type.Elem())
}

// TestCacheArenaFollowsGrowingRecords: records that grow (sessions opened)
// move to new regions of their shard's arena and the waste left behind is
// compacted away; every load gives back exactly what was last stored.
func TestCacheArenaFollowsGrowingRecords(t *testing.T) {
	c := newAccountCache(4*cacheShards, int64(1<<62), "chf", "accounts")
	lim := limits{sessionIdle: 300, closedTTL: 600, defaultHold: 600, maxSessions: 1000, maxClosed: 16, maxRecent: MaxRecent}
	const n = 200 // more than the cache holds: it evicts too
	accs := make([]*account, n)
	for i := range accs {
		accs[i] = &account{balance: int64(1000 + i), currency: "EUR"}
	}
	var got account
	for round := range heavySessions - 1 {
		for i, a := range accs {
			supi := fmt.Sprintf("imsi-00101%010d", i)
			openSessions(t, a, &lim, 1, 1_800_000_000+int64(round))
			blob := a.appendSessions(nil)
			c.store(supi, nil, uint32(round), 1, a, blob)
			gen, _, ok := c.load(supi, 2, &got)
			if !ok || gen != nextGeneration(uint32(round)) || got.balance != a.balance || !bytes.Equal(got.appendSessions(nil), blob) {
				t.Fatalf("round %d %s: ok %v gen %d balance %d, sessions differ %v", round, supi, ok, gen, got.balance, !bytes.Equal(got.appendSessions(nil), blob))
			}
		}
	}
	for i := range c.shards {
		sh := &c.shards[i]
		live := 0
		for _, e := range sh.slots {
			if e.used {
				live += int(e.room)
			}
		}
		if live != sh.held {
			t.Fatalf("shard %d: held %d, its slots' regions %d", i, sh.held, live)
		}
		if len(sh.arena) > sh.held+sh.held/2+arenaSlack+int(maxRoom(sh)) {
			t.Errorf("shard %d: arena of %d bytes for %d held", i, len(sh.arena), sh.held)
		}
	}
	if c.len() > 4*cacheShards {
		t.Errorf("cache holds %d entries, more than its %d", c.len(), 4*cacheShards)
	}
}

// maxRoom is the largest region of sh.
func maxRoom(sh *cacheShard) uint32 {
	var m uint32
	for _, e := range sh.slots {
		m = max(m, e.room)
	}
	return m
}

// TestCacheTellsCollidingSUPIsApart: the index is keyed by a hash of the
// SUPI; a SUPI whose hash another's entry holds finds no entry (the
// SUPIs are compared), and storing it takes the slot over.
func TestCacheTellsCollidingSUPIsApart(t *testing.T) {
	c := newAccountCache(1000, int64(1<<62), "chf", "accounts")
	acc := &account{balance: 100, currency: "EUR"}
	a, b := "imsi-001010000000001", "imsi-001010000000002"
	c.store(a, nil, 1, 1, acc, acc.appendSessions(nil))
	h, sh := c.locate(a)
	if _, e := sh.find(h, b); e != nil {
		t.Fatalf("%s found under %s's hash", b, a)
	}
	// b as if its hash were a's.
	i := sh.claim(h, c.perShard)
	if !sh.place(i, b, acc.appendSessions(nil)) {
		t.Fatal("place failed")
	}
	if _, e := sh.find(h, a); e != nil {
		t.Errorf("%s still found after %s took its slot", a, b)
	}
	if j, e := sh.find(h, b); e == nil || j != i {
		t.Errorf("%s not found in the slot it took", b)
	}
	if n := c.len(); n != 1 {
		t.Errorf("cache holds %d entries, want 1", n)
	}
}
