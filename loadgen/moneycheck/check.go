package moneycheck

import (
	"errors"
	"fmt"
	"sort"
)

// maxCandidates bounds the candidate states of one account: more means
// answers in doubt piled up without a read settling them.
const maxCandidates = 256

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
	out := map[string]*state{}
	used := make([]bool, len(ops))
	best := -1
	for _, s := range cands {
		m.explore(s, ops, obs, used, 0, out, &why, &best)
		if len(out) > maxCandidates {
			return nil, "", errTooManyCandidates
		}
	}
	return sorted(out), why, nil
}

func (m *Model) explore(s *state, ops []*Op, obs []Answer, used []bool, depth int, out map[string]*state, why *string, best *int) {
	if depth == len(ops) {
		out[s.key()] = s
		return
	}
	for i := range ops {
		if used[i] {
			continue
		}
		used[i] = true
		if obs[i].InDoubt {
			m.explore(s, ops, obs, used, depth+1, out, why, best)
			c := s.clone()
			m.apply(c, ops[i], nil)
			m.explore(c, ops, obs, used, depth+1, out, why, best)
		} else {
			c := s.clone()
			pred := m.apply(c, ops[i], &obs[i])
			if ok, diff := sameAnswer(&pred, &obs[i]); ok {
				m.explore(c, ops, obs, used, depth+1, out, why, best)
			} else if depth > *best {
				// The order that explains the most answers says best
				// where the CHF went wrong.
				*best = depth
				*why = fmt.Sprintf("%s: answered %s; the model says %s (%s)", ops[i], obs[i].String(), pred.String(), diff)
			}
		}
		used[i] = false
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
