package moneycheck

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// maxCandidates bounds the candidate states of one account: more means
// answers in doubt piled up without a read settling them. States that a
// balance inquiry cannot tell apart (which of two in-doubt requests left
// an identity in the record, say) multiply under a long run of faults:
// 256 was reached by a 60 s run with 20 faults (seed 103), so the bound
// leaves room well beyond that while keeping a step's exploration small.
const maxCandidates = 4096

// errTooManyCandidates is returned when an account's candidate states
// exceed maxCandidates.
var errTooManyCandidates = errors.New("moneycheck: too many candidate states (answers in doubt not settled)")

// advance applies a step (ops sent together, with their observed
// answers) to every candidate in every order and keeps the resulting
// states whose predicted answers equal the observed ones. An op whose
// answer is in doubt may have been applied or not. When none survives,
// why says how the answers differed from the prediction along the order
// that explained the most of them.
func (m *Model) advance(cands []*state, ops []*Op, obs []Answer) (next []*state, why string, err error) {
	// A request sent more than once may have landed on an earlier send
	// whose answer was lost, before or after the others of the step: it
	// is one more operation in doubt, which must come before its last
	// send.
	ops, obs = slices.Clone(ops), slices.Clone(obs)
	needs := make([]int, len(ops))
	for i := range needs {
		needs[i] = -1
	}
	for i, op := range ops[:len(obs)] {
		if obs[i].Tries > 1 && !obs[i].InDoubt {
			ops = append(ops, op)
			obs = append(obs, Answer{InDoubt: true, Err: "an earlier send", Tries: 1})
			needs[i] = len(ops) - 1
			needs = append(needs, -1)
		}
	}
	out := map[string]*state{}
	used := make([]bool, len(ops))
	best := -1
	e := explorer{m: m, ops: ops, obs: obs, needs: needs, used: used, out: out, why: &why, best: &best}
	for _, s := range cands {
		e.explore(s, 0)
		if len(out) > maxCandidates {
			return nil, "", errTooManyCandidates
		}
	}
	return sorted(out), why, nil
}

type explorer struct {
	m     *Model
	ops   []*Op
	obs   []Answer
	needs []int // needs[i] >= 0: op needs[i] comes before op i
	used  []bool
	out   map[string]*state
	why   *string
	best  *int
}

func (e *explorer) explore(s *state, depth int) {
	if depth == len(e.ops) {
		e.out[s.key()] = s
		return
	}
	for i := range e.ops {
		if e.used[i] || e.needs[i] >= 0 && !e.used[e.needs[i]] {
			continue
		}
		e.used[i] = true
		if e.obs[i].InDoubt {
			e.explore(s, depth+1)
			c := s.clone()
			e.m.apply(c, e.ops[i], nil)
			e.explore(c, depth+1)
		} else {
			c := s.clone()
			pred := e.m.apply(c, e.ops[i], &e.obs[i])
			if ok, diff := sameAnswer(&pred, &e.obs[i]); ok {
				e.explore(c, depth+1)
			} else if depth > *e.best {
				// The order that explains the most answers says best
				// where the CHF went wrong.
				*e.best = depth
				*e.why = fmt.Sprintf("%s: answered %s; the model says %s (%s)", e.ops[i], e.obs[i].String(), pred.String(), diff)
			}
		}
		e.used[i] = false
	}
}

// observe keeps the candidates whose balance inquiry is v.
func observe(cands []*state, v *AccountView) (next []*state, why string) {
	for _, s := range cands {
		if s.view() == *v {
			next = append(next, s)
		}
	}
	if len(next) == 0 && len(cands) > 0 {
		why = fmt.Sprintf("balance inquiry {%s}; the model says {%s}", v, cands[0].view().String())
		for _, s := range cands[1:] {
			why += fmt.Sprintf(" or {%s}", s.view().String())
		}
	}
	return next, why
}

func sorted(m map[string]*state) []*state {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*state, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}
