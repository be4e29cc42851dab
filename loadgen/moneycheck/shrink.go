package moneycheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/abm/provision"
)

// Shrinking: the failing account's steps are replayed on fresh accounts
// (provisioned alike, unused by the run), without faults, and steps are
// deleted while the replay still disagrees with the model (ddmin over the
// steps), within Config.ShrinkTime and the spare accounts.

// shrinker replays steps on spare accounts.
type shrinker struct {
	r        *runner
	why      string // how the last failing replay failed
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
	// ddmin over the steps, keeping to failures of the same kind.
	failing := sh.why
	sig := signature(f.Reason)
	if signature(failing) != sig {
		f.ReproNote = fmt.Sprintf("the history fails otherwise on a fresh account without faults (%s): the whole history, rerun with the seed", failing)
		return
	}
	n := 2
	for len(steps) >= 2 && time.Now().Before(sh.deadline) && sh.next < spares {
		chunk := (len(steps) + n - 1) / n
		reduced := false
		for i := 0; i < len(steps) && time.Now().Before(sh.deadline) && sh.next < spares; i += chunk {
			try := append(append([]*step(nil), steps[:i]...), steps[min(i+chunk, len(steps)):]...)
			if len(try) == 0 {
				continue
			}
			if ok, err := sh.fails(ctx, try); err == nil && ok && signature(sh.why) == sig {
				steps, reduced, failing = try, true, sh.why
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
	f.ReproNote = fmt.Sprintf("%d steps that fail on a fresh account without faults, %s, %d replays; the last replay failed with: %s", len(steps), state, sh.next, failing)
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
	supi, err := provision.SUPI(first, off)
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
		next, why, err := r.model.advance(cands, st.ops, answers)
		if err != nil {
			return false, err
		}
		if len(next) == 0 {
			sh.why = why
			return true, nil
		}
		bop := &Op{Kind: KindBalance}
		breq := r.cl.build(bop, supi, "")
		ba := r.send(ctx, bop, &breq, false)
		if ba.Account == nil {
			return false, fmt.Errorf("replay: cannot read the balance: %s", ba.String())
		}
		if next, why = observe(next, ba.Account); len(next) == 0 {
			sh.why = why
			return true, nil
		}
		cands = next
	}
	return false, nil
}

// signature is the kind of a failure, so that shrinking keeps to it: for
// an answer, the operation's kind and what differed first (status,
// charged, line, account...); for a balance read, the fields that
// differed from the first candidate.
func signature(why string) string {
	if rest, ok := strings.CutPrefix(why, "balance inquiry {"); ok {
		obs, rest, _ := strings.Cut(rest, "}")
		_, rest, _ = strings.Cut(rest, "{")
		pred, _, _ := strings.Cut(rest, "}")
		o, p := fields(obs), fields(pred)
		var diff []string
		for k, v := range o {
			if p[k] != v {
				diff = append(diff, k)
			}
		}
		for k := range p {
			if _, ok := o[k]; !ok {
				diff = append(diff, k)
			}
		}
		slices.Sort(diff)
		return "read:" + strings.Join(diff, ",")
	}
	f := strings.Fields(why)
	kind := ""
	if len(f) > 1 {
		kind = f[1]
	}
	i := strings.LastIndex(why, "(")
	if i < 0 {
		return kind
	}
	d := strings.Fields(why[i+1:])
	if len(d) == 0 {
		return kind
	}
	return kind + ":" + d[0]
}

// fields splits "k=v k=v" into a map; a field without "=" maps to "".
func fields(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		if i := strings.IndexByte(v, '('); i >= 0 && strings.HasSuffix(f, ")") {
			v = f[len(k)+1:] // data=123(held 4): keep the whole value
		}
		m[k] = v
	}
	return m
}
