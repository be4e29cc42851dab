package aslite

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"
)

// frec is the Go model of a record of TestScanFilter: what each bin is.
type frec struct {
	due    int64
	dueInt bool // "due" is an integer bin
	dueStr bool // "due" is a string bin
	te     int64
	teInt  bool
	float  bool // "f" is a float bin
}

func (r frec) dueExists() bool { return r.dueInt || r.dueStr }

// filterRecords is the data set of TestScanFilter: "due" absent, a string
// or integers of every msgpack width and sign; "te" absent or small
// integers; "s" always a string; "f" sometimes a float.
func filterRecords() []frec {
	dues := []int64{-3_000_000_000, -40000, -129, -100, -33, -5, 0, 1, 99, 100, 101,
		127, 128, 255, 256, 65535, 65536, 1 << 32, 1 << 40, math.MaxInt64, math.MaxInt64, math.MinInt64}
	var rs []frec
	for i := 0; i < 132; i++ {
		r := frec{}
		switch i % 6 {
		case 0:
		case 1:
			r.dueStr = true
		default:
			r.due, r.dueInt = dues[i%len(dues)], true
		}
		if i%3 != 0 {
			r.te, r.teInt = int64(i%4), true
		}
		r.float = i%4 == 0
		rs = append(rs, r)
	}
	return rs
}

func (r frec) bins() as.BinMap {
	m := as.BinMap{"s": "str"}
	if r.dueInt {
		m["due"] = r.due
	}
	if r.dueStr {
		m["due"] = "soon"
	}
	if r.teInt {
		m["te"] = r.te
	}
	if r.float {
		m["f"] = 1.5
	}
	return m
}

// scanDigests runs a scan (or a query without an index filter) of set
// "f" with the filter and returns the digests it sent.
func scanDigests(t *testing.T, c *as.Client, exp *as.Expression, query bool) (map[string]bool, error) {
	t.Helper()
	var rs *as.Recordset
	var err error
	if query {
		qp := as.NewQueryPolicy()
		qp.FilterExpression = exp
		rs, err = c.Query(qp, as.NewStatement("chf", "f"))
	} else {
		sp := as.NewScanPolicy()
		sp.FilterExpression = exp
		rs, err = c.ScanAll(sp, "chf", "f")
	}
	if err != nil {
		return nil, err
	}
	got := map[string]bool{}
	for r := range rs.Results() {
		if r.Err != nil {
			return nil, r.Err
		}
		d := string(r.Record.Key.Digest())
		if got[d] {
			t.Errorf("record %x sent twice", d)
		}
		got[d] = true
	}
	return got, nil
}

