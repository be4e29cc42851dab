package moneycheck

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/abm"
)

// Shrinking: the failing account's steps are replayed on fresh accounts
// (provisioned alike, unused by the run), without faults, and steps are
// deleted while the replay still disagrees with the model (ddmin over the
// steps), within Config.ShrinkTime and the spare accounts.

// shrinker replays steps on spare accounts.
type shrinker struct {
	r        *runner
	postpay  bool
	next     int // next spare
	deadline time.Time
}

func (r *runner) shrink(ctx context.Context, f *Failure, a *account) {
	if f == nil || a == nil {
		return
	}
	var steps []*step
	for _, st := range a.history {
		if len(st.ops) > 0 {
			steps = append(steps, st)
		}
	}
	f.Repro = historyOps(steps)
	if r.cfg.ShrinkTime < 0 {
		f.ReproNote = "not shrunk (shrinking off): the whole history"
		return
	}
	sh := &shrinker{r: r, postpay: a.postpay, deadline: time.Now().Add(r.cfg.ShrinkTime)}
	fails, err := sh.fails(ctx, steps)
	switch {
	case err != nil:
		f.ReproNote = "not shrunk (" + err.Error() + "): the whole history"
		return
	case !fails:
		f.ReproNote = "the history does not fail again on a fresh account without faults: the whole history, rerun with the seed"
		return
	}
	// ddmin over the steps.
	n := 2
	for len(steps) >= 2 && time.Now().Before(sh.deadline) && sh.next < spares {
		chunk := (len(steps) + n - 1) / n
		reduced := false
		for i := 0; i < len(steps) && time.Now().Before(sh.deadline) && sh.next < spares; i += chunk {
			try := append(append([]*step(nil), steps[:i]...), steps[min(i+chunk, len(steps)):]...)
			if len(try) == 0 {
				continue
			}
			if ok, err := sh.fails(ctx, try); err == nil && ok {
				steps, reduced = try, true
				n = max(n-1, 2)
				break
			}
		}
		if !reduced {
			if n >= len(steps) {
				break
			}
			n = min(2*n, len(steps))
		}
	}
	f.Repro = historyOps(steps)
	state := "1-minimal"
	if time.Now().After(sh.deadline) || sh.next >= spares {
		state = "shrinking stopped at its bound"
	}
	f.ReproNote = fmt.Sprintf("%d steps that fail on a fresh account without faults, %s, %d replays", len(steps), state, sh.next)
}

func historyOps(steps []*step) []string {
	var out []string
	for _, st := range steps {
		if len(st.ops) > 1 {
			mode := "parallel"
			if st.ordered {
				mode = "in this order"
			}
			out = append(out, fmt.Sprintf("step of %d (%s):", len(st.ops), mode))
		}
		for _, op := range st.ops {
			l := op.String()
			if len(st.ops) > 1 {
				l = "  " + l
			}
			out = append(out, l)
		}
	}
	return out
}

// fails replays steps on a fresh spare account and reports whether the
// CHF disagrees with the model.
func (sh *shrinker) fails(ctx context.Context, steps []*step) (bool, error) {
	r := sh.r
	if sh.next >= spares {
		return false, fmt.Errorf("no spare account left")
	}
	off := r.cfg.Accounts + sh.next
	if sh.postpay {
		off += spares
	}
	sh.next++
	supi, err := abm.SUPI(first, off)
	if err != nil {
		return false, err
	}
	s := &state{balance: r.cfg.Balance}
	if sh.postpay {
		s.limit = r.cfg.CreditLimit
	}
	cands := []*state{s}
	refs := map[int]string{}
	ref := func(id int) string {
		if x := refs[id]; x != "" {
			return x
		}
		return supi + ".ffff" + hex12(id)
	}
	for _, st := range steps {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		answers := make([]Answer, len(st.ops))
		reqs := make([]request, len(st.ops))
		for i, op := range st.ops {
			reqs[i] = r.cl.build(op, supi, ref(op.Sess))
		}
		if st.ordered || len(st.ops) == 1 {
			for i, op := range st.ops {
				answers[i] = r.send(ctx, op, &reqs[i], i%2 == 0)
			}
		} else {
			var wg sync.WaitGroup
			for i, op := range st.ops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					answers[i] = r.send(ctx, op, &reqs[i], i%2 == 0)
				}()
			}
			wg.Wait()
		}
		for i, op := range st.ops {
			if answers[i].InDoubt && op.Kind != KindTopUp {
				return false, fmt.Errorf("replay: %s in doubt: %s", op, answers[i].Err)
			}
			if op.Kind == KindCreate && answers[i].Status == statusCreated && refs[op.Sess] == "" {
				refs[op.Sess] = answers[i].Ref
			}
		}
		next, _, err := r.model.advance(cands, st.ops, answers)
		if err != nil {
			return false, err
		}
		if len(next) == 0 {
			return true, nil
		}
		bop := &Op{Kind: KindBalance}
		breq := r.cl.build(bop, supi, "")
		ba := r.send(ctx, bop, &breq, false)
		if ba.Account == nil {
			return false, fmt.Errorf("replay: cannot read the balance: %s", ba.String())
		}
		if next, _ = observe(next, ba.Account); len(next) == 0 {
			return true, nil
		}
		cands = next
	}
	return false, nil
}
