package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/testbed"
	"github.com/chf-testbed/testbed/tariff"
)

// buildBinaries returns loadgen and chf, each built once for the
// package's tests (loadgen with its version set, as loadgenBinary).
func buildBinaries(t *testing.T) (loadgen, chf string) {
	t.Helper()
	return loadgenBinary(t), chfBinary(t)
}

// TestLocalEndToEnd runs `loadgen local` briefly against the real CHF
// (separate processes), over Nchf and over Diameter Gy: each must finish
// with zero errors and a passing audit, and leave every report file
// behind.
func TestLocalEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the CHF")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests
	loadgen, chf := buildBinaries(t)
	if _, _, err := testbed.FindCHF(ctx, chf, nil); errors.Is(err, testbed.ErrNoCHF) {
		t.Fatalf("the chf binary cannot run chf local (it lacks a service subcommand): %v", err)
	}
	if out, err := exec.CommandContext(ctx, chf, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "chf ") {
		t.Fatalf("chf --version: %q, %v", out, err)
	}
	// The fault run and the interrupted one, whose bounds a busy host
	// strains, run alone first. The others (a few hundred TPS each, a
	// fraction of a core: they mostly wait) then run side by side, as
	// many at once as -parallel allows.
	t.Run("interrupt", func(t *testing.T) { localInterrupt(t, chf) })
	t.Run("faults", func(t *testing.T) { localFaults(t, ctx, loadgen, chf) })
	parallel := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t)
		})
	}
	// Nchf (h2c) and Diameter Gy, on the same binaries.
	for _, proto := range []string{"h2c", "gy"} {
		parallel(proto, func(t *testing.T) { localRun(t, ctx, loadgen, chf, proto) })
	}
	parallel("plans", func(t *testing.T) { localPlans(t, ctx, loadgen, chf) })
	parallel("tariff-change", func(t *testing.T) { localTariffChange(t, ctx, loadgen, chf) })
	parallel("operator-token", func(t *testing.T) { localOperatorToken(t, ctx, loadgen, chf) })
}

// localOperatorToken runs `loadgen local --operator-token-file`: the
// local CGW gets the same file, so it guards the balance inquiry with the
// token, and the run (its audit and its balance inquiries) passes; a CGW
// whose token the load generator lacks fails the run with an error
// naming --operator-token-file.
func localOperatorToken(t *testing.T, ctx context.Context, loadgen, chf string) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("local-operator-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(extra ...string) (*report.Result, []byte, error) {
		results := t.TempDir()
		args := append([]string{"local", "--chf", chf, "--duration", "1500ms", "--rate", "200", "--warmup", "0", "--ramp-up", "0",
			"--accounts", "1000", "--audit", "full", "--results", results, "--progress", "off"}, extra...)
		out, err := exec.CommandContext(ctx, loadgen, args...).CombinedOutput()
		files, _ := filepath.Glob(filepath.Join(results, "*", "result.json"))
		if len(files) != 1 {
			return nil, out, err
		}
		res, rerr := report.ReadJSON(files[0])
		if rerr != nil {
			t.Fatal(rerr)
		}
		return res, out, err
	}
	res, out, err := run("--operator-token-file", token)
	if err != nil || res == nil {
		t.Fatalf("loadgen local --operator-token-file: %v\n%s", err, out)
	}
	if a := res.Audit; !a.OK || a.Skipped || a.Checked == 0 || res.Errors != 0 {
		t.Fatalf("errors %d %v, audit %+v\n%s", res.Errors, res.ErrorClasses, a, out)
	}
	_, out, err = run("--cgw-args", "--operator-token-file "+token)
	if err == nil || !strings.Contains(string(out), "the CGW guards balances with its operator token") ||
		!strings.Contains(string(out), "--operator-token-file") {
		t.Fatalf("a CGW with a token the loadgen lacks: %v\n%s", err, out)
	}
}

