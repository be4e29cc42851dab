package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/report"
)

func TestPairOrders(t *testing.T) {
	seen := map[bool]int{}
	for seed := uint64(1); seed <= 50; seed++ {
		o := PairOrders(13, seed)
		if len(o) != 13 {
			t.Fatalf("%d orders for 13 pairs", len(o))
		}
		for i := 0; i+1 < len(o); i += 2 {
			if o[i] == o[i+1] {
				t.Fatalf("seed %d: pairs %d and %d run in the same order", seed, i+1, i+2)
			}
		}
		seen[o[0]]++
		if fmt.Sprint(o) != fmt.Sprint(PairOrders(13, seed)) {
			t.Fatalf("seed %d: orders differ between calls", seed)
		}
	}
	if seen[true] < 10 || seen[false] < 10 {
		t.Fatalf("first pair's order over 50 seeds: %v, want both often", seen)
	}
}

// RunTrials runs the sides in PairOrders' order, keeps every trial's
// file, returns each side's results in pair order, and stops at a trial
// without a result.
func TestRunTrials(t *testing.T) {
	dir := t.TempDir()
	var ran []string
	side := func(name string, tps float64) Side {
		return Side{Name: name, Trial: func(_ context.Context, pair int) (*report.Result, error) {
			ran = append(ran, name)
			return &report.Result{SchemaVersion: report.SchemaVersion, TPS: tps + float64(pair)}, nil
		}}
	}
	base, cand, err := RunTrials(context.Background(), Trials{Pairs: 4, Seed: 3, Baseline: side("baseline", 100), Candidate: side("candidate", 200), OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	orders := PairOrders(4, 3)
	for i, candFirst := range orders {
		want := [2]string{"baseline", "candidate"}
		if candFirst {
			want = [2]string{"candidate", "baseline"}
		}
		if got := [2]string{ran[2*i], ran[2*i+1]}; got != want {
			t.Fatalf("pair %d ran %v, want %v", i+1, got, want)
		}
		if base[i].TPS != 101+float64(i) || cand[i].TPS != 201+float64(i) {
			t.Fatalf("pair %d: results %v %v out of order", i+1, base[i].TPS, cand[i].TPS)
		}
		for _, s := range []string{"baseline", "candidate"} {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%s-%d.json", s, i+1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	boom := errors.New("boom")
	failing := Side{Name: "candidate", Trial: func(context.Context, int) (*report.Result, error) { return nil, boom }}
	if _, _, err := RunTrials(context.Background(), Trials{Pairs: 2, Baseline: side("baseline", 1), Candidate: failing}); !errors.Is(err, boom) {
		t.Fatalf("failing trial: err = %v", err)
	}
}
