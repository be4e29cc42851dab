package audit

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cdr"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// writeCDRs writes recs as one OCP's CDR files into dir.
func writeCDRs(t *testing.T, dir string, recs []cdr.Record) {
	t.Helper()
	w, err := cdr.NewWriter(cdr.WriterConfig{Dir: dir, Prefix: "ocp", MaxSize: 1 << 20, MaxAge: time.Hour, Fsync: cdr.FsyncNone})
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckCDR: the CDR charges, after the collector rule, per
// subscriber against the debits: a replay record whose request another
// OCP recorded is dropped, one whose request no record holds counts; a
// missing record (planted: left out) fails the check naming the
// subscriber and both amounts.
func TestCheckCDR(t *testing.T) {
	first, err := scenario.ParseSUPI("imsi-001010000000001")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	use := func(seq uint32) []cdr.Usage {
		return []cdr.Usage{{RatingGroup: 10, Service: chf.ServiceData, Units: 1_000_000, Seq: seq, At: at}}
	}
	sess := func(supi, s string, charged int64, seqs ...uint32) cdr.Record {
		r := cdr.Record{Node: "ocp", SUPI: supi, Consumer: cdr.FunctionalitySMF, Session: s, Opened: at, Sequence: 1, Charged: charged}
		for _, q := range seqs {
			r.Usage = append(r.Usage, use(q)...)
		}
		return r
	}
	replay := func(supi, s string, charged int64, seq uint32) cdr.Record {
		r := sess(supi, s, charged, seq)
		r.Sequence, r.Replay, r.ReplaySeq = 0, true, seq
		return r
	}
	s1, s2 := first.String(0), first.String(1)
	ocp1 := []cdr.Record{sess(s1, "a", 5, 1, 2), sess(s2, "b", 7, 1, 2)}
	ocp2 := []cdr.Record{
		replay(s1, "a", 3, 2), // OCP 1 recorded it: dropped
		replay(s2, "b", 4, 3), // in no other record: counts
		replay(s2, "b", 4, 3), // and once only
	}
	dir := t.TempDir()
	writeCDRs(t, filepath.Join(dir, "ocp-1"), ocp1)
	writeCDRs(t, filepath.Join(dir, "ocp-2"), ocp2)
	debits := []Debit{{0, 5}, {1, 11}, {2, 0}}
	r := CheckCDR(dir, first, debits)
	if !r.OK || r.Records != 5 || r.Replays != 3 || r.Duplicates != 2 || r.Charged != 16 || r.Debited != 16 || r.Subscribers != 3 {
		t.Fatalf("check %+v", r)
	}
	var a Result
	a.OK = true
	a.AddCDR(r)
	if !a.OK || a.CDR == nil {
		t.Fatalf("audit with a passing CDR check: %+v", a)
	}

	// Planted: OCP 2's replay record of b/3 missing.
	dir = t.TempDir()
	writeCDRs(t, filepath.Join(dir, "ocp-1"), ocp1)
	writeCDRs(t, filepath.Join(dir, "ocp-2"), ocp2[:1])
	r = CheckCDR(dir, first, debits)
	if r.OK || r.Mismatches != 1 || len(r.Examples) != 1 || !strings.Contains(r.Examples[0], s2+": CDRs charge 7, the balance went down by 11") {
		t.Fatalf("check with a missing record %+v", r)
	}
	a = Result{OK: true}
	a.AddCDR(r)
	if a.OK || !strings.Contains(a.Reason, "CDR check: 1 subscribers") {
		t.Fatalf("audit with a failing CDR check: %+v", a)
	}

	// Records for a subscriber the audit saw no debit of; output bounded.
	dir = t.TempDir()
	var many []cdr.Record
	for i := range 15 {
		many = append(many, sess(first.String(10+i), "x", 1, 1))
	}
	writeCDRs(t, dir, many)
	if r = CheckCDR(dir, first, nil); r.OK || r.Mismatches != 15 || len(r.Examples) != 11 || !strings.Contains(r.Examples[10], "5 more") {
		t.Fatalf("check of unknown subscribers %+v", r)
	}
	// No files to read fails the check.
	if r = CheckCDR(filepath.Join(dir, "missing"), first, nil); r.OK || !strings.Contains(r.Reason, "cannot read") {
		t.Fatalf("check of a missing directory %+v", r)
	}
}