// localTariffChange runs `loadgen local --tariff-change` with data at
// three times the price after 3 s of a 7 s load: the sessions open under
// the old tariff are re-authorised (REAUTHORIZATION received and
// answered), and the audit, rating each request on the tariff in force
// when it was sent (either from 2 s before the change to 3 s after it,
// so only the old one before 1 s and only the new one after 6 s),
// passes. A bad specification is a usage error. The two protocols' runs
// are parallel.
func localTariffChange(t *testing.T, ctx context.Context, loadgen, chf string) {
	dir := t.TempDir()
	newFile := filepath.Join(dir, "new.yaml")
	rates := slices.Clone(tariff.Default().RatingGroups)
	for i := range rates {
		if rates[i].RatingGroup == 10 { // data, 1 per MB
			rates[i].Price = 3
		}
	}
	body, err := (&tariff.Tariff{RatingGroups: rates}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newFile, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, loadgen, "local", "--chf", chf, "--tariff-change", "soon:"+newFile).CombinedOutput(); !isExit(err, 2) || !strings.Contains(string(out), "--tariff-change") {
		t.Fatalf("bad --tariff-change: %v\n%s", err, out)
	}
	for _, proto := range []string{"h2c", "gy"} { // Gy: RAR, answered with a CCR-U
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			localTariffChangeRun(t, ctx, loadgen, chf, proto, newFile)
		})
	}
}