// TestScanFilter: scans with each supported kind of filter expression
// send exactly the records for which it is true, computed here in Go
// (false and unknown are left out alike).
func TestScanFilter(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	recs := filterRecords()
	digests := make([]string, len(recs))
	for i, r := range recs {
		k := key(t, "f", i)
		digests[i] = string(k.Digest())
		if err := c.Put(wp(), k, r.bins()); err != nil {
			t.Fatal(err)
		}
	}
	// A record in another set never comes back.
	if err := c.Put(wp(), key(t, "other", 1), as.BinMap{"due": 1}); err != nil {
		t.Fatal(err)
	}
	const now, cur = 100, 2
	due, te, missing := as.ExpIntBin("due"), as.ExpIntBin("te"), as.ExpIntBin("missing")
	iv := as.ExpIntVal
	sweep := as.ExpOr(
		as.ExpNot(as.ExpBinExists("due")),
		as.ExpLessEq(due, iv(now)),
		as.ExpAnd(as.ExpBinExists("te"), as.ExpNotEq(te, iv(cur)), as.ExpLess(due, iv(math.MaxInt64))),
	)
	all := func(frec) bool { return true }
	none := func(frec) bool { return false }
	cases := []struct {
		name string
		exp  *as.Expression
		want func(frec) bool
	}{
		{"bin exists", as.ExpBinExists("due"), frec.dueExists},
		{"not bin exists", as.ExpNot(as.ExpBinExists("due")), func(r frec) bool { return !r.dueExists() }},
		{"le", as.ExpLessEq(due, iv(now)), func(r frec) bool { return r.dueInt && r.due <= now }},
		{"lt", as.ExpLess(due, iv(now)), func(r frec) bool { return r.dueInt && r.due < now }},
		{"gt", as.ExpGreater(due, iv(now)), func(r frec) bool { return r.dueInt && r.due > now }},
		{"ge", as.ExpGreaterEq(due, iv(now)), func(r frec) bool { return r.dueInt && r.due >= now }},
		{"eq", as.ExpEq(due, iv(now)), func(r frec) bool { return r.dueInt && r.due == now }},
		{"ne", as.ExpNotEq(due, iv(now)), func(r frec) bool { return r.dueInt && r.due != now }},
		{"literal first", as.ExpGreater(iv(0), due), func(r frec) bool { return r.dueInt && r.due < 0 }},
		{"two bins", as.ExpLess(te, due), func(r frec) bool { return r.dueInt && r.teInt && r.te < r.due }},
		{"wide negative", as.ExpLess(due, iv(-40000)), func(r frec) bool { return r.dueInt && r.due < -40000 }},
		{"wide positive", as.ExpGreaterEq(due, iv(1<<32)), func(r frec) bool { return r.dueInt && r.due >= 1<<32 }},
		{"min int", as.ExpEq(due, iv(math.MinInt64)), func(r frec) bool { return r.dueInt && r.due == math.MinInt64 }},
		{"bin type string", as.ExpEq(as.ExpBinType("due"), iv(3)), func(r frec) bool { return r.dueStr }},
		{"bin type float", as.ExpEq(as.ExpBinType("f"), iv(2)), func(r frec) bool { return r.float }},
		{"and", as.ExpAnd(as.ExpBinExists("te"), as.ExpGreater(due, iv(0))),
			func(r frec) bool { return r.teInt && r.dueInt && r.due > 0 }},
		{"or", as.ExpOr(as.ExpEq(te, iv(1)), as.ExpLess(due, iv(0))),
			func(r frec) bool { return r.teInt && r.te == 1 || r.dueInt && r.due < 0 }},
		{"not not", as.ExpNot(as.ExpNot(as.ExpEq(te, iv(2)))), func(r frec) bool { return r.teInt && r.te == 2 }},
		// A string "due" reads as unknown: NOT of it is unknown too.
		{"not of unknown", as.ExpNot(as.ExpLessEq(due, iv(now))), func(r frec) bool { return r.dueInt && r.due > now }},
		{"sweep", sweep, func(r frec) bool {
			return !r.dueExists() || r.dueInt && r.due <= now ||
				r.teInt && r.te != cur && r.dueInt && r.due < math.MaxInt64
		}},
		{"true", as.ExpBoolVal(true), all},
		{"false", as.ExpBoolVal(false), none},
		{"missing bin", as.ExpEq(missing, iv(1)), none},
		{"not missing", as.ExpNot(as.ExpEq(missing, iv(1))), none},
		{"unknown or true", as.ExpOr(as.ExpEq(missing, iv(1)), as.ExpBoolVal(true)), all},
		{"not (unknown or false)", as.ExpNot(as.ExpOr(as.ExpEq(missing, iv(1)), as.ExpBoolVal(false))), none},
		{"not (unknown and false)", as.ExpNot(as.ExpAnd(as.ExpEq(missing, iv(1)), as.ExpBoolVal(false))), all},
		{"not (unknown and true)", as.ExpNot(as.ExpAnd(as.ExpBoolVal(true), as.ExpEq(missing, iv(1)))), none},
		{"missing type", as.ExpEq(as.ExpBinType("missing"), iv(0)), all},
	}
	for _, tc := range cases {
		for _, query := range []bool{false, true} {
			got, err := scanDigests(t, c, tc.exp, query)
			if err != nil {
				t.Errorf("%s (query %v): %v", tc.name, query, err)
				continue
			}
			n := 0
			for i, r := range recs {
				want := tc.want(r)
				if want {
					n++
				}
				if got[digests[i]] != want {
					t.Errorf("%s (query %v): record %d %+v sent %v, want %v", tc.name, query, i, r, got[digests[i]], want)
				}
			}
			if len(got) != n {
				t.Errorf("%s (query %v): %d records sent, want %d", tc.name, query, len(got), n)
			}
		}
	}
	// An AND or OR of one operand is a parameter error, as in Aerospike
	// 8.1 (found by abm/aslite/difftest).
	for i, exp := range []*as.Expression{as.ExpAnd(as.ExpBinExists("te")), as.ExpOr(as.ExpEq(te, iv(3)))} {
		for _, query := range []bool{false, true} {
			_, err := scanDigests(t, c, exp, query)
			if ae, ok := err.(as.Error); !ok || !ae.Matches(types.PARAMETER_ERROR) {
				t.Errorf("single-operand AND/OR %d (query %v): %v, want PARAMETER_ERROR", i, query, err)
			}
		}
	}
	if s.Stats().BadConnections != 0 {
		t.Fatalf("bad connections %d", s.Stats().BadConnections)
	}
}

