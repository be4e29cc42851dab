package gate

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// Side is one side of a gate run: its name ("baseline", "candidate") and
// how to run one of its trials (pair counts from 1).
type Side struct {
	Name  string
	Trial func(ctx context.Context, pair int) (*report.Result, error)
}

// Trials configures RunTrials.
type Trials struct {
	Pairs               int
	Seed                uint64 // of the order of the pairs (PairOrders)
	Baseline, Candidate Side
	// OutDir keeps every trial's result as <side>-<pair>.json.
	OutDir string
	// Out receives a line per trial and per pair (default io.Discard).
	Out io.Writer
}

// RunTrials runs t.Pairs pairs of trials, one of each side back to back,
// in the orders of PairOrders, and returns the results of each side in
// pair order. A trial that returns no result ends the run with its
// error; one that returns a result with an error (a failed audit) counts.
func RunTrials(ctx context.Context, t Trials) (base, cand []*report.Result, err error) {
	if t.Pairs < 1 {
		return nil, nil, fmt.Errorf("gate: need at least one pair of trials, got %d", t.Pairs)
	}
	out := t.Out
	if out == nil {
		out = io.Discard
	}
	type side struct {
		Side
		res *[]*report.Result
	}
	a, b := side{t.Baseline, &base}, side{t.Candidate, &cand}
	started := time.Now()
	orders := PairOrders(t.Pairs, t.Seed)
	fmt.Fprintf(out, "gate: %d pairs, order seed %d\n", t.Pairs, t.Seed)
	for i := 1; i <= t.Pairs; i++ {
		order := []side{a, b}
		if orders[i-1] {
			order = []side{b, a}
		}
		for _, s := range order {
			if err := ctx.Err(); err != nil {
				return base, cand, err
			}
			res, err := s.Trial(ctx, i)
			if res == nil {
				return base, cand, fmt.Errorf("cannot run %s trial %d: %w", s.Name, i, err)
			}
			if t.OutDir != "" {
				if err := res.WriteJSON(filepath.Join(t.OutDir, fmt.Sprintf("%s-%d.json", s.Name, i))); err != nil {
					return base, cand, err
				}
			}
			fmt.Fprintf(out, "pair %2d %-9s %6.0f TPS  p99 %7.3f ms  SUT %6.1f µs/txn  loadgen %5.1f µs/txn  errors %d  audit ok=%v\n",
				i, s.Name, res.TPS, res.LatencyMs.P99, res.SUTCPUUsTxn, res.LoadgenUsTxn, res.Errors, res.Audit.OK)
			*s.res = append(*s.res, res)
			if res.Interrupted {
				return base, cand, context.Canceled
			}
		}
		rb, rc := base[i-1], cand[i-1]
		fmt.Fprintf(out, "pair %2d ratios: SUT CPU %.3f (adjusted %.3f)  p99 %.3f  TPS %.3f  [%s elapsed]\n", i,
			rc.SUTCPUUsTxn/rb.SUTCPUUsTxn, (rc.SUTCPUUsTxn/rc.LoadgenUsTxn)/(rb.SUTCPUUsTxn/rb.LoadgenUsTxn),
			rc.LatencyMs.P99/rb.LatencyMs.P99, rc.TPS/rb.TPS, time.Since(started).Round(time.Second))
	}
	return base, cand, nil
}

// PairOrders returns, for n pairs, whether each runs the candidate first:
// in every block of two pairs one runs A B and the other B A, which of the
// two at random (seed). Balanced, a drift of the machine over the run or an
// effect of running second falls on both sides alike; random, no periodic
// pattern of other work on the machine can line up with one side (and the
// signed-rank interval's assumption, that each pair's sign is as likely
// either way under no change, holds by design).
func PairOrders(n int, seed uint64) []bool {
	rng := rand.New(rand.NewPCG(seed, 0x6a09e667f3bcc909))
	out := make([]bool, n)
	for i := 0; i < n; i += 2 {
		first := rng.IntN(2) == 1
		out[i] = first
		if i+1 < n {
			out[i+1] = !first
		}
	}
	return out
}

// Series extracts the standard metrics (TPS, P99, SUTCPUTxn, SUTCPUAdj)
// from the trial results of both sides, for Evaluate. The adjusted CPU
// uses the median of loadgen's CPU per transaction over all trials as its
// reference.
func Series(base, cand []*report.Result) (bv, cv map[string][]float64) {
	var lg []float64
	for _, r := range append(append([]*report.Result(nil), base...), cand...) {
		lg = append(lg, r.LoadgenUsTxn)
	}
	ref := report.Median(lg)
	one := func(rs []*report.Result) map[string][]float64 {
		m := map[string][]float64{}
		for _, r := range rs {
			m[TPS.Name] = append(m[TPS.Name], r.TPS)
			m[P99.Name] = append(m[P99.Name], r.LatencyMs.P99)
			m[SUTCPUTxn.Name] = append(m[SUTCPUTxn.Name], r.SUTCPUUsTxn)
			m[SUTCPUAdj.Name] = append(m[SUTCPUAdj.Name], AdjustedCPU(r.SUTCPUUsTxn, r.LoadgenUsTxn, ref))
		}
		return m
	}
	return one(base), one(cand)
}
