package e2e

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cdr"
	"github.com/chf-testbed/testbed/cdr/cdrtest"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
	"github.com/chf-testbed/testbed/loadgen/report"
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
		if r.Replay {
			t.Fatalf("record %d is a replay record, with one OCP and no answer lost: %+v", i+1, r)
		}
		charged[r.SUPI] += r.Charged
		switch {
		case r.Functionality == int(cdr.FunctionalitySMSF):
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
		if r.Functionality == int(cdr.FunctionalitySMF) && finals[r.Session] != 1 {
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

// TestCDRsReconcileOnGy is the same check over Diameter Gy: sessions
// (CCR-I, CCR-U, CCR-T, some retransmitted) and direct-debit events
// through `chf local --diameter --cdr-dir`.
func TestCDRsReconcileOnGy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary")
	}
	const n = 4
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	lr := startLocal(t, "--accounts", "4", "--nchf", "127.0.0.1:0", "--diameter", addr, "--quiet", "--cdr-dir", dir)
	m := newMix(t, strings.TrimSuffix(lr.nchfURL, cgw.NchfBase), first, n, 1)
	ini := m.snapshot(lr.balURL, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := gy.DialConfig(ctx, gy.Config{Addr: addr, OriginHost: "pgw.e2e.test", OriginRealm: "e2e.test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sessions := 0
	for i := range 24 {
		imsi := imsiOf(i % n)
		if i%4 == 3 {
			ev := &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi, Action: gy.DirectDebiting, HasAction: true,
				Services: []gy.Service{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: uint64(1 + i%3)}}}}
			a := gyDo(t, c, ev, wire.ResultSuccess)
			ev.Retransmit, ev.EndToEnd = true, a.EndToEnd
			gyDo(t, c, ev, wire.ResultSuccess)
			continue
		}
		sid := c.NewSessionID()
		sessions++
		gyDo(t, c, &gy.Request{SessionID: sid, Type: gy.Initial, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultSuccess)
		for k := uint32(1); k <= uint32(1+i%3); k++ {
			upd := &gy.Request{SessionID: sid, Type: gy.Update, Number: k, IMSI: imsi,
				Services: []gy.Service{{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: uint64(1_500_000 * (i + 1))}}}}
			gyDo(t, c, upd, wire.ResultSuccess)
			if i%2 == 0 {
				gyDo(t, c, upd, wire.ResultSuccess) // a repeat: charged once
			}
		}
		gyDo(t, c, &gy.Request{SessionID: sid, Type: gy.Termination, Number: uint32(2 + i%3), IMSI: imsi,
			Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{UplinkVolume: 700_000, DownlinkVolume: 2_000_000}}}}, wire.ResultSuccess)
	}
	fin := m.snapshot(lr.balURL, n)
	if err := lr.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	lr.wait(t, 30*time.Second)
	recs, err := cdrtest.DecodeDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	charged := map[string]int64{}
	finals, events := 0, 0
	for i, r := range recs {
		if r.LocalSequence != int64(i+1) {
			t.Fatalf("record %d has localRecordSequenceNumber %d", i+1, r.LocalSequence)
		}
		if r.Replay {
			t.Fatalf("record %d is a replay record, with one OCP and no answer lost: %+v", i+1, r)
		}
		charged[r.SUPI] += r.Charged
		switch {
		case r.Functionality == int(cdr.FunctionalitySMSF):
			events++
		case r.Cause == int64(cdr.CauseNormalRelease):
			finals++
		}
	}
	if finals != sessions || events != 6 || len(recs) != sessions+6 {
		t.Fatalf("%d records: %d final for %d sessions, %d events (want 6)", len(recs), finals, sessions, events)
	}
	for i := range n {
		if debit := ini.Accounts[i].Balance - fin.Accounts[i].Balance; charged[supi(i)] != debit || debit == 0 {
			t.Errorf("%s: CDRs charge %d, the balance went down by %d", supi(i), charged[supi(i)], debit)
		}
	}
}

// TestLoadgenLocalCDRCheck runs `loadgen local --cdr-dir` at a low rate
// against the real CHF: the audit's CDR check must pass (every debit in
// the records once, per subscriber). Then against a CHF built with the
// audit_cdrdrop tag, whose recorder loses one charged record: the check
// must fail, naming the subscriber with both amounts, and fail the run.
func TestLoadgenLocalCDRCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs loadgen and the chf binary")
	}
	loadgen := filepath.Join(t.TempDir(), "loadgen")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", loadgen, "github.com/chf-testbed/testbed/cmd/loadgen").CombinedOutput(); err != nil {
		t.Fatalf("cannot build cmd/loadgen: %v\n%s", err, out)
	}
	dropping := buildCHFTags(t, "audit_cdrdrop")
	for _, tc := range []struct {
		name string
		chf  string
		ok   bool
	}{{"real", buildCHF(t), true}, {"audit_cdrdrop", dropping, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // 100 TPS each, on its own CHF
			dir := t.TempDir()
			cmd := exec.CommandContext(ctx, loadgen, "local", "--chf", tc.chf, "--duration", "3s", "--rate", "100",
				"--warmup", "500ms", "--ramp-up", "500ms", "--accounts", "200", "--results", filepath.Join(dir, "results"),
				"--progress", "off", "--cdr-dir", filepath.Join(dir, "cdrs"))
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ok {
				t.Fatalf("loadgen local --cdr-dir: %v\n%s", err, out)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "results", "*", "result.json"))
			if len(files) != 1 {
				t.Fatalf("result files %v\n%s", files, out)
			}
			res, err := report.ReadJSON(files[0])
			if err != nil {
				t.Fatal(err)
			}
			c := res.Audit.CDR
			if c == nil || c.Records == 0 || c.Subscribers == 0 || c.Debited == 0 {
				t.Fatalf("CDR check %+v\n%s", c, out)
			}
			if tc.ok {
				if !c.OK || c.Charged != c.Debited || !res.Audit.OK || !strings.Contains(string(out), "audit, CDRs PASS") {
					t.Fatalf("CDR check %+v, audit %+v\n%s", c, res.Audit, out)
				}
				return
			}
			if c.OK || c.Mismatches != 1 || len(c.Examples) != 1 || !strings.Contains(c.Examples[0], "the balance went down by") ||
				res.Audit.OK || !strings.Contains(res.Audit.Reason, "CDR check") || !strings.Contains(string(out), "audit, CDRs FAIL") {
				t.Fatalf("CDR check of the dropping CHF %+v, audit %+v\n%s", c, res.Audit, out)
			}
		})
	}
}
