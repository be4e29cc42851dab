package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// writeTrials writes n paired trial files per side: the candidate's CPU per
// transaction is cpuRatio times the baseline's, over a machine whose speed
// drifts by 10% from pair to pair (loadgen's CPU drifts with it).
func writeTrials(t *testing.T, dir string, n int, cpuRatio float64) (base, cand string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(1000*cpuRatio)))
	var bs, cs []string
	for i := range n {
		speed := 1 + 0.1*rng.NormFloat64()
		for _, side := range []string{"baseline", "candidate"} {
			r := &report.Result{SchemaVersion: report.SchemaVersion, TPS: 1000, SUTCPUUsTxn: 800 * speed * (1 + 0.01*rng.NormFloat64()),
				LoadgenUsTxn: 250 * speed * (1 + 0.01*rng.NormFloat64())}
			r.LatencyMs.P99 = 4 * (1 + 0.05*rng.NormFloat64())
			if side == "candidate" {
				r.SUTCPUUsTxn *= cpuRatio
			}
			p := filepath.Join(dir, fmt.Sprintf("%s-%d.json", side, i+1))
			if err := r.WriteJSON(p); err != nil {
				t.Fatal(err)
			}
			if side == "baseline" {
				bs = append(bs, p)
			} else {
				cs = append(cs, p)
			}
		}
	}
	return strings.Join(bs, ","), strings.Join(cs, ",")
}

// The gate decides from result files: a 15% CPU regression exits 4 and
// writes its Markdown and JSON; the same trials without it pass (paired:
// the drift cancels) and are unmeasurable unpaired; too few trials and
// unequal pairs are errors.
func TestGateFromFiles(t *testing.T) {
	dir := t.TempDir()
	base, cand := writeTrials(t, dir, 10, 1.15)
	md, js := filepath.Join(dir, "gate.md"), filepath.Join(dir, "gate.json")
	err := gateCmd([]string{"--baseline-files", base, "--candidate-files", cand, "--gate-md", md, "--json", js})
	var ge gateExit
	if !errors.As(err, &ge) || ge.code != exitRegression {
		t.Fatalf("15%% regression: err = %v, want exit %d", err, exitRegression)
	}
	b, err := os.ReadFile(md)
	if err != nil || !strings.Contains(string(b), "REGRESSION") || !strings.Contains(string(b), "sut_cpu_adj") {
		t.Fatalf("markdown: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(js); err != nil || !strings.Contains(string(b), `"verdict": "regression"`) {
		t.Fatalf("json: %v\n%s", err, b)
	}

	dir = t.TempDir()
	base, cand = writeTrials(t, dir, 10, 1)
	if err := gateCmd([]string{"--baseline-files", base, "--candidate-files", cand}); err != nil {
		t.Fatalf("no change: %v", err)
	}
	short := strings.Join(strings.Split(base, ",")[:5], ",")
	if err := gateCmd([]string{"--baseline-files", short, "--candidate-files", short}); err == nil || !strings.Contains(err.Error(), "too few") {
		t.Fatalf("5 pairs: err = %v, want too few trials", err)
	}
	if err := gateCmd([]string{"--baseline-files", short, "--candidate-files", cand}); err == nil {
		t.Fatal("5 baseline and 10 candidate files accepted as pairs")
	}
	// Unpaired, the 10% drift between pairs is noise no pairing cancels.
	err = gateCmd([]string{"--baseline-files", short, "--candidate-files", cand, "--unpaired"})
	if !errors.As(err, &ge) || ge.code != exitUnmeasurable {
		t.Fatalf("unpaired 5 and 10 trials of no change over a drifting machine: err = %v, want exit %d", err, exitUnmeasurable)
	}
}
