package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cdr"
	"github.com/chf-testbed/testbed/cdr/cdrtest"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// TestCDRsReconcileWithDebits runs the random mix (creates, updates,
// releases, SMS events, retransmissions) against `chf local --cdr-dir`,
// stops it cleanly, decodes every CDR file with the independent decoder
// (encoding/asn1, cdr/cdrtest) and checks: the records' charged totals
// per subscriber equal the debits (initial − final balance) exactly,
// localRecordSequenceNumber runs 1..N with no gap or repeat, and every
// session has exactly one final record (normalRelease), after its
// partial ones.
func TestCDRsReconcileWithDebits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary")
	}
	const n = 8
	dir := t.TempDir()
	// Small files and at most 3 containers per record: rotation and
	// partial records (maxChangeCond) happen within the run.
	lr := startLocal(t, "--accounts", "8", "--nchf", "127.0.0.1:0", "--quiet", "--cdr-dir", dir,
		"--ocp-args", "--cdr-partial-containers 3 --cdr-file-size 4096 --cdr-node ocp-e2e")
	m := newMix(t, strings.TrimSuffix(lr.nchfURL, cgw.NchfBase), "imsi-001010000000001", n, 21)
	ini := m.snapshot(lr.balURL, n)
	m.run(n, 400)
	fin := m.snapshot(lr.balURL, n)
	if err := lr.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	lr.wait(t, 30*time.Second)
	if lr.waitErr != nil {
		t.Fatalf("chf local: %v\n%s", lr.waitErr, lr.stderr.String())
	}

	recs, err := cdrtest.DecodeDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	charged := map[string]int64{}
	finals := map[string]int{}
	var events, partials int
	for i, r := range recs {
		files[r.File] = true
		if r.LocalSequence != int64(i+1) {
			t.Fatalf("record %d (%s) has localRecordSequenceNumber %d: a record lost or repeated", i+1, r.File, r.LocalSequence)
		}
		if r.RecordType != cdr.RecordTypeCHF || r.Node != "ocp-e2e" || !r.HasCharged {
			t.Fatalf("record %d: %+v", i+1, r)
		}
		charged[r.SUPI] += r.Charged
		switch {
		case r.Session == "":
			events++
		case r.Cause == int64(cdr.CauseNormalRelease):
			finals[r.Session]++
		default:
			if finals[r.Session] > 0 {
				t.Fatalf("session %s: a partial record after its final one", r.Session)
			}
			partials++
		}
	}
	for s, c := range finals {
		if c != 1 {
			t.Fatalf("session %s has %d final records", s, c)
		}
	}
	for _, r := range recs {
		if r.Session != "" && finals[r.Session] != 1 {
			t.Fatalf("session %s has records but no final one (the mix releases every session)", r.Session)
		}
	}
	first, _ := scenario.ParseSUPI("imsi-001010000000001")
	var total int64
	for i := range n {
		s := first.String(i)
		debit := ini.Accounts[i].Balance - fin.Accounts[i].Balance
		if charged[s] != debit {
			t.Errorf("%s: CDRs charge %d, the balance went down by %d", s, charged[s], debit)
		}
		total += debit
		delete(charged, s)
	}
	if len(charged) != 0 {
		t.Errorf("records for unknown subscribers: %v", charged)
	}
	if total == 0 || events == 0 || partials == 0 || len(finals) == 0 || len(files) < 2 {
		t.Fatalf("run too thin to check: debited %d, %d records in %d files, %d events, %d partial, %d sessions",
			total, len(recs), len(files), events, partials, len(finals))
	}
	t.Logf("%d records in %d files: %d sessions, %d partial records, %d events; %d minor units debited and recorded",
		len(recs), len(files), len(finals), partials, events, total)
}
