package difftest

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm/aslite"
)

// abmSteps are the commands the ABM and provisioning send (abm/service.go,
// abm/batch.go, abm/provision), in their policies, plus the error cases
// around them.
func abmSteps() []step {
	var s []step
	add := func(name string, run func(t *target) string) { s = append(s, step{name, run}) }
	acct := func(bal int64) as.BinMap {
		return as.BinMap{"bal": bal, "cur": "EUR", "deb": 0, "ses": []byte{1, 2, 3}, "due": 0}
	}
	// Provisioning: CREATE_ONLY single and batch, REPLACE on overwrite.
	add("put create-only new", func(t *target) string {
		return put(t, "a1", wpol(as.CREATE_ONLY, as.NONE, 0, 0), acct(1000))
	})
	add("put create-only existing", func(t *target) string {
		return put(t, "a1", wpol(as.CREATE_ONLY, as.NONE, 0, 0), acct(5))
	})
	add("put replace existing drops other bins", func(t *target) string {
		return put(t, "a1", wpol(as.REPLACE, as.NONE, 0, 0), as.BinMap{"bal": 1000, "cur": "EUR"})
	})
	add("put replace missing creates", func(t *target) string {
		return put(t, "a2", wpol(as.REPLACE, as.NONE, 0, 0), acct(200))
	})
	add("put update merges bins", func(t *target) string {
		return put(t, "a1", wpol(as.UPDATE, as.NONE, 0, 0), as.BinMap{"deb": 7, "ses": []byte{9}})
	})
	add("put replace new", func(t *target) string {
		return put(t, "a3", wpol(as.REPLACE, as.NONE, 0, 0), acct(300))
	})
	add("put nil bin deletes it", func(t *target) string {
		return put(t, "a3", wpol(as.UPDATE, as.NONE, 0, 0), as.BinMap{"due": nil})
	})
	// The ABM's write: UPDATE_ONLY, EXPECT_GEN_EQUAL, no retries.
	add("abm write current generation", func(t *target) string {
		g := genOf(t, "a1")
		return put(t, "a1", wpol(as.UPDATE_ONLY, as.EXPECT_GEN_EQUAL, g, 0), as.BinMap{"bal": 990, "deb": 10})
	})
	add("abm write stale generation", func(t *target) string {
		g := genOf(t, "a1")
		return put(t, "a1", wpol(as.UPDATE_ONLY, as.EXPECT_GEN_EQUAL, g-1, 0), as.BinMap{"bal": 1})
	})
	add("abm write future generation", func(t *target) string {
		g := genOf(t, "a1")
		return put(t, "a1", wpol(as.UPDATE_ONLY, as.EXPECT_GEN_EQUAL, g+5, 0), as.BinMap{"bal": 1})
	})
	add("abm write missing record", func(t *target) string {
		return put(t, "nobody", wpol(as.UPDATE_ONLY, as.EXPECT_GEN_EQUAL, 1, 0), as.BinMap{"bal": 1})
	})
	add("write gen-equal missing record, update", func(t *target) string {
		return put(t, "g1", wpol(as.UPDATE, as.EXPECT_GEN_EQUAL, 5, 0), as.BinMap{"bal": 1})
	})
	add("write gen-gt missing record, update", func(t *target) string {
		return put(t, "g2", wpol(as.UPDATE, as.EXPECT_GEN_GT, 0, 0), as.BinMap{"bal": 1})
	})
	add("write gen-equal create-only existing", func(t *target) string {
		return put(t, "g1", wpol(as.CREATE_ONLY, as.EXPECT_GEN_EQUAL, 7, 0), as.BinMap{"bal": 1})
	})
	add("write gen-gt newer", func(t *target) string {
		g := genOf(t, "a2")
		return put(t, "a2", wpol(as.UPDATE, as.EXPECT_GEN_GT, g+1, 0), as.BinMap{"bal": 201})
	})
	add("write gen-gt not newer", func(t *target) string {
		g := genOf(t, "a2")
		return put(t, "a2", wpol(as.UPDATE, as.EXPECT_GEN_GT, g, 0), as.BinMap{"bal": 202})
	})
	// Reads.
	add("get", func(t *target) string { return rec(t.client.Get(nil, t.key("a1"))) })
	add("get bins", func(t *target) string { return rec(t.client.Get(nil, t.key("a1"), "bal", "nope")) })
	add("get missing", func(t *target) string { return rec(t.client.Get(nil, t.key("nobody"))) })
	add("get header", func(t *target) string {
		r, err := t.client.GetHeader(nil, t.key("a1"))
		return rec(r, err)
	})
	add("exists", func(t *target) string {
		a, err1 := t.client.Exists(nil, t.key("a1"))
		b, err2 := t.client.Exists(nil, t.key("nobody"))
		return fmt.Sprint(a, rc(err1), b, rc(err2))
	})
	add("get with timeout policy", func(t *target) string {
		p := as.NewPolicy()
		p.TotalTimeout, p.SocketTimeout = 2*time.Second, 2*time.Second
		return rec(t.client.Get(p, t.key("a2")))
	})
	// Operate.
	add("operate add put get", func(t *target) string {
		r, err := t.client.Operate(wpol(as.UPDATE, as.NONE, 0, 0), t.key("a2"),
			as.AddOp(as.NewBin("bal", 5)), as.PutOp(as.NewBin("cur", "USD")), as.GetOp())
		return rec(r, err)
	})
	add("operate get bin and header", func(t *target) string {
		r, err := t.client.Operate(nil, t.key("a2"), as.GetBinOp("bal"), as.GetHeaderOp())
		return rec(r, err)
	})
	add("operate add creates missing", func(t *target) string {
		r, err := t.client.Operate(wpol(as.UPDATE, as.NONE, 0, 0), t.key("o1"), as.AddOp(as.NewBin("n", 3)), as.GetBinOp("n"))
		return rec(r, err)
	})
	add("operate update-only missing", func(t *target) string {
		r, err := t.client.Operate(wpol(as.UPDATE_ONLY, as.NONE, 0, 0), t.key("o2"), as.AddOp(as.NewBin("n", 3)))
		return rec(r, err)
	})
	add("operate stale generation", func(t *target) string {
		r, err := t.client.Operate(wpol(as.UPDATE, as.EXPECT_GEN_EQUAL, 99, 0), t.key("o1"), as.AddOp(as.NewBin("n", 1)))
		return rec(r, err)
	})
	add("operate add to string bin", func(t *target) string {
		r, err := t.client.Operate(wpol(as.UPDATE, as.NONE, 0, 0), t.key("a2"), as.AddOp(as.NewBin("cur", 1)))
		return rec(r, err)
	})
	add("operate append prepend", func(t *target) string {
		r, err := t.client.Operate(wpol(as.UPDATE, as.NONE, 0, 0), t.key("a2"),
			as.AppendOp(as.NewBin("cur", "x")), as.PrependOp(as.NewBin("cur", "y")), as.GetBinOp("cur"))
		return rec(r, err)
	})
	add("operate touch", func(t *target) string {
		r, err := t.client.Operate(wpol(as.UPDATE, as.NONE, 0, 0), t.key("a2"), as.TouchOp(), as.GetHeaderOp())
		return rec(r, err)
	})
	add("operate delete op", func(t *target) string {
		r, err := t.client.Operate(wpol(as.UPDATE, as.NONE, 0, 0), t.key("o1"), as.DeleteOp())
		g, gerr := t.client.Get(nil, t.key("o1"))
		return rec(r, err) + " -> " + rec(g, gerr)
	})
	add("touch missing", func(t *target) string {
		return rc(t.client.Touch(nil, t.key("nobody")))
	})
	// Batch reads (the ABM's BatchGet of the accounts of a batch).
	add("batch get mixed", func(t *target) string {
		keys := []*as.Key{t.key("a1"), t.key("nobody"), t.key("a2"), t.key("a1")}
		rs, err := t.client.BatchGet(nil, keys)
		out := []string{rc(err)}
		for _, r := range rs {
			out = append(out, rec(r, nil))
		}
		return strings.Join(out, " | ")
	})
	add("batch get bins", func(t *target) string {
		rs, err := t.client.BatchGet(nil, []*as.Key{t.key("a2"), t.key("nobody")}, "bal")
		out := []string{rc(err)}
		for _, r := range rs {
			out = append(out, rec(r, nil))
		}
		return strings.Join(out, " | ")
	})
	add("batch get header", func(t *target) string {
		rs, err := t.client.BatchGetHeader(nil, []*as.Key{t.key("a2"), t.key("nobody")})
		out := []string{rc(err)}
		for _, r := range rs {
			out = append(out, rec(r, nil))
		}
		return strings.Join(out, " | ")
	})
	add("batch exists", func(t *target) string {
		ex, err := t.client.BatchExists(nil, []*as.Key{t.key("a2"), t.key("nobody")})
		return fmt.Sprint(rc(err), ex)
	})
	// Batch writes: provisioning (CREATE_ONLY, some existing) and the
	// ABM's (UPDATE_ONLY, EXPECT_GEN_EQUAL, some stale or missing).
	batch := func(t *target, recs []as.BatchRecordIfc) string {
		bp := as.NewBatchPolicy()
		bp.MaxRetries = 0
		err := t.client.BatchOperate(bp, recs)
		out := []string{rc(err)}
		for _, r := range recs {
			br := r.BatchRec()
			out = append(out, fmt.Sprintf("%v rc=%d indoubt=%v %s", br.Key.Value(), br.ResultCode, br.InDoubt, rec(br.Record, nil)))
		}
		for _, r := range recs {
			g, gerr := t.client.Get(nil, r.BatchRec().Key)
			out = append(out, "after "+rec(g, gerr))
		}
		return strings.Join(out, " | ")
	}
	putOps := func(bm as.BinMap) []*as.Operation {
		names := make([]string, 0, len(bm))
		for k := range bm {
			names = append(names, k)
		}
		slices.Sort(names)
		ops := make([]*as.Operation, len(names))
		for i, k := range names {
			ops[i] = as.PutOp(as.NewBin(k, bm[k]))
		}
		return ops
	}
	add("batch create-only partial", func(t *target) string {
		bw := as.NewBatchWritePolicy()
		bw.SendKey = true
		bw.RecordExistsAction = as.CREATE_ONLY
		var recs []as.BatchRecordIfc
		for _, k := range []string{"b1", "a1", "b2", "a2"} {
			recs = append(recs, as.NewBatchWrite(bw, t.key(k), putOps(acct(50))...))
		}
		return batch(t, recs)
	})
	add("batch replace overwrite", func(t *target) string {
		bw := as.NewBatchWritePolicy()
		bw.SendKey = true
		bw.RecordExistsAction = as.REPLACE
		return batch(t, []as.BatchRecordIfc{as.NewBatchWrite(bw, t.key("b1"), putOps(as.BinMap{"bal": 60})...),
			as.NewBatchWrite(bw, t.key("b3"), putOps(acct(70))...)})
	})
	add("batch abm writes gen checked", func(t *target) string {
		var recs []as.BatchRecordIfc
		for i, k := range []string{"b1", "b2", "nobody", "a2"} {
			bw := as.NewBatchWritePolicy()
			bw.SendKey = true
			bw.RecordExistsAction = as.UPDATE_ONLY
			bw.GenerationPolicy = as.EXPECT_GEN_EQUAL
			bw.Generation = genOf(t, k)
			if i == 3 {
				bw.Generation-- // stale
			}
			recs = append(recs, as.NewBatchWrite(bw, t.key(k), putOps(as.BinMap{"bal": 40 + i, "deb": i})...))
		}
		return batch(t, recs)
	})
	add("batch read write delete mixed", func(t *target) string {
		bw := as.NewBatchWritePolicy()
		bw.SendKey = true
		return batch(t, []as.BatchRecordIfc{
			as.NewBatchRead(nil, t.key("a1"), []string{"bal"}),
			as.NewBatchRead(nil, t.key("nobody"), nil),
			as.NewBatchWrite(bw, t.key("b4"), as.AddOp(as.NewBin("n", 2)), as.GetBinOp("n")),
			as.NewBatchDelete(nil, t.key("b3")),
			as.NewBatchDelete(nil, t.key("nobody2")),
		})
	})
	// Delete.
	add("delete existing", func(t *target) string {
		ok, err := t.client.Delete(nil, t.key("b4"))
		g, gerr := t.client.Get(nil, t.key("b4"))
		return fmt.Sprint(ok, rc(err), " -> ", rec(g, gerr))
	})
	add("delete missing", func(t *target) string {
		ok, err := t.client.Delete(nil, t.key("b4"))
		return fmt.Sprint(ok, rc(err))
	})
	add("delete then create-only", func(t *target) string {
		return put(t, "b4", wpol(as.CREATE_ONLY, as.NONE, 0, 0), as.BinMap{"n": 1})
	})
	add("delete with stale generation", func(t *target) string {
		wp := wpol(as.UPDATE, as.EXPECT_GEN_EQUAL, genOf(t, "b4")+1, 0)
		ok, err := t.client.Delete(wp, t.key("b4"))
		return fmt.Sprint(ok, rc(err))
	})
	add("delete missing with generation", func(t *target) string {
		ok, err := t.client.Delete(wpol(as.UPDATE, as.EXPECT_GEN_EQUAL, 3, 0), t.key("nobody"))
		return fmt.Sprint(ok, rc(err))
	})
	// TTLs with nsup-period > 0: both accept them.
	add("put ttl 100", func(t *target) string {
		return put(t, "t1", wpol(as.UPDATE, as.NONE, 0, 100), as.BinMap{"n": 1})
	})
	add("put ttl never", func(t *target) string {
		return put(t, "t2", wpol(as.UPDATE, as.NONE, 0, as.TTLDontExpire), as.BinMap{"n": 1})
	})
	add("put ttl dont-update keeps", func(t *target) string {
		return put(t, "t1", wpol(as.UPDATE, as.NONE, 0, as.TTLDontUpdate), as.BinMap{"n": 2})
	})
	add("put ttl server default", func(t *target) string {
		return put(t, "t1", wpol(as.UPDATE, as.NONE, 0, as.TTLServerDefault), as.BinMap{"n": 3})
	})
	add("touch with ttl", func(t *target) string {
		err := t.client.Touch(wpol(as.UPDATE, as.NONE, 0, 3600), t.key("t2"))
		return rc(err) + " -> " + rec(t.client.Get(nil, t.key("t2")))
	})
	add("put ttl above max-ttl", func(t *target) string {
		return put(t, "t3", wpol(as.UPDATE, as.NONE, 0, 11*365*24*3600), as.BinMap{"n": 1})
	})
	// Records for the scans: due and epoch bins as the ABM writes them.
	add("sweep records", func(t *target) string {
		var out []string
		for i := range 40 {
			bm := as.BinMap{"bal": i, "ses": []byte{byte(i)}}
			switch i % 4 {
			case 0:
				bm["due"] = 100 + i
			case 1:
				bm["due"] = 10_000
				bm["ep"] = i % 3
			case 2:
				bm["ep"] = 2
			}
			err := t.client.Put(wpol(as.UPDATE, as.NONE, 0, 0), t.key(fmt.Sprintf("s%02d", i)), bm)
			out = append(out, rc(err))
		}
		return strings.Join(slices.Compact(out), ",")
	})
	scan := func(t *target, sp *as.ScanPolicy, binNames ...string) string {
		rs, err := t.client.ScanPartitions(sp, as.NewPartitionFilterAll(), t.ns, t.set, binNames...)
		if err != nil {
			return rc(err)
		}
		return drain(rs)
	}
	add("scan all", func(t *target) string { return scan(t, as.NewScanPolicy()) })
	add("scan bins", func(t *target) string { return scan(t, as.NewScanPolicy(), "ses", "ep") })
	add("scan sweep filter", func(t *target) string {
		sp := as.NewScanPolicy()
		sp.FilterExpression = sweep(500, 1)
		return scan(t, sp, "ses", "ep")
	})
	add("scan sweep filter no epoch, rps cap", func(t *target) string {
		sp := as.NewScanPolicy()
		sp.FilterExpression = sweep(120, 0)
		sp.RecordsPerSecond = 50
		return scan(t, sp, "ses", "ep")
	})
	add("scan single-operand or", func(t *target) string {
		sp := as.NewScanPolicy()
		sp.FilterExpression = as.ExpOr(as.ExpLessEq(as.ExpIntBin("due"), as.ExpIntVal(120)))
		return scan(t, sp, "ses")
	})
	add("scan single-operand and", func(t *target) string {
		sp := as.NewScanPolicy()
		sp.FilterExpression = as.ExpAnd(as.ExpLessEq(as.ExpIntBin("due"), as.ExpIntVal(120)))
		return scan(t, sp, "ses")
	})
	add("scan rps cap", func(t *target) string {
		sp := as.NewScanPolicy()
		sp.FilterExpression = as.ExpLessEq(as.ExpIntBin("due"), as.ExpIntVal(120))
		sp.RecordsPerSecond = 50
		return scan(t, sp, "ses")
	})
	add("scan filter false", func(t *target) string {
		sp := as.NewScanPolicy()
		sp.FilterExpression = as.ExpBoolVal(false)
		return scan(t, sp)
	})
	add("scan filter missing bin compare", func(t *target) string {
		sp := as.NewScanPolicy()
		sp.FilterExpression = as.ExpNot(as.ExpEq(as.ExpIntBin("missing"), as.ExpIntVal(1)))
		return scan(t, sp)
	})
	add("scan partition range, max records", func(t *target) string {
		sp := as.NewScanPolicy()
		sp.MaxRecords = 5
		pf := as.NewPartitionFilterByRange(0, 2048)
		rs, err := t.client.ScanPartitions(sp, pf, t.ns, t.set)
		if err != nil {
			return rc(err)
		}
		n := count(rs)
		return fmt.Sprintf("at most 5: %v", n <= 5 && n > 0)
	})
	add("query no index with filter", func(t *target) string {
		qp := as.NewQueryPolicy()
		qp.FilterExpression = sweep(500, 1)
		st := as.NewStatement(t.ns, t.set, "ses", "ep")
		rs, err := t.client.QueryPartitions(qp, st, as.NewPartitionFilterAll())
		if err != nil {
			return rc(err)
		}
		return drain(rs)
	})
	add("scan missing set", func(t *target) string {
		rs, err := t.client.ScanPartitions(as.NewScanPolicy(), as.NewPartitionFilterAll(), t.ns, t.set+"x")
		if err != nil {
			return rc(err)
		}
		return drain(rs)
	})
	// Info commands the ABM sends (storedAccounts) and tools read.
	add("info sets objects", func(t *target) string {
		v := info(t, "sets/"+t.ns+"/"+t.set)
		return "objects=" + field(v, "objects", ':')
	})
	add("info namespace", func(t *target) string {
		v := info(t, "namespace/"+t.ns)
		return "replication-factor=" + field(v, "replication-factor", ';') + " default-ttl=" + field(v, "default-ttl", ';') +
			" storage-engine=" + field(v, "storage-engine", ';')
	})
	add("info namespace missing", func(t *target) string {
		return "answer: " + info(t, "namespace/nope")
	})
	add("info build edition namespaces", func(t *target) string {
		return fmt.Sprintf("build=%v edition=%v namespaces=%s",
			versionRE.MatchString(info(t, "build")), strings.HasPrefix(info(t, "edition"), "Aerospike"), info(t, "namespaces"))
	})
	return s
}

