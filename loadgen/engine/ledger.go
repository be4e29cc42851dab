package engine

import "slices"

// Ledger accumulates, per subscriber index, what the CHF reported charging
// (X-Chf-Charged), what the run expected it to charge (Config.Rater: the
// independent expectation, once per logical request resolved as a
// success, whatever retransmissions it took) and which subscribers were
// touched by a charging request. One Ledger belongs to one worker; Merge
// combines them after the run.
type Ledger struct {
	n        int
	charged  []int64  // dense, for ranges up to denseMax
	expected []int64  // dense; nil until the first AddExpected
	touched  []uint64 // dense bitset
	// sparse: one entry per touched subscriber (present = touched), so
	// that a 20M range costs what the run touches, about 40 bytes each
	sparse map[int32]ledgerEntry
	Total  int64 // sum of every charge
	// ExpectedTotal is the sum of every expected charge.
	ExpectedTotal int64
}

const denseMax = 4 << 20

type ledgerEntry struct{ charged, expected int64 }

// NewLedger returns a ledger for n subscribers.
func NewLedger(n int) *Ledger {
	l := &Ledger{n: n}
	if n <= denseMax {
		l.charged = make([]int64, n)
		l.touched = make([]uint64, (n+63)/64)
	} else {
		l.sparse = map[int32]ledgerEntry{}
	}
	return l
}

// Len returns the subscriber count.
func (l *Ledger) Len() int { return l.n }

// Touch marks subscriber i as touched by a charging request.
func (l *Ledger) Touch(i int32) {
	if l.touched != nil {
		l.touched[i>>6] |= 1 << (uint(i) & 63)
		return
	}
	if _, ok := l.sparse[i]; !ok {
		l.sparse[i] = ledgerEntry{}
	}
}

// Add records a charge for subscriber i.
func (l *Ledger) Add(i int32, v int64) {
	l.Total += v
	if l.charged != nil {
		l.charged[i] += v
		return
	}
	e := l.sparse[i]
	e.charged += v
	l.sparse[i] = e
}

// AddExpected records an expected charge for subscriber i.
func (l *Ledger) AddExpected(i int32, v int64) {
	l.ExpectedTotal += v
	if l.charged != nil {
		if l.expected == nil {
			l.expected = make([]int64, l.n)
		}
		l.expected[i] += v
		return
	}
	e := l.sparse[i]
	e.expected += v
	l.sparse[i] = e
}

// Expected returns the total expected to be charged to subscriber i.
func (l *Ledger) Expected(i int32) int64 {
	if l.expected != nil {
		return l.expected[i]
	}
	return l.sparse[i].expected
}

// Charged returns the total charged to subscriber i.
func (l *Ledger) Charged(i int32) int64 {
	if l.charged != nil {
		return l.charged[i]
	}
	return l.sparse[i].charged
}

// Touched reports whether subscriber i was touched.
func (l *Ledger) Touched(i int32) bool {
	if l.touched != nil {
		return l.touched[i>>6]&(1<<(uint(i)&63)) != 0
	}
	_, ok := l.sparse[i]
	return ok
}

// TouchedList returns the touched subscriber indexes in order.
func (l *Ledger) TouchedList() []int32 {
	var out []int32
	if l.touched != nil {
		for w, bits := range l.touched {
			for b := 0; b < 64; b++ {
				if bits&(1<<uint(b)) != 0 {
					out = append(out, int32(w*64+b))
				}
			}
		}
		return out
	}
	out = make([]int32, 0, len(l.sparse))
	for i := range l.sparse {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// Merge adds o into l.
func (l *Ledger) Merge(o *Ledger) {
	l.Total += o.Total
	l.ExpectedTotal += o.ExpectedTotal
	if l.charged != nil {
		for i, v := range o.charged {
			l.charged[i] += v
		}
		if o.expected != nil {
			if l.expected == nil {
				l.expected = make([]int64, l.n)
			}
			for i, v := range o.expected {
				l.expected[i] += v
			}
		}
		for i, v := range o.touched {
			l.touched[i] |= v
		}
		return
	}
	for k, v := range o.sparse {
		e := l.sparse[k]
		e.charged += v.charged
		e.expected += v.expected
		l.sparse[k] = e
	}
}