// TestScanFilterMaxRecords: MaxRecords counts the records a filtered scan
// returns, not those it examines, and a scan cut short resumes after the
// last record it sent.
func TestScanFilterMaxRecords(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	const pid, n, match, max = 13, 2*scanPiece + 100, 50, 20
	keys := pieceKeys(t, pid, n)
	for i, k := range keys {
		if err := c.Put(wp(), k, as.BinMap{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	sp := as.NewScanPolicy()
	sp.FilterExpression = as.ExpGreaterEq(as.ExpIntBin("i"), as.ExpIntVal(n-match)) // the last 50
	sp.MaxRecords = max
	pf := as.NewPartitionFilterById(pid)
	var got [][]byte
	for page := 0; page < 10; page++ {
		rs, err := c.ScanPartitions(sp, pf, "chf", "s")
		if err != nil {
			t.Fatal(err)
		}
		sent := 0
		for r := range rs.Results() {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			got = append(got, r.Record.Key.Digest())
			sent++
		}
		if want := min(max, match-(len(got)-sent)); sent != want {
			t.Fatalf("page %d: %d records, want %d", page, sent, want)
		}
		if pf.IsDone() {
			break
		}
	}
	if len(got) != match {
		t.Fatalf("pages sent %d records in all, want %d", len(got), match)
	}
	for i, d := range got {
		if want := keys[n-match+i].Digest(); string(d) != string(want) {
			t.Fatalf("record %d is %x, want %x", i, d, want)
		}
	}
}

// TestScanFilterPaced: RecordsPerSecond paces the records a filtered scan
// returns: a scan that examines 640 records and returns 5 at 50 a second
// takes about 100 ms, not the 12.8 s its examined records would.
func TestScanFilterPaced(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	const pid, n, every, rps = 17, 640, 128, 50
	for i, k := range pieceKeys(t, pid, n) {
		bins := as.BinMap{"i": i}
		if i%every == 0 {
			bins["hit"] = 1
		}
		if err := c.Put(wp(), k, bins); err != nil {
			t.Fatal(err)
		}
	}
	sp := as.NewScanPolicy()
	sp.RecordsPerSecond = rps
	sp.FilterExpression = as.ExpEq(as.ExpIntBin("hit"), as.ExpIntVal(1))
	start := time.Now()
	rs, err := c.ScanPartitions(sp, as.NewPartitionFilterById(pid), "chf", "s")
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for r := range rs.Results() {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		got++
	}
	took := time.Since(start)
	if want := n / every; got != want {
		t.Fatalf("scan sent %d records, want %d", got, want)
	}
	if min := time.Duration(got) * time.Second / rps; took < min {
		t.Fatalf("scan of %d records at %d a second took %v, less than %v", got, rps, took, min)
	}
	if took > 3*time.Second {
		t.Fatalf("scan returning %d of %d records at %d a second took %v: paced by the examined records", got, n, rps, took)
	}
}

// TestScanFilterUnsupported: filter expressions outside the subset are
// answered UNSUPPORTED on scans, any filter expression is on other
// commands, and the connection stays usable.
func TestScanFilterUnsupported(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s.Addr())
	k := key(t, "f", "u")
	if err := c.Put(wp(), k, as.BinMap{"n": 1, "s": "abc", "f": 1.5, "l": []any{1}}); err != nil {
		t.Fatal(err)
	}
	n, iv := as.ExpIntBin("n"), as.ExpIntVal
	unsupported := []struct {
		name string
		exp  *as.Expression
	}{
		{"regex", as.ExpRegexCompare("^a", as.ExpRegexFlagNONE, as.ExpStringBin("s"))},
		{"string bin", as.ExpEq(as.ExpStringBin("s"), as.ExpStringVal("abc"))},
		{"float bin", as.ExpGreater(as.ExpFloatBin("f"), as.ExpFloatVal(1))},
		{"bool bin", as.ExpBoolBin("b")},
		{"list size", as.ExpEq(as.ExpListSize(as.ExpListBin("l")), iv(1))},
		{"arithmetic", as.ExpEq(as.ExpNumAdd(n, iv(1)), iv(2))},
		{"let", as.ExpLet(as.ExpDef("x", n), as.ExpEq(as.ExpVar("x"), iv(1)))},
		{"key exists", as.ExpKeyExists()},
		{"ttl", as.ExpGreater(as.ExpTTL(), iv(0))},
		{"exclusive", as.ExpExclusive(as.ExpEq(n, iv(1)), as.ExpEq(n, iv(2)))},
		{"integer result", n},
		{"integer literal", iv(1)},
		{"compare booleans", as.ExpEq(as.ExpBinExists("n"), as.ExpBoolVal(true))},
		{"and of integers", as.ExpAnd(n, iv(1))},
		{"not of integer", as.ExpNot(iv(0))},
		{"long bin name", as.ExpEq(as.ExpIntBin("a_bin_name_of_16"), iv(1))},
	}
	get := func() {
		t.Helper()
		rec, err := c.Get(nil, k)
		if err != nil || rec.Bins["n"] != 1 {
			t.Fatalf("get after unsupported: %v %v", rec, err)
		}
	}
	for _, tc := range unsupported {
		_, err := scanDigests(t, c, tc.exp, false)
		if !isRC(err, types.UNSUPPORTED_FEATURE) {
			t.Errorf("scan %s: got %v, want UNSUPPORTED_FEATURE", tc.name, err)
		}
		get()
	}
	// A supported filter stays refused by every command but a scan.
	ok := as.ExpEq(n, iv(1))
	p := wp()
	p.FilterExpression = ok
	others := []struct {
		name string
		do   func() error
	}{
		{"get", func() error { _, err := c.Get(&p.BasePolicy, k); return err }},
		{"put", func() error { return c.Put(p, k, as.BinMap{"n": 2}) }},
		{"operate", func() error { _, err := c.Operate(p, k, as.GetBinOp("n")); return err }},
		{"batch", func() error {
			bp := as.NewBatchPolicy()
			bp.FilterExpression = ok
			_, err := c.BatchGet(bp, []*as.Key{k})
			return err
		}},
		{"index query", func() error {
			qp := as.NewQueryPolicy()
			qp.FilterExpression = ok
			st := as.NewStatement("chf", "f")
			st.SetFilter(as.NewEqualFilter("n", 1))
			rs, err := c.Query(qp, st)
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
	for _, tc := range others {
		if err := tc.do(); !isRC(err, types.UNSUPPORTED_FEATURE) {
			t.Errorf("filtered %s: got %v, want UNSUPPORTED_FEATURE", tc.name, err)
		}
		get()
	}
	if got, err := scanDigests(t, c, ok, false); err != nil || len(got) != 1 {
		t.Fatalf("supported filter after the others: %d records, %v", len(got), err)
	}
	if s.Stats().BadConnections != 0 {
		t.Fatalf("bad connections %d", s.Stats().BadConnections)
	}
}

// expBytes is the client's wire encoding of e.
func expBytes(t testing.TB, e *as.Expression) []byte {
	t.Helper()
	s, aerr := e.Base64()
	if aerr != nil {
		t.Fatal(aerr)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// filterSeeds are client encodings of supported filters.
func filterSeeds(t testing.TB) [][]byte {
	due, te := as.ExpIntBin("due"), as.ExpIntBin("te")
	iv := as.ExpIntVal
	exps := []*as.Expression{
		as.ExpOr(
			as.ExpNot(as.ExpBinExists("due")),
			as.ExpLessEq(due, iv(1_700_000_000_000)),
			as.ExpAnd(as.ExpBinExists("te"), as.ExpNotEq(te, iv(-7)), as.ExpLess(due, iv(math.MaxInt64))),
		),
		as.ExpEq(as.ExpBinType("due"), iv(3)),
		as.ExpBoolVal(true),
		as.ExpNot(as.ExpAnd(as.ExpGreater(due, iv(300)), as.ExpGreaterEq(iv(-70000), te), as.ExpBoolVal(false))),
	}
	var seeds [][]byte
	for _, e := range exps {
		seeds = append(seeds, expBytes(t, e))
	}
	return seeds
}

// msgpack helpers for hand-built expressions.
func mpArray(n int, elems ...[]byte) []byte {
	var b []byte
	switch {
	case n < 16:
		b = []byte{0x90 | byte(n)}
	case n <= math.MaxUint16:
		b = []byte{0xdc, byte(n >> 8), byte(n)}
	default:
		b = binary.BigEndian.AppendUint32([]byte{0xdd}, uint32(n))
	}
	for _, e := range elems {
		b = append(b, e...)
	}
	return b
}

func mpStr(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }

var (
	mpTrue  = []byte{0xc3}
	mpFalse = []byte{0xc2}
)

func mpNot(e []byte) []byte { return mpArray(2, []byte{expOpNOT}, e) }

func mpIntBin(name string) []byte { return mpArray(3, []byte{expOpBIN, expTypeINT}, mpStr(name)) }

// TestCompileFilter: the decoder accepts the client's encodings of the
// subset, and rejects truncated or extended ones and hand-built hostile
// ones (too deep, too many nodes or bin names, wrong arity or type,
// integers out of range) without panicking.
func TestCompileFilter(t *testing.T) {
	var f filter
	for _, seed := range filterSeeds(t) {
		if !compileFilter(seed, &f) {
			t.Fatalf("rejected %x", seed)
		}
		for i := 0; i < len(seed); i++ {
			if compileFilter(seed[:i], &f) {
				t.Errorf("accepted %x, a prefix of %x", seed[:i], seed)
			}
		}
		if compileFilter(append(slices.Clip(seed), 0xc3), &f) {
			t.Errorf("accepted %x with a trailing byte", seed)
		}
	}
	deep := func(n int) []byte {
		e := mpTrue
		for range n {
			e = mpNot(e)
		}
		return e
	}
	wide := func(n int) []byte {
		e := mpArray(n+1, []byte{expOpAND})
		for range n {
			e = append(e, mpTrue...)
		}
		return e
	}
	bins := func(n int) []byte {
		e := mpArray(n+1, []byte{expOpOR})
		for i := range n {
			e = append(e, mpArray(3, []byte{expOpEQ}, mpIntBin(strings.Repeat("b", i%14+1)+string(rune('a'+i/14))), []byte{1})...)
		}
		return e
	}
	cmp := func(a, b []byte) []byte { return mpArray(3, []byte{expOpLT}, a, b) }
	cases := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"32 nested", deep(maxExpDepth), true},
		{"33 nested", deep(maxExpDepth + 1), false},
		{"1000 nested", deep(1000), false},
		{"and of 255", wide(maxExpNodes - 1), true},
		{"and of 256", wide(maxExpNodes), false},
		{"and of 20, array16", wide(20), true},
		{"array32 header", append(mpArray(1<<20, []byte{expOpAND}), mpTrue...), false},
		{"array32 of 2", []byte{0xdd, 0, 0, 0, 2, expOpNOT, 0xc3}, true},
		{"16 bin names", bins(maxExpBins), true},
		{"17 bin names", bins(maxExpBins + 1), false},
		{"and of none", mpArray(1, []byte{expOpAND}), false},
		{"not of two", mpArray(3, []byte{expOpNOT}, mpTrue, mpTrue), false},
		{"eq of one", mpArray(2, []byte{expOpEQ}, []byte{1}), false},
		{"empty array", mpArray(0), false},
		{"empty", nil, false},
		{"bin of type string", mpArray(3, []byte{expOpLT}, mpArray(3, []byte{expOpBIN, 3}, mpStr("a")), []byte{1}), false},
		{"bin name not a str", cmp(mpArray(3, []byte{expOpBIN, expTypeINT}, []byte{0x01}), []byte{1}), false},
		{"bin name str8", cmp(mpArray(3, []byte{expOpBIN, expTypeINT}, []byte{0xd9, 1, 'a'}), []byte{1}), true},
		{"bin name str32", cmp(mpArray(3, []byte{expOpBIN, expTypeINT}, []byte{0xdb, 0, 0, 0, 1, 'a'}), []byte{1}), true},
		{"bin name str32 huge", cmp(mpArray(3, []byte{expOpBIN, expTypeINT}, []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}), []byte{1}), false},
		{"bin type of 3", mpArray(3, []byte{expOpBINTYPE}, mpStr("a"), mpStr("b")), false},
		{"uint64 max int64", cmp([]byte{1}, []byte{0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), true},
		{"uint64 past int64", cmp([]byte{1}, []byte{0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}), false},
		{"int8", cmp([]byte{0xd0, 0x80}, []byte{0xe0}), true},
		{"float operand", cmp([]byte{1}, []byte{0xcb, 0, 0, 0, 0, 0, 0, 0, 0}), false},
		{"nil operand", cmp([]byte{1}, []byte{0xc0}), false},
		{"bool operand of eq", cmp(mpTrue, mpFalse), false},
		{"op code float", mpArray(2, []byte{0xca, 0, 0, 0, 0}, mpTrue), false},
		{"op code str", mpArray(2, mpStr("x"), mpTrue), false},
		{"unknown op", mpArray(2, []byte{0x7f}, mpTrue), false},
		{"top-level integer", []byte{1}, false},
		{"top-level false", mpFalse, true},
	}
	for _, tc := range cases {
		if got := compileFilter(tc.b, &f); got != tc.ok {
			t.Errorf("%s: compileFilter(%x) = %v, want %v", tc.name, tc.b, got, tc.ok)
		}
	}
	// Evaluation of the hand-built ones: uint64 max > 1, -128 < -32.
	for _, b := range [][]byte{
		cmp([]byte{1}, []byte{0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}),
		cmp([]byte{0xd0, 0x80}, []byte{0xe0}),
		deep(maxExpDepth),
		wide(maxExpNodes - 1),
	} {
		if !compileFilter(b, &f) || !f.match(nil) {
			t.Errorf("%x: not true", b)
		}
	}
}

// TestCompileFilterRandom feeds the decoder random bytes and random
// mutations of valid encodings: it must never panic, and whatever it
// accepts must evaluate without panicking.
func TestCompileFilterRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	seeds := filterSeeds(t)
	rec := appendOp(nil, ptInteger, []byte("due"), []byte{0, 0, 0, 0, 0, 0, 0, 9})
	rec = appendOp(rec, ptString, []byte("te"), []byte("x"))
	var f filter
	try := func(b []byte) {
		if compileFilter(b, &f) {
			f.match(rec)
			f.match(nil)
		}
	}
	accepted := 0
	for i := 0; i < 20000; i++ {
		var b []byte
		if i%2 == 0 {
			b = make([]byte, rng.Intn(40))
			rng.Read(b)
		} else {
			b = slices.Clone(seeds[rng.Intn(len(seeds))])
			for range 1 + rng.Intn(3) {
				switch rng.Intn(3) {
				case 0:
					b[rng.Intn(len(b))] = byte(rng.Intn(256))
				case 1:
					b = b[:rng.Intn(len(b))]
				default:
					at := rng.Intn(len(b) + 1)
					b = slices.Insert(b, at, byte(rng.Intn(256)))
				}
				if len(b) == 0 {
					break
				}
			}
		}
		if compileFilter(b, &f) {
			accepted++
		}
		try(b)
	}
	t.Logf("accepted %d of 20000", accepted)
}

// FuzzCompileFilter: go test -run '^$' -fuzz FuzzCompileFilter ./abm/aslite
func FuzzCompileFilter(f *testing.F) {
	for _, s := range filterSeeds(f) {
		f.Add(s)
	}
	rec := appendOp(nil, ptInteger, []byte("due"), []byte{0, 0, 0, 0, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		var fl filter
		if compileFilter(b, &fl) {
			fl.match(rec)
		}
	})
}

// TestScanFilterAllocs: a filtered scan compiles its filter once and
// allocates nothing per record examined.
func TestScanFilterAllocs(t *testing.T) {
	s, err := New(Config{Namespaces: []string{"chf"}, Logger: quietLogger(), ReclaimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := connPool.New().(*conn)
	c.nc = &fakeConn{}
	const pid, n = 21, 4 * scanPiece
	for i, k := range pieceKeys(t, pid, n) {
		msg := buildMsg(0, info2Write, 0, k.Digest(),
			wireOp{op: opWrite, ptype: ptInteger, name: []byte("due"), val: binary.BigEndian.AppendUint64(nil, uint64(i))},
			wireOp{op: opWrite, ptype: ptBlob, name: []byte("sess"), val: make([]byte, 100)})
		c.out = c.out[:0]
		if err := s.handleMsg(c, msg); err != nil {
			t.Fatal(err)
		}
	}
	exp := expBytes(t, as.ExpOr(
		as.ExpNot(as.ExpBinExists("due")),
		as.ExpLess(as.ExpIntBin("due"), as.ExpIntVal(n/20)),
	))
	scan := appendMsgHeader(nil, 0, 0, 0, 0, 0, 3, 0)
	scan[1] = info1Read
	scan = appendField(scan, fieldNamespace, []byte("chf"))
	scan = appendField(scan, fieldPIDArray, []byte{pid, 0})
	scan = appendField(scan, fieldFilterExp, exp)
	run := func() {
		c.out = c.out[:0]
		if err := s.handleMsg(c, scan); err != nil {
			t.Fatal(err)
		}
	}
	run() // warm up
	if rc := c.out[len(c.out)-msgHeaderSize+5]; rc != rcOK {
		t.Fatalf("scan rc %d", rc)
	}
	// An unfiltered scan allocates once per command today.
	if allocs := testing.AllocsPerRun(20, run); allocs > 2 {
		t.Errorf("%v allocs per scan of %d records, want at most 2 (none per record)", allocs, n)
	}
}

// BenchmarkFilterMatch: testing one stored record (bins "sess", 120
// bytes, and "te") against the sweep-like filter of
// BenchmarkScanPartitionFiltered, which rejects it after all three terms;
// the server's cost of the filter per record examined, without the scan.
func BenchmarkFilterMatch(b *testing.B) {
	te := as.ExpIntBin("te")
	exp := expBytes(b, as.ExpOr(
		as.ExpNot(as.ExpBinExists("te")),
		as.ExpLess(te, as.ExpIntVal(250)),
		as.ExpAnd(as.ExpBinExists("te"), as.ExpNotEq(te, as.ExpIntVal(-1)), as.ExpLess(te, as.ExpIntVal(-1))),
	))
	rec := appendOp(nil, ptBlob, []byte("sess"), make([]byte, 120))
	rec = appendOp(rec, ptInteger, []byte("te"), binary.BigEndian.AppendUint64(nil, 4000))
	var f filter
	if !compileFilter(exp, &f) {
		b.Fatal("rejected")
	}
	b.ReportAllocs()
	for b.Loop() {
		if f.match(rec) {
			b.Fatal("matched")
		}
	}
}