// sweep is the ABM's sweep filter (abm/service.go sweepFilter).
func sweep(now int64, cur int64) *as.Expression {
	due := as.ExpIntBin("due")
	either := []*as.Expression{as.ExpLessEq(due, as.ExpIntVal(now))}
	if cur != 0 {
		te := as.ExpIntBin("ep")
		either = append(either, as.ExpAnd(as.ExpBinExists("due"), as.ExpBinExists("ep"),
			as.ExpNotEq(te, as.ExpIntVal(0)), as.ExpNotEq(te, as.ExpIntVal(cur))))
	}
	return as.ExpOr(either...)
}

func drain(rs *as.Recordset) string {
	var out []string
	for r := range rs.Results() {
		if r.Err != nil {
			out = append(out, "err "+rc(r.Err))
			continue
		}
		out = append(out, fmt.Sprintf("%v %s", r.Record.Key.Value(), rec(r.Record, nil)))
	}
	slices.Sort(out)
	return fmt.Sprintf("%d records: %s", len(out), strings.Join(out, "; "))
}

func count(rs *as.Recordset) int {
	n := 0
	for r := range rs.Results() {
		if r.Err == nil {
			n++
		}
	}
	return n
}

var versionRE = regexp.MustCompile(`^\d+\.\d+\.\d+`)