func localTariffChangeRun(t *testing.T, ctx context.Context, loadgen, chf, proto, tariff string) {
	results := t.TempDir()
	cmd := exec.CommandContext(ctx, loadgen, "local", "--chf", chf, "--duration", "6s", "--rate", "300",
		"--warmup", "500ms", "--ramp-up", "500ms", "--accounts", "2000", "--results", results, "--progress", "plain",
		"--proto", proto, "--abm-args", "--reservation-sweep 1s", "--tariff-change", "3s:"+tariff)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("loadgen local --tariff-change: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(results, "*", "result.json"))
	if len(files) != 1 {
		t.Fatalf("result files %v\n%s", files, out)
	}
	res, err := report.ReadJSON(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.Notifications == nil {
		t.Fatalf("no notifications\n%s", out)
	}
	n := res.Notifications.ByType["reauthorization"]
	if n.Received == 0 || n.Answered == 0 || n.Failed != 0 {
		t.Fatalf("re-authorisations %+v\n%s", n, out)
	}
	if a := res.Audit; a.Skipped || a.Checked == 0 || a.Mismatches != 0 || a.Reserved != 0 {
		t.Fatalf("audit %+v\n%s", a, out)
	}
}

// isExit reports whether err is an exit with code.
func isExit(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

// localFaults runs `loadgen local` with two ocp replicas and a durable
// aslite (commit sync), kills one ocp, then kills aslite itself (kill -9,
// restarted) and later stops it (SIGSTOP, then SIGCONT), and checks what
// must hold: each fault injected and undone, load served again at the
// end, and every cent accounted for — a request that failed mid-fault is
// retried with its identity (the CGW on another OCP, the loadgen as an
// SMF does) until the CHF answers it, with the first answer's charge when
// it had landed, so the audit reconciles exactly: no mismatch, nothing
// unresolved, none negative, none unreadable, every reservation of a cut
// session gone by its expiry.
func localFaults(t *testing.T, ctx context.Context, loadgen, chf string) {
	res, out, _ := runLocal(t, ctx, loadgen, chf, "--duration", "9s", "--rate", "300",
		"--replicas", "ocp=2", "--aslite-data-dir", t.TempDir(), "--aslite-commit", "sync", "--fault-validity", "2s",
		// the store is out longer than a request may take; errors during
		// the faults may fail the default error threshold (exit 6); the
		// SMF's retries must outlast the outages even on a slow host
		// (with the default 4, a slow hour left requests in doubt)
		"--retry-errors", "8", "--timeout", "1s", "--fault", "kill:ocp:1s:1s", "--fault", "kill:aslite:3s:1500ms", "--fault", "stop:aslite:6s:1500ms")
	if len(res.Faults) != 3 {
		t.Fatalf("faults %+v\n%s", res.Faults, out)
	}
	for _, f := range res.Faults {
		if f.Error != "" || f.RestoredS <= f.AtS || f.Instance == "" {
			t.Errorf("fault %+v\n%s", f, out)
		}
	}
	a := res.Audit
	if !a.OK || a.Skipped || a.Checked == 0 || a.Negative != 0 || a.Unreadable != 0 || a.Reserved != 0 ||
		a.Debited != a.Charged || a.Mismatches != 0 || a.Unresolved != 0 {
		t.Errorf("audit %+v\n%s", a, out)
	}
	if res.Retried == 0 || res.RetryResolved == 0 {
		t.Errorf("retried %d, resolved by a retry %d: the faults made no request fail?\n%s", res.Retried, res.RetryResolved, out)
	}
	if n := len(res.Series); n < 2 || res.Series[n-2].Completed == 0 {
		t.Errorf("nothing completed at the end of the window: %+v", res.Series)
	}
	if !strings.Contains(string(out), "faults (audit below") {
		t.Errorf("summary does not show the faults:\n%s", out)
	}
}

// localPlans runs `loadgen sweep --local` and `loadgen gate` (trials on
// local CHFs) over a scenario with postpaid and bucket shares: both
// provision the plans as `loadgen local` does (testbed.ShardPlans: each
// sweep step's slice of the range gets the shares), so every audit, which
// models the plans, reconciles exactly and counts bucket units consumed;
// without the plans the buckets would be missing and the debits off.
func localPlans(t *testing.T, ctx context.Context, loadgen, chf string) {
	dir := t.TempDir()
	sc := filepath.Join(dir, "plans.yaml")
	if err := os.WriteFile(sc, []byte("accounts: {postpaid: 0.3, credit_limit: 100000, postpaid_balance: 50, buckets: 0.3, bucket_plan: [\"voice:600\", \"sms:5\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(what string, res *report.Result, out []byte) {
		t.Helper()
		a := res.Audit
		if !a.OK || !a.Independent || a.ExpectedMismatches != 0 || a.BucketValue == 0 || res.Errors != 0 {
			t.Errorf("%s: errors %d %v, audit %+v\n%s", what, res.Errors, res.ErrorClasses, a, out)
		}
		if len(res.Hops) == 0 { // the sweep's steps and the gate's runs scrape their local CHF too
			t.Errorf("%s: no hops (note %q)", what, res.HopsNote)
		}
	}
	out := filepath.Join(dir, "sweep")
	cmd := exec.CommandContext(ctx, loadgen, "sweep", "--local", "--chf", chf, "--scenario", sc, "--start", "200", "--step", "100", "--max", "300",
		"--duration", "1500ms", "--warmup", "0", "--ramp-up", "0", "--accounts", "4000", "--slo-p99", "1s", "--out", out, "--progress", "off")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("loadgen sweep: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(filepath.Join(out, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sw struct {
		Steps []struct {
			Reason string         `json:"reason"`
			Result *report.Result `json:"result"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(raw, &sw); err != nil || len(sw.Steps) == 0 {
		t.Fatalf("sweep.json: %v, %d steps", err, len(sw.Steps))
	}
	for i, st := range sw.Steps {
		// (a loaded machine may end the sweep at its first step: the
		// SLO is not what is checked here)
		t.Logf("sweep step %d: %.0f TPS, SLO missed: %q", i, st.Result.TPS, st.Reason)
		check(fmt.Sprintf("sweep step %d", i), st.Result, b)
	}
	gout := filepath.Join(dir, "gate")
	cmd = exec.CommandContext(ctx, loadgen, "gate", "--baseline-chf", chf, "--candidate-chf", chf, "--trials", "1", "--scenario", sc,
		"--rate", "200", "--duration", "1500ms", "--warmup", "0", "--ramp-up", "0", "--accounts", "2000", "--out", gout, "--progress", "off")
	b, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) { // one pair decides nothing: the verdict's exit code is not checked
		t.Fatalf("loadgen gate: %v\n%s", err, b)
	}
	for _, f := range []string{filepath.Join(gout, "baseline-1.json"), filepath.Join(gout, "candidate-1.json")} {
		res, err := report.ReadJSON(f)
		if err != nil {
			t.Fatal(err)
		}
		check(filepath.Base(f), res, b)
	}
}

// localInterrupt sends SIGINT to `loadgen local` mid-run: exit 130, the
// report written and marked interrupted, and no CHF process left.
func localInterrupt(t *testing.T, chf string) {
	results := t.TempDir()
	code, took, out, errs := interruptRun(t, []string{"local", "--chf", chf, "--duration", "60s", "--rate", "300", "--warmup", "0", "--ramp-up", "0",
		"--accounts", "2000", "--results", results, "--progress", "plain"}, " offered ", syscall.SIGINT, 0)
	if code != exitSIGINT || took > 15*time.Second {
		t.Fatalf("exit %d after %s, want 130\nstdout:\n%s\nstderr:\n%s", code, took, out, errs)
	}
	dirs, _ := filepath.Glob(filepath.Join(results, "*", "result.json"))
	if len(dirs) != 1 {
		t.Fatalf("result files %v\n%s", dirs, errs)
	}
	res, err := report.ReadJSON(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Provenance.CHFVersion == "" || !strings.Contains(out, "INTERRUPTED by SIGINT") {
		t.Fatalf("interrupted %v, chf version %q\n%s", res.Interrupted, res.Provenance.CHFVersion, out)
	}
	m := regexp.MustCompile(`pids="?map\[([^\]]*)\]`).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no pids logged:\n%s", errs)
	}
	for _, kv := range strings.Fields(m[1]) {
		_, pid, _ := strings.Cut(kv, ":")
		if b, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("CHF process %s still running after loadgen exited: %s", kv, b)
		}
	}
}

// localRun runs `loadgen local --proto proto` for two seconds and checks
// the outcome. Over Gy the services run the lab runtime profile, over
// h2c the default, production: the services' own log (chf.log) and the
// report's provenance say which ran.
func localRun(t *testing.T, ctx context.Context, loadgen, chf, proto string) {
	results := t.TempDir()
	args := []string{"local", "--chf", chf, "--proto", proto, "--duration", "2s", "--rate", "300",
		"--warmup", "500ms", "--ramp-up", "500ms", "--accounts", "2000", "--results", results, "--progress", "plain"}
	profile := "production"
	if proto == "gy" {
		profile = "lab"
		args = append(args, "--runtime-profile", profile)
	}
	cmd := exec.CommandContext(ctx, loadgen, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("loadgen local: %v\n%s", err, out)
	}
	dirs, _ := filepath.Glob(filepath.Join(results, "*"))
	if len(dirs) != 1 {
		t.Fatalf("want one results directory, got %v\n%s", dirs, out)
	}
	for _, f := range []string{"result.json", "series.csv", "report.md", "report.html", "chf.log"} {
		if _, err := os.Stat(filepath.Join(dirs[0], f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	res, err := report.ReadJSON(filepath.Join(dirs[0], "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Proto != proto || res.Errors != 0 || res.Transactions == 0 || !res.Audit.OK || res.Audit.Charged == 0 {
		t.Fatalf("%s: %d transactions, %d errors %v, audit %+v\n%s", res.Proto, res.Transactions, res.Errors, res.ErrorClasses, res.Audit, out)
	}
	for _, c := range []string{"cgw", "ocp", "abm", "aslite", report.LoadgenComponent} {
		if _, ok := res.CPUPercent[c]; !ok {
			t.Errorf("no CPU figure for %s: %v", c, res.CPUPercent)
		}
	}
	if !strings.Contains(string(out), "audit PASS") {
		t.Errorf("summary does not show the audit:\n%s", out)
	}
	if res.Provenance.RuntimeProfile != profile || !strings.Contains(string(out), "chf runtime profile "+profile+"\n") {
		t.Errorf("provenance runtime_profile %q, want %q; summary:\n%s", res.Provenance.RuntimeProfile, profile, out)
	}
	localRuntimeProfile(t, filepath.Join(dirs[0], "chf.log"), profile)
	// The hops, from the services' own histograms: the front's requests
	// (Nchf or Gy) and its calls to the OCP, and the ABM's Aerospike
	// commands, each counted in the window.
	hops := map[string]int64{}
	for _, h := range res.Hops {
		hops[h.Service+" "+h.Hop] = h.Count
	}
	front := "cgw request"
	if proto == "gy" {
		front = "cgw Gy request"
	}
	for _, h := range []string{front, "cgw call → ocp", "ocp serving", "abm aerospike command"} {
		if hops[h] <= 0 {
			t.Errorf("no %q hop in %+v (note %q)", h, res.Hops, res.HopsNote)
		}
	}
	if hops[front] < res.Transactions/2 {
		t.Errorf("%s hop counted %d of %d transactions", front, hops[front], res.Transactions)
	}
	if !strings.Contains(string(out), "hops (the services' histograms") {
		t.Errorf("summary does not show the hops:\n%s", out)
	}
}

// localRuntimeProfile checks in the services' log that each of the four
// processes ran the runtime profile: under lab every one says SCHED_BATCH
// and runs with sysmon's GODEBUG (it re-executed itself), under
// production none.
func localRuntimeProfile(t *testing.T, chfLog, profile string) {
	t.Helper()
	b, err := os.ReadFile(chfLog)
	if err != nil {
		t.Fatal(err)
	}
	lab := profile == "lab"
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "msg=\"go runtime\"") {
			continue
		}
		n++
		if !strings.Contains(line, "runtime_profile="+profile) || strings.Contains(line, "sched_batch=true") != lab ||
			strings.Contains(line, "schedtrace=2147483647") != lab {
			t.Errorf("a service under --runtime-profile %s logged: %s", profile, line)
		}
	}
	if n != 4 { // aslite, abm, ocp, cgw
		t.Errorf("%d services logged their runtime, want 4:\n%s", n, b)
	}
}
