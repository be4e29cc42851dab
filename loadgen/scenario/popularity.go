package scenario

import (
	"math"
	"math/rand/v2"
)

// Picker picks subscriber indexes in [0, Count) by a scenario's
// popularity. It holds no state between picks: safe for concurrent use,
// each caller bringing its own *rand.Rand.
type Picker struct {
	n    int
	zipf bool
	// zipf: rank = floor(x) - 1 with x drawn from the density x^-s on
	// [1, n+1) by inversion: x = (1 + u·c)^e (s != 1) or (n+1)^u (s = 1).
	one     bool
	c, e, l float64
	mul     uint64 // rank → index: rank·mul mod n, gcd(mul, n) = 1
}

// Picker returns the picker of s (which must be valid).
func (s *Subscribers) Picker() *Picker {
	p := &Picker{n: s.Count}
	if s.Popularity != "zipf" {
		return p
	}
	p.zipf = true
	n1 := float64(s.Count) + 1
	if math.Abs(s.ZipfS-1) < 1e-9 {
		p.one, p.l = true, math.Log(n1)
	} else {
		p.c = math.Pow(n1, 1-s.ZipfS) - 1
		p.e = 1 / (1 - s.ZipfS)
	}
	// Scatter the ranks over the range (so that the popular subscribers
	// are not the first few, nor all in one shard): a multiplier near
	// n/φ that is coprime to n makes rank → index a bijection.
	m := uint64(float64(s.Count)*0.6180339887) | 1
	for gcd(m, uint64(s.Count)) != 1 {
		m += 2
	}
	p.mul = m % uint64(s.Count)
	if p.mul == 0 {
		p.mul = 1
	}
	return p
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Pick returns a subscriber index.
func (p *Picker) Pick(r *rand.Rand) int {
	if !p.zipf {
		return r.IntN(p.n)
	}
	return p.Index(p.Rank(r.Float64()))
}

// Rank returns the 0-based popularity rank at probability u in [0, 1).
func (p *Picker) Rank(u float64) int {
	var x float64
	if p.one {
		x = math.Exp(u * p.l)
	} else {
		x = math.Pow(1+u*p.c, p.e)
	}
	return min(max(int(x)-1, 0), p.n-1)
}

// Index returns the subscriber index of popularity rank r.
func (p *Picker) Index(r int) int {
	if !p.zipf {
		return r
	}
	return int(uint64(r) * p.mul % uint64(p.n))
}

// Share returns the probability that a pick is the subscriber of rank r
// (0-based): what a subscriber's share of the flows is under this
// popularity.
func (p *Picker) Share(r int) float64 {
	if !p.zipf {
		return 1 / float64(p.n)
	}
	cdf := func(x float64) float64 { // P(X < x), x in [1, n+1]
		if p.one {
			return math.Log(x) / p.l
		}
		return (math.Pow(x, 1/p.e) - 1) / p.c
	}
	return cdf(float64(r)+2) - cdf(float64(r)+1)
}