func info(t *target, cmd string) string {
	n, err := t.client.Cluster().GetRandomNode()
	if err != nil {
		return rc(err)
	}
	m, err := n.RequestInfo(as.NewInfoPolicy(), cmd)
	if err != nil {
		return rc(err)
	}
	return m[cmd]
}

func field(v, key string, sep byte) string {
	for _, rec := range strings.Split(v, ";") {
		for _, kv := range strings.Split(rec, string(sep)) {
			if k, val, ok := strings.Cut(kv, "="); ok && k == key {
				return val
			}
		}
	}
	return "(absent)"
}

// known are the deliberate differences, documented in abm/aslite/README.md.
var known = map[string]string{}

// ttlSteps are writes with and without TTLs, for the nsup-period rule.
func ttlSteps() []step {
	var s []step
	add := func(name string, run func(t *target) string) { s = append(s, step{name, run}) }
	for _, tc := range []struct {
		name string
		exp  uint32
	}{{"ttl 100", 100}, {"ttl never", as.TTLDontExpire}, {"ttl dont-update", as.TTLDontUpdate}, {"ttl server default", as.TTLServerDefault}} {
		add("put "+tc.name, func(t *target) string {
			return put(t, "x1", wpol(as.UPDATE, as.NONE, 0, tc.exp), as.BinMap{"n": 1})
		})
		add("operate "+tc.name, func(t *target) string {
			r, err := t.client.Operate(wpol(as.UPDATE, as.NONE, 0, tc.exp), t.key("x2"), as.AddOp(as.NewBin("n", 1)), as.GetOp())
			return rec(r, err)
		})
		add("touch "+tc.name, func(t *target) string {
			err := t.client.Touch(wpol(as.UPDATE, as.NONE, 0, tc.exp), t.key("x1"))
			return rc(err) + " -> " + rec(t.client.Get(nil, t.key("x1")))
		})
		add("batch write "+tc.name, func(t *target) string {
			bw := as.NewBatchWritePolicy()
			bw.Expiration = tc.exp
			recs := []as.BatchRecordIfc{as.NewBatchWrite(bw, t.key("x3"), as.PutOp(as.NewBin("n", 1))),
				as.NewBatchWrite(bw, t.key("x4"), as.PutOp(as.NewBin("n", 2)))}
			err := t.client.BatchOperate(nil, recs)
			out := rc(err)
			for _, r := range recs {
				out += fmt.Sprintf(" | rc=%d", r.BatchRec().ResultCode)
			}
			return out + " -> " + rec(t.client.Get(nil, t.key("x3")))
		})
	}
	add("delete with ttl policy", func(t *target) string {
		ok, err := t.client.Delete(wpol(as.UPDATE, as.NONE, 0, 100), t.key("x4"))
		return fmt.Sprint(ok, rc(err))
	})
	return s
}

