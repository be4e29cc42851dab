package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/bench"
)

// A bad bench flag is a usage error naming it, before anything starts.
func TestBenchFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--rounds", "0"}, "--rounds"},
		{[]string{"--rate", "-1"}, "--rate"},
		{[]string{"--duration", "10ms"}, "--duration"},
		{[]string{"--sweep-max", "500"}, "--sweep-max"},
		{[]string{"--sweep-step", "0"}, "--sweep-step"},
		{[]string{"--sweep-duration", "2h"}, "--sweep-duration"},
		{[]string{"--sweep-retries", "9"}, "--sweep-retries"},
		{[]string{"--hops", "0"}, "--hops"},
		{[]string{"--runtime-profile", "fast"}, "-runtime-profile"},
		{[]string{"--accounts", "0"}, "--accounts"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--bogus"}, "-bogus"},
	} {
		dir := t.TempDir()
		code, _, errs := runBinary(t, append([]string{"bench", "--out", filepath.Join(dir, "out")}, c.args...)...)
		if code != exitUsage || !strings.Contains(errs, c.flag) {
			t.Errorf("bench %v: exit %d, want 2 naming %s:\n%s", c.args, code, c.flag, errs)
		}
		if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
			t.Errorf("bench %v: created its output directory before refusing the flag", c.args)
		}
	}
}

// TestBenchEndToEnd runs `loadgen bench` briefly on the real CHF (a
// second per phase, the sweep to 1,000 TPS): every phase runs, bench.json
// holds every ratio with a verdict, the table is printed; a SIGINT during
// a round stops it with 130 and still writes bench.json. The figures are
// not checked: a few seconds on a shared machine decide nothing.
func TestBenchEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the CHF")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	loadgen, chf := buildBinaries(t)
	out := filepath.Join(t.TempDir(), "bench")
	h2load := "" // the comparison runs when h2load is installed
	if p, err := exec.LookPath("h2load"); err == nil {
		h2load = p
	}
	args := []string{"bench", "--chf", chf, "--rounds", "1", "--rate", "500", "--duration", "1s", "--warmup", "0", "--ramp-up", "0",
		"--sweep-start", "500", "--sweep-step", "500", "--sweep-max", "1000", "--sweep-duration", "1s", "--sweep-retries", "0",
		"--accounts", "4000", "--h2load", h2load, "--out", out}
	b, err := exec.CommandContext(ctx, loadgen, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("loadgen bench: %v\n%s", err, b)
	}
	r := readBench(t, filepath.Join(out, "bench.json"))
	if len(r.Input.Rounds) != 1 || r.Input.Rounds[0].Floor == nil || r.Input.Rounds[0].CHF == nil {
		t.Fatalf("round: %+v\n%s", r.Input.Rounds, b)
	}
	if len(r.Input.Sweep.Steps) == 0 || r.Provenance.RuntimeProfile != "production" || r.Provenance.LoadgenVersion == "" {
		t.Errorf("sweep steps %d, provenance %+v", len(r.Input.Sweep.Steps), r.Provenance)
	}
	if h2load == "" && !strings.Contains(r.Input.H2load.Note, "skipped") {
		t.Errorf("without h2load: note %q", r.Input.H2load.Note)
	}
	for _, x := range r.Ratios {
		t.Logf("%s: %v %s %s", x.Name, x.PerRound, x.Verdict, x.Reason)
		if x.Verdict == "" || (x.Verdict == bench.Unmeasurable) != (x.Median == nil) {
			t.Errorf("%s: verdict %q, median %v", x.Name, x.Verdict, x.Median)
		}
	}
	if len(r.Ratios) != 6 || !strings.Contains(string(b), "| chf_over_floor |") {
		t.Errorf("%d ratios; output:\n%s", len(r.Ratios), b)
	}
	if _, err := os.Stat(filepath.Join(out, "bench.md")); err != nil {
		t.Error(err)
	}

	// Interrupted in the first round's CHF run: exit 130, the CHF
	// stopped, bench.json written and marked. (The floor before it runs
	// --duration too; the SIGINT, sent as the CHF starts, has the CHF's
	// start and its 4 s to land in.)
	out = filepath.Join(t.TempDir(), "bench")
	args = []string{"bench", "--chf", chf, "--rounds", "2", "--rate", "300", "--duration", "4s", "--warmup", "0", "--ramp-up", "0",
		"--accounts", "2000", "--h2load", "", "--out", out}
	code, _, stdout, errs := interruptRun(t, args, "the CHF at", syscall.SIGINT, 0)
	if code != exitSIGINT {
		t.Fatalf("interrupted: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitSIGINT, stdout, errs)
	}
	r = readBench(t, filepath.Join(out, "bench.json"))
	if r.Input.Interrupt != "SIGINT" || len(r.Input.Rounds) != 1 || !strings.Contains(stdout, "Interrupted by SIGINT") {
		t.Errorf("interrupted: %q, %d rounds\n%s", r.Input.Interrupt, len(r.Input.Rounds), stdout)
	}
}

func readBench(t *testing.T, path string) *bench.Report {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}
