package aslite

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"
)

// fakeClock is an injectable clock for TTL tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.Default()
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startServer starts an aslite on 127.0.0.1:0 closed at the end of the test.
func startServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Namespaces == nil {
		cfg.Namespaces = []string{"chf", "other"}
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newClient connects the official client to addr.
func newClient(t testing.TB, addr string) *as.Client {
	t.Helper()
	return newClientWith(t, addr, nil)
}

// newClientWith is newClient with tune (if not nil) applied to the client
// policy first.
func newClientWith(t testing.TB, addr string, tune func(*as.ClientPolicy)) *as.Client {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var p int
	for _, c := range port {
		p = p*10 + int(c-'0')
	}
	cp := as.NewClientPolicy()
	cp.Timeout = 5 * time.Second
	cp.TendInterval = 50 * time.Millisecond
	if tune != nil {
		tune(cp)
	}
	c, err := as.NewClientWithPolicy(cp, host, p)
	if err != nil {
		t.Fatalf("cannot connect client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func key(t testing.TB, set string, k any) *as.Key {
	t.Helper()
	kk, err := as.NewKey("chf", set, k)
	if err != nil {
		t.Fatal(err)
	}
	return kk
}

func wp() *as.WritePolicy {
	p := as.NewWritePolicy(0, 0)
	p.TotalTimeout = 5 * time.Second
	return p
}

func isRC(err error, rc types.ResultCode) bool {
	var ae *as.AerospikeError
	return errors.As(err, &ae) && ae.ResultCode == rc
}

func TestParticleRoundTrip(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	bins := as.BinMap{
		"int":    -1234567890123,
		"maxint": math.MaxInt64,
		"float":  3.25,
		"str":    "héllo",
		"empty":  "",
		"blob":   []byte{0, 1, 2, 0xFF},
		"bool":   true,
		"list":   []any{1, "two", []byte{3}, 4.5},
		"map":    map[any]any{"a": 1, "b": "x"},
	}
	k := key(t, "accounts", "imsi-001010000000001")
	if err := c.Put(wp(), k, bins); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rec, err := c.Get(nil, k)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if rec.Generation != 1 {
		t.Errorf("generation %d, want 1", rec.Generation)
	}
	for name, want := range bins {
		got := rec.Bins[name]
		if name == "list" || name == "map" {
			if !equalLoose(got, want) {
				t.Errorf("bin %s: got %#v, want %#v", name, got, want)
			}
			continue
		}
		if b, ok := want.([]byte); ok {
			if !bytes.Equal(got.([]byte), b) {
				t.Errorf("bin %s: got %v want %v", name, got, want)
			}
			continue
		}
		if got != want {
			t.Errorf("bin %s: got %#v (%T), want %#v (%T)", name, got, got, want, want)
		}
	}
	// Named bins and header only.
	rec, err = c.Get(nil, k, "int", "str", "missing")
	if err != nil || len(rec.Bins) != 2 || rec.Bins["int"] != -1234567890123 {
		t.Fatalf("Get named: %v %v", rec, err)
	}
	rec, err = c.GetHeader(nil, k)
	if err != nil || rec.Generation != 1 || len(rec.Bins) != 0 {
		t.Fatalf("GetHeader: %v %v", rec, err)
	}
	ok, err := c.Exists(nil, k)
	if err != nil || !ok {
		t.Fatalf("Exists: %v %v", ok, err)
	}
	ok, err = c.Exists(nil, key(t, "accounts", "nobody"))
	if err != nil || ok {
		t.Fatalf("Exists missing: %v %v", ok, err)
	}
	if _, err := c.Get(nil, key(t, "accounts", "nobody")); !isRC(err, types.KEY_NOT_FOUND_ERROR) {
		t.Fatalf("Get missing: %v", err)
	}
}

// equalLoose compares decoded lists and maps.
func equalLoose(a, b any) bool {
	switch bv := b.(type) {
	case []any:
		av, ok := a.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range bv {
			if !equalLoose(av[i], bv[i]) {
				return false
			}
		}
		return true
	case map[any]any:
		av, ok := a.(map[any]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, v := range bv {
			if !equalLoose(av[k], v) {
				return false
			}
		}
		return true
	case []byte:
		ab, ok := a.([]byte)
		return ok && bytes.Equal(ab, bv)
	}
	return a == b
}

func TestOperateAndSingleRecordOps(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	k := key(t, "accounts", "acct")
	if err := c.Put(wp(), k, as.BinMap{"balance": 100, "currency": "EUR", "res": []byte("r1")}); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Operate(wp(), k,
		as.AddOp(as.NewBin("balance", -30)),
		as.PutOp(as.NewBin("res", []byte("r2"))),
		as.AppendOp(as.NewBin("currency", "!")),
		as.PrependOp(as.NewBin("currency", ">")),
		as.GetOp())
	if err != nil {
		t.Fatalf("Operate: %v", err)
	}
	if rec.Bins["balance"] != 70 || rec.Bins["currency"] != ">EUR!" || !bytes.Equal(rec.Bins["res"].([]byte), []byte("r2")) || rec.Generation != 2 {
		t.Fatalf("Operate result %v gen %d", rec.Bins, rec.Generation)
	}
	// Reads see earlier writes; respond-all-ops gives one entry per op.
	pol := wp()
	pol.RespondPerEachOp = true
	rec, err = c.Operate(pol, k,
		as.GetBinOp("balance"),
		as.AddOp(as.NewBin("balance", 5)),
		as.GetBinOp("balance"))
	if err != nil {
		t.Fatalf("Operate respond-all: %v", err)
	}
	got, ok := rec.Bins["balance"].([]any)
	if !ok || len(got) != 3 || got[0] != 70 || got[1] != nil || got[2] != 75 {
		t.Fatalf("respond-all: %#v", rec.Bins["balance"])
	}
	// Incr float, type mismatch.
	if err := c.AddBins(wp(), k, as.NewBin("f", 1.5)); err != nil {
		t.Fatal(err)
	}
	if err := c.AddBins(wp(), k, as.NewBin("f", 1.25)); err != nil {
		t.Fatal(err)
	}
	if err := c.AddBins(wp(), k, as.NewBin("currency", 1)); !isRC(err, types.BIN_TYPE_ERROR) {
		t.Fatalf("incr on string: %v", err)
	}
	rec, _ = c.Get(nil, k, "f")
	if rec.Bins["f"] != 2.75 {
		t.Fatalf("float incr: %v", rec.Bins)
	}
	// Delete a bin with a nil write.
	if err := c.PutBins(wp(), k, as.NewBin("f", nil)); err != nil {
		t.Fatal(err)
	}
	rec, _ = c.Get(nil, k)
	if _, ok := rec.Bins["f"]; ok {
		t.Fatalf("bin not deleted: %v", rec.Bins)
	}
	// Touch bumps the generation; touch of a missing record fails.
	before := rec.Generation
	if err := c.Touch(wp(), k); err != nil {
		t.Fatal(err)
	}
	rec, _ = c.GetHeader(nil, k)
	if rec.Generation != before+1 {
		t.Fatalf("touch gen %d, want %d", rec.Generation, before+1)
	}
	if err := c.Touch(wp(), key(t, "accounts", "ghost")); !isRC(err, types.KEY_NOT_FOUND_ERROR) {
		t.Fatalf("touch missing: %v", err)
	}
	// Delete.
	existed, err := c.Delete(wp(), k)
	if err != nil || !existed {
		t.Fatalf("Delete: %v %v", existed, err)
	}
	existed, err = c.Delete(wp(), k)
	if err != nil || existed {
		t.Fatalf("Delete again: %v %v", existed, err)
	}
	// Operate with a delete op then a write recreates the record.
	if err := c.Put(wp(), k, as.BinMap{"a": 1, "b": 2}); err != nil {
		t.Fatal(err)
	}
	rec, err = c.Operate(wp(), k, as.DeleteOp(), as.PutOp(as.NewBin("c", 3)), as.GetOp())
	if err != nil || len(rec.Bins) != 1 || rec.Bins["c"] != 3 {
		t.Fatalf("delete+put: %v %v", rec, err)
	}
	// Bin name too long.
	if err := c.PutBins(wp(), k, as.NewBin("0123456789abcdefg", 1)); err == nil {
		t.Fatal("long bin name accepted")
	}
}

func TestGenerationAndExistsPolicies(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	k := key(t, "accounts", "gen")
	f := func(name string, policy func(*as.WritePolicy), want types.ResultCode) {
		t.Helper()
		p := wp()
		policy(p)
		err := c.Put(p, k, as.BinMap{"v": name})
		if want == types.OK {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return
		}
		if !isRC(err, want) {
			t.Fatalf("%s: got %v, want %v", name, err, want)
		}
	}
	f("update-only missing", func(p *as.WritePolicy) { p.RecordExistsAction = as.UPDATE_ONLY }, types.KEY_NOT_FOUND_ERROR)
	f("replace-only missing", func(p *as.WritePolicy) { p.RecordExistsAction = as.REPLACE_ONLY }, types.KEY_NOT_FOUND_ERROR)
	f("gen 1 on missing", func(p *as.WritePolicy) { p.GenerationPolicy = as.EXPECT_GEN_EQUAL; p.Generation = 1 }, types.GENERATION_ERROR)
	f("gen 0 on missing", func(p *as.WritePolicy) { p.GenerationPolicy = as.EXPECT_GEN_EQUAL; p.Generation = 0 }, types.OK)
	f("create-only existing", func(p *as.WritePolicy) { p.RecordExistsAction = as.CREATE_ONLY }, types.KEY_EXISTS_ERROR)
	f("gen 1 equal", func(p *as.WritePolicy) { p.GenerationPolicy = as.EXPECT_GEN_EQUAL; p.Generation = 1 }, types.OK)
	f("gen 1 stale", func(p *as.WritePolicy) { p.GenerationPolicy = as.EXPECT_GEN_EQUAL; p.Generation = 1 }, types.GENERATION_ERROR)
	f("gen gt 2 fails", func(p *as.WritePolicy) { p.GenerationPolicy = as.EXPECT_GEN_GT; p.Generation = 2 }, types.GENERATION_ERROR)
	f("gen gt 3 ok", func(p *as.WritePolicy) { p.GenerationPolicy = as.EXPECT_GEN_GT; p.Generation = 3 }, types.OK)
	if err := c.PutBins(wp(), k, as.NewBin("extra", 1)); err != nil {
		t.Fatal(err)
	}
	f("replace", func(p *as.WritePolicy) { p.RecordExistsAction = as.REPLACE }, types.OK)
	rec, err := c.Get(nil, k)
	if err != nil || len(rec.Bins) != 1 || rec.Bins["v"] != "replace" || rec.Generation != 5 {
		t.Fatalf("after replace: %v %v", rec, err)
	}
	f("update-only", func(p *as.WritePolicy) { p.RecordExistsAction = as.UPDATE_ONLY }, types.OK)
	// A generation-checked operate: a stale generation changes nothing.
	rec, _ = c.Get(nil, k)
	p := wp()
	p.GenerationPolicy = as.EXPECT_GEN_EQUAL
	p.Generation = rec.Generation - 1
	if _, err := c.Operate(p, k, as.PutOp(as.NewBin("v", "stale")), as.GetOp()); !isRC(err, types.GENERATION_ERROR) {
		t.Fatalf("stale operate: %v", err)
	}
	p.Generation = rec.Generation
	got, err := c.Operate(p, k, as.PutOp(as.NewBin("v", "fresh")), as.GetOp())
	if err != nil || got.Bins["v"] != "fresh" || got.Generation != rec.Generation+1 {
		t.Fatalf("operate: %v %v", got, err)
	}
}

func TestConcurrentGenerationCheckedRMW(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	k := key(t, "accounts", "rmw")
	if err := c.Put(wp(), k, as.BinMap{"balance": 0}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 25
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				rec, err := c.Get(nil, k)
				if err != nil {
					t.Error(err)
					return
				}
				p := wp()
				p.GenerationPolicy = as.EXPECT_GEN_EQUAL
				p.Generation = rec.Generation
				err = c.Put(p, k, as.BinMap{"balance": rec.Bins["balance"].(int) + 1})
				if isRC(err, types.GENERATION_ERROR) {
					conflicts.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	rec, err := c.Get(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Bins["balance"] != workers*each || rec.Generation != workers*each+1 {
		t.Fatalf("balance %v gen %d, want %d (conflicts %d)", rec.Bins["balance"], rec.Generation, workers*each, conflicts.Load())
	}
}

func TestConcurrentIncr(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	k := key(t, "accounts", "incr")
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := c.Operate(wp(), k, as.AddOp(as.NewBin("n", 1))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rec, err := c.Get(nil, k)
	if err != nil || rec.Bins["n"] != workers*each {
		t.Fatalf("n = %v (%v), want %d", rec, err, workers*each)
	}
}

func TestTTLExpiry(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	s := startServer(t, Config{Now: clk.Now, ReclaimInterval: -1, DefaultTTL: time.Hour})
	c := newClient(t, s.Addr())
	put := func(k *as.Key, ttl uint32) {
		t.Helper()
		p := wp()
		p.Expiration = ttl
		if err := c.Put(p, k, as.BinMap{"v": 1}); err != nil {
			t.Fatal(err)
		}
	}
	short, def, never, keep := key(t, "s", "short"), key(t, "s", "default"), key(t, "s", "never"), key(t, "s", "keep")
	put(short, 10)
	put(def, as.TTLServerDefault)
	put(never, as.TTLDontExpire)
	put(keep, 100)
	put(keep, as.TTLDontUpdate)
	rec, err := c.Get(nil, short)
	if err != nil || rec.Expiration < 9 || rec.Expiration > 10 {
		t.Fatalf("short ttl: %v %v", rec, err)
	}
	rec, _ = c.Get(nil, def)
	if rec.Expiration < 3599 || rec.Expiration > 3600 {
		t.Fatalf("default ttl %d", rec.Expiration)
	}
	rec, _ = c.Get(nil, never)
	if rec.Expiration != as.TTLDontExpire {
		t.Fatalf("never ttl %d", rec.Expiration)
	}
	rec, _ = c.Get(nil, keep)
	if rec.Expiration < 99 || rec.Expiration > 100 {
		t.Fatalf("dont-update ttl %d", rec.Expiration)
	}
	clk.Add(11 * time.Second)
	if _, err := c.Get(nil, short); !isRC(err, types.KEY_NOT_FOUND_ERROR) {
		t.Fatalf("expired record visible: %v", err)
	}
	if _, err := c.Get(nil, keep); err != nil {
		t.Fatalf("keep: %v", err)
	}
	if n := s.Reclaim(); n != 1 {
		t.Fatalf("reclaimed %d, want 1", n)
	}
	clk.Add(2 * time.Hour)
	if n := s.Reclaim(); n != 2 {
		t.Fatalf("reclaimed %d, want 2", n)
	}
	if st := s.Stats(); st.Objects != 1 {
		t.Fatalf("objects %d, want 1", st.Objects)
	}
	// A create on an expired key starts at generation 1.
	put(short, 10)
	rec, _ = c.Get(nil, short)
	if rec.Generation != 1 {
		t.Fatalf("gen %d", rec.Generation)
	}
}

func TestBackgroundReclaim(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	s := startServer(t, Config{Now: clk.Now, ReclaimInterval: 10 * time.Millisecond})
	c := newClient(t, s.Addr())
	p := wp()
	p.Expiration = 5
	for i := 0; i < 20; i++ {
		if err := c.Put(p, key(t, "s", i), as.BinMap{"v": i}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Objects != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("objects %d never reclaimed", s.Stats().Objects)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBatches(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	var keys []*as.Key
	for i := 0; i < 50; i++ {
		k := key(t, "accounts", i)
		keys = append(keys, k)
		if i%5 == 0 {
			continue // missing
		}
		if err := c.Put(wp(), k, as.BinMap{"i": i, "s": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	bp := as.NewBatchPolicy()
	recs, err := c.BatchGet(bp, keys)
	if err != nil {
		t.Fatalf("BatchGet: %v", err)
	}
	for i, r := range recs {
		if i%5 == 0 {
			if r != nil {
				t.Fatalf("key %d: want nil, got %v", i, r)
			}
			continue
		}
		if r == nil || r.Bins["i"] != i {
			t.Fatalf("key %d: %v", i, r)
		}
	}
	recs, err = c.BatchGet(bp, keys, "s")
	if err != nil || recs[1] == nil || len(recs[1].Bins) != 1 {
		t.Fatalf("BatchGet bins: %v %v", recs, err)
	}
	hdrs, err := c.BatchGetHeader(bp, keys)
	if err != nil || hdrs[1] == nil || hdrs[1].Generation != 1 || len(hdrs[1].Bins) != 0 || hdrs[0] != nil {
		t.Fatalf("BatchGetHeader: %v %v %v", err, hdrs[0], hdrs[1])
	}
	ex, err := c.BatchExists(bp, keys)
	if err != nil || ex[0] || !ex[1] {
		t.Fatalf("BatchExists: %v %v", ex, err)
	}
	recs, err = c.BatchGetOperate(bp, keys[:3], as.GetBinOp("i"))
	if err != nil || recs[0] != nil || recs[1] == nil || recs[1].Bins["i"] != 1 || len(recs[1].Bins) != 1 {
		t.Fatalf("BatchGetOperate: %v %v", recs, err)
	}
	// Complex batch reads.
	brs := []*as.BatchRead{as.NewBatchRead(nil, keys[1], []string{"i"}), as.NewBatchReadHeader(nil, keys[2]), as.NewBatchRead(nil, keys[0], nil)}
	if err := c.BatchGetComplex(bp, brs); err != nil {
		t.Fatalf("BatchGetComplex: %v", err)
	}
	if brs[0].Record == nil || brs[0].Record.Bins["i"] != 1 || brs[1].Record == nil || brs[2].Record != nil {
		t.Fatalf("BatchGetComplex results: %v %v %v", brs[0].Record, brs[1].Record, brs[2].Record)
	}
	// Batch operate: writes, reads, deletes, a generation failure.
	bwp := as.NewBatchWritePolicy()
	bwp.GenerationPolicy = as.EXPECT_GEN_EQUAL
	bwp.Generation = 7
	ops := []as.BatchRecordIfc{
		as.NewBatchWrite(nil, keys[1], as.AddOp(as.NewBin("i", 100)), as.GetBinOp("i")),
		as.NewBatchWrite(nil, keys[0], as.PutOp(as.NewBin("i", 0))),
		as.NewBatchDelete(nil, keys[2]),
		as.NewBatchRead(nil, keys[3], nil),
		as.NewBatchWrite(bwp, keys[4], as.PutOp(as.NewBin("i", -1))),
		as.NewBatchDelete(nil, key(t, "accounts", "never")),
	}
	if err := c.BatchOperate(bp, ops); err != nil {
		t.Fatalf("BatchOperate: %v", err)
	}
	br := func(i int) *as.BatchRecord { return ops[i].BatchRec() }
	// Batch writes respond to every op: nil for the add, then the read.
	if got, ok := br(0).Record.Bins["i"].(as.OpResults); br(0).ResultCode != 0 || !ok || len(got) != 2 || got[0] != nil || got[1] != 101 {
		t.Fatalf("batch write+read: %v %v", br(0).ResultCode, br(0).Record)
	}
	if br(1).ResultCode != 0 || br(2).ResultCode != 0 || br(3).ResultCode != 0 || br(3).Record.Bins["i"] != 3 {
		t.Fatalf("batch results: %v %v %v", br(1).ResultCode, br(2).ResultCode, br(3).ResultCode)
	}
	if br(4).ResultCode != types.GENERATION_ERROR || br(5).ResultCode != types.KEY_NOT_FOUND_ERROR {
		t.Fatalf("batch errors: %v %v", br(4).ResultCode, br(5).ResultCode)
	}
	if ok, _ := c.Exists(nil, keys[2]); ok {
		t.Fatal("batch delete did not delete")
	}
	res, err := c.BatchDelete(bp, nil, keys[5:8])
	if err != nil || res[0].ResultCode != types.KEY_NOT_FOUND_ERROR || res[1].ResultCode != 0 {
		t.Fatalf("BatchDelete: %v", err)
	}
	// Compressed batch request and a single-key batch.
	cbp := as.NewBatchPolicy()
	cbp.UseCompression = true
	recs, err = c.BatchGet(cbp, keys[10:40])
	if err != nil || recs[1] == nil || recs[1].Bins["i"] != 11 {
		t.Fatalf("compressed BatchGet: %v", err)
	}
}

func TestScanAndTruncate(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	wpk := wp()
	wpk.SendKey = true
	for i := 0; i < 300; i++ {
		set := "a"
		if i%3 == 0 {
			set = "b"
		}
		if err := c.Put(wpk, key(t, set, i), as.BinMap{"i": i, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(set string, bins ...string) int {
		t.Helper()
		rs, err := c.ScanAll(nil, "chf", set, bins...)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for r := range rs.Results() {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if r.Record.Key.Value() == nil || r.Record.Bins["i"] == nil {
				t.Fatalf("scan record without key or bins: %v", r.Record)
			}
			if len(bins) > 0 && len(r.Record.Bins) != len(bins) {
				t.Fatalf("scan bins %v", r.Record.Bins)
			}
			n++
		}
		return n
	}
	if n := count("a"); n != 200 {
		t.Fatalf("scan a: %d", n)
	}
	if n := count("", "i"); n != 300 {
		t.Fatalf("scan all: %d", n)
	}
	if err := c.Truncate(nil, "chf", "b", nil); err != nil {
		t.Fatal(err)
	}
	if n := count(""); n != 200 {
		t.Fatalf("after truncate b: %d", n)
	}
	// Truncate with a last-update cutoff in the past deletes nothing.
	past := time.Now().Add(-time.Hour)
	if err := c.Truncate(nil, "chf", "", &past); err != nil {
		t.Fatal(err)
	}
	if n := count(""); n != 200 {
		t.Fatalf("after truncate past: %d", n)
	}
	if err := c.Truncate(nil, "chf", "", nil); err != nil {
		t.Fatal(err)
	}
	if n := count(""); n != 0 {
		t.Fatalf("after truncate ns: %d", n)
	}
	if s.Stats().Objects != 0 {
		t.Fatalf("objects %d", s.Stats().Objects)
	}
	// A query without an index filter is a scan.
	for i := 0; i < 10; i++ {
		if err := c.Put(wpk, key(t, "q", i), as.BinMap{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := c.Query(nil, as.NewStatement("chf", "q", "i"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range rs.Results() {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		n++
	}
	if n != 10 {
		t.Fatalf("query saw %d records, want 10", n)
	}
	// Paginated scan with MaxRecords resumes where it stopped.
	for i := 0; i < 100; i++ {
		if err := c.Put(wpk, key(t, "p", i), as.BinMap{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	sp := as.NewScanPolicy()
	sp.MaxRecords = 30
	pf := as.NewPartitionFilterAll()
	seen := map[int]bool{}
	for page := 0; page < 10 && !pf.IsDone(); page++ {
		rs, err := c.ScanPartitions(sp, pf, "chf", "p")
		if err != nil {
			t.Fatal(err)
		}
		for r := range rs.Results() {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			i := r.Record.Bins["i"].(int)
			if seen[i] {
				t.Fatalf("record %d seen twice", i)
			}
			seen[i] = true
		}
	}
	if len(seen) != 100 {
		t.Fatalf("paginated scan saw %d", len(seen))
	}
}

func TestInfo(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	if err := c.Put(wp(), key(t, "accounts", 1), as.BinMap{"a": 1}); err != nil {
		t.Fatal(err)
	}
	node := c.GetNodes()[0]
	m, err := node.RequestInfo(as.NewInfoPolicy(), "namespaces", "namespace/chf", "statistics", "sets/chf", "bogus")
	if err != nil {
		t.Fatal(err)
	}
	if m["namespaces"] != "chf;other" {
		t.Errorf("namespaces %q", m["namespaces"])
	}
	if !bytes.Contains([]byte(m["namespace/chf"]), []byte("objects=1;")) {
		t.Errorf("namespace/chf %q", m["namespace/chf"])
	}
	if !bytes.Contains([]byte(m["statistics"]), []byte("objects=1;")) {
		t.Errorf("statistics %q", m["statistics"])
	}
	if !bytes.Contains([]byte(m["sets/chf"]), []byte("set=accounts:objects=1")) {
		t.Errorf("sets %q", m["sets/chf"])
	}
	if m["bogus"] == "" {
		t.Errorf("bogus answered empty")
	}
}

func TestUnsupportedKeepsConnectionUsable(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	k := key(t, "accounts", "u")
	if err := c.Put(wp(), k, as.BinMap{"l": []any{1, 2}, "n": 1}); err != nil {
		t.Fatal(err)
	}
	p := wp()
	p.FilterExpression = as.ExpEq(as.ExpIntBin("n"), as.ExpIntVal(1))
	cases := []struct {
		name string
		do   func() error
	}{
		{"filter get", func() error { _, err := c.Get(&p.BasePolicy, k); return err }},
		{"filter put", func() error { return c.Put(p, k, as.BinMap{"n": 2}) }},
		{"list op", func() error { _, err := c.Operate(wp(), k, as.ListAppendOp("l", 3)); return err }},
		{"map read", func() error { _, err := c.Operate(wp(), k, as.MapSizeOp("l")); return err }},
		{"udf", func() error { _, err := c.Execute(wp(), k, "pkg", "fn"); return err }},
		{"filter batch", func() error {
			bp := as.NewBatchPolicy()
			bp.FilterExpression = p.FilterExpression
			_, err := c.BatchGet(bp, []*as.Key{k, key(t, "accounts", "v")})
			return err
		}},
		{"filter scan", func() error {
			// Scans accept a subset of filter expressions
			// (filter_test.go); a regex is outside it.
			sp := as.NewScanPolicy()
			sp.FilterExpression = as.ExpRegexCompare("^a", as.ExpRegexFlagNONE, as.ExpStringBin("s"))
			rs, err := c.ScanAll(sp, "chf", "accounts")
			if err != nil {
				return err
			}
			for r := range rs.Results() {
				if r.Err != nil {
					return r.Err
				}
			}
			return nil
		}},
		{"index query", func() error {
			st := as.NewStatement("chf", "accounts")
			st.SetFilter(as.NewEqualFilter("n", 1))
			rs, err := c.Query(nil, st)
			if err != nil {
				return err
			}
			for r := range rs.Results() {
				if r.Err != nil {
					return r.Err
				}
			}
			return nil
		}},
	}
	for _, tc := range cases {
		err := tc.do()
		if !isRC(err, types.UNSUPPORTED_FEATURE) {
			t.Errorf("%s: got %v, want UNSUPPORTED_FEATURE", tc.name, err)
		}
	}
	rec, err := c.Get(nil, k)
	if err != nil || rec.Bins["n"] != 1 {
		t.Fatalf("after unsupported: %v %v", rec, err)
	}
	if s.Stats().BadConnections != 0 {
		t.Fatalf("bad connections %d", s.Stats().BadConnections)
	}
}

func TestCompressedRequests(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	p := wp()
	p.UseCompression = true
	k := key(t, "accounts", "z")
	big := bytes.Repeat([]byte("abcdefgh"), 200)
	if err := c.Put(p, k, as.BinMap{"b": big}); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Get(&p.BasePolicy, k)
	if err != nil || !bytes.Equal(rec.Bins["b"].([]byte), big) {
		t.Fatalf("compressed round trip: %v", err)
	}
}

func TestClientReconnectsAfterRestart(t *testing.T) {
	s := startServer(t, Config{})
	addr := s.Addr()
	c := newClient(t, addr)
	k := key(t, "accounts", "r")
	if err := c.Put(wp(), k, as.BinMap{"v": 1}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := New(Config{Namespaces: []string{"chf"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var startErr error
	for i := 0; i < 100; i++ {
		if startErr = s2.Start(addr); startErr == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if startErr != nil {
		t.Fatalf("restart: %v", startErr)
	}
	t.Cleanup(func() { s2.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Put(wp(), k, as.BinMap{"v": 2})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client never recovered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec, err := c.Get(nil, k)
	if err != nil || rec.Bins["v"] != 2 || rec.Generation != 1 {
		t.Fatalf("after restart: %v %v", rec, err)
	}
}

func TestClientWithCredentials(t *testing.T) {
	s := startServer(t, Config{})
	host, port, _ := net.SplitHostPort(s.Addr())
	var p int
	for _, ch := range port {
		p = p*10 + int(ch-'0')
	}
	cp := as.NewClientPolicy()
	cp.User, cp.Password = "admin", "secret"
	c, err := as.NewClientWithPolicy(cp, host, p)
	if err != nil {
		t.Fatalf("connect with credentials: %v", err)
	}
	defer c.Close()
	k := key(t, "accounts", "cred")
	if err := c.Put(wp(), k, as.BinMap{"v": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(nil, k); err != nil {
		t.Fatal(err)
	}
}

func TestLifecycle(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("no namespace: %v", err)
	}
	if _, err := New(Config{Namespaces: []string{"a;b"}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad namespace: %v", err)
	}
	s, err := New(Config{Namespaces: []string{"chf"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	deadline := time.Now().Add(5 * time.Second)
	for s.Addr() == "" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s.Addr() != ln.Addr().String() {
		t.Fatalf("Addr %q, want %q", s.Addr(), ln.Addr())
	}
	c := newClient(t, s.Addr())
	if err := c.Put(wp(), key(t, "accounts", 1), as.BinMap{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve returned %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Start("127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}