// real connects to the server to compare with and returns aslite's
// configuration matching its namespace (nsup-period 0 forbids TTLs).
func connectReal(t *testing.T, hp, set string) (*target, aslite.Config) {
	real := &target{name: "asd", client: dial(t, hp), ns: "chf", set: set}
	nsup := field(info(real, "namespace/chf"), "nsup-period", ';')
	t.Logf("real server %s: %s, nsup-period %s", hp, info(real, "build"), nsup)
	return real, aslite.Config{ForbidTTL: nsup == "0"}
}

func TestABMCommands(t *testing.T) {
	t0 := time.Now()
	hp, named := startASD(t, 0)
	t.Logf("real server %s (named by %s: %v) ready in %v", hp, EnvServer, named, time.Since(t0))
	set := setName("diff")
	real, cfg := connectReal(t, hp, set)
	lite := &target{name: "aslite", client: dial(t, startAslite(t, cfg)), ns: "chf", set: set}
	t1 := time.Now()
	compare(t, real, lite, append(abmSteps(), ttlSteps()...), known)
	t.Logf("compared in %v", time.Since(t1))
}

// TestTTLForbidden: with nsup-period 0 asd refuses writes that set a TTL
// (FAIL_FORBIDDEN); aslite with ForbidTTL answers the same.
func TestTTLForbidden(t *testing.T) {
	if os.Getenv(EnvServer) != "" {
		t.Skipf("%s names a server whose nsup-period TestABMCommands follows", EnvServer)
	}
	hp, _ := startASD(t, -1)
	set := setName("ttl")
	real, cfg := connectReal(t, hp, set)
	if !cfg.ForbidTTL {
		t.Fatalf("asd started with nsup-period -1 does not report nsup-period 0")
	}
	lite := &target{name: "aslite", client: dial(t, startAslite(t, cfg)), ns: "chf", set: set}
	compare(t, real, lite, ttlSteps(), known)
}
