package gate

import (
	"math"
	"slices"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// Rank-based (distribution-free) interval estimates of a shift in log
// space: the Hodges-Lehmann estimate with the exact confidence interval of
// the Wilcoxon signed-rank test (paired trials) or of the Mann-Whitney
// test (unpaired). Both intervals are order statistics of pairwise
// averages or differences, so one wild trial moves them by one rank, not by
// its size.

// interval is a shift estimate with its confidence interval and the
// confidence actually achieved (the exact distributions are discrete, so
// the achieved level is the smallest one at or above the requested level).
type interval struct {
	est, lo, hi float64
	conf        float64
	ok          bool // false: too few trials for the requested confidence
}

// signedRank estimates the centre of d (the per-pair differences) by the
// median of the Walsh averages (d_i + d_j)/2, i ≤ j, with the exact
// signed-rank interval.
func signedRank(d []float64, conf float64) interval {
	n := len(d)
	walsh := make([]float64, 0, n*(n+1)/2)
	for i := range n {
		for j := i; j < n; j++ {
			walsh = append(walsh, (d[i]+d[j])/2)
		}
	}
	slices.Sort(walsh)
	c, achieved, ok := critical(signedRankCDF(n), (1-conf)/2)
	return orderInterval(walsh, c, achieved, ok)
}

// mannWhitney estimates the shift of y against x by the median of the
// differences y_j - x_i, with the exact Mann-Whitney interval.
func mannWhitney(x, y []float64, conf float64) interval {
	diffs := make([]float64, 0, len(x)*len(y))
	for _, a := range x {
		for _, b := range y {
			diffs = append(diffs, b-a)
		}
	}
	slices.Sort(diffs)
	c, achieved, ok := critical(mannWhitneyCDF(len(x), len(y)), (1-conf)/2)
	return orderInterval(diffs, c, achieved, ok)
}

// orderInterval is [v(c+1), v(N-c)] (1-based order statistics) around the
// median of the sorted v.
func orderInterval(v []float64, c int, achieved float64, ok bool) interval {
	iv := interval{est: report.Median(v), conf: achieved, ok: ok}
	if !ok {
		iv.lo, iv.hi = math.Inf(-1), math.Inf(1)
		return iv
	}
	iv.lo, iv.hi = v[c], v[len(v)-1-c]
	return iv
}

// critical returns the largest c with P(T ≤ c) ≤ tail for the statistic
// whose cumulative distribution is cdf, and the two-sided confidence
// 1 - 2 P(T ≤ c) it achieves; ok is false when even P(T = 0) exceeds tail.
func critical(cdf []float64, tail float64) (c int, achieved float64, ok bool) {
	c = -1
	for k, p := range cdf {
		if p > tail*(1+1e-12) {
			break
		}
		c = k
	}
	if c < 0 {
		return 0, 0, false
	}
	return c, 1 - 2*cdf[c], true
}

// signedRankCDF is the null distribution function of the Wilcoxon
// signed-rank statistic W+ for n pairs: cdf[w] = P(W+ ≤ w).
func signedRankCDF(n int) []float64 {
	max := n * (n + 1) / 2
	p := make([]float64, max+1)
	p[0] = 1
	for k := 1; k <= n; k++ {
		// Rank k is positive or negative with probability 1/2 each.
		for w := k * (k + 1) / 2; w >= 0; w-- {
			q := p[w] / 2
			if w >= k {
				q += p[w-k] / 2
			}
			p[w] = q
		}
	}
	return cumulate(p)
}

// mannWhitneyCDF is the null distribution function of the Mann-Whitney
// statistic U for samples of m and n: cdf[u] = P(U ≤ u). Above 60 trials
// a side it uses the normal approximation.
func mannWhitneyCDF(m, n int) []float64 {
	N := m * n
	if m > 60 || n > 60 {
		mu := float64(N) / 2
		sd := math.Sqrt(float64(N) * float64(m+n+1) / 12)
		cdf := make([]float64, N+1)
		for u := range cdf {
			cdf[u] = 0.5 * math.Erfc(-(float64(u)+0.5-mu)/(sd*math.Sqrt2))
		}
		return cdf
	}
	// f[i][j][u]: P(U = u) for samples of i and j, by the recursion on
	// whether the largest value belongs to the first sample (then it beats
	// all j values of the second) or to the second.
	prev := make([][]float64, n+1) // i-1
	cur := make([][]float64, n+1)
	for j := 0; j <= n; j++ {
		prev[j] = []float64{1} // i = 0: U = 0
	}
	for i := 1; i <= m; i++ {
		cur[0] = []float64{1}
		for j := 1; j <= n; j++ {
			d := make([]float64, i*j+1)
			a, b := float64(i)/float64(i+j), float64(j)/float64(i+j)
			for u, q := range prev[j] { // largest from the first sample: +j
				d[u+j] += a * q
			}
			for u, q := range cur[j-1] {
				d[u] += b * q
			}
			cur[j] = d
		}
		prev, cur = cur, prev
	}
	return cumulate(prev[n])
}

func cumulate(p []float64) []float64 {
	s := 0.0
	for i, q := range p {
		s += q
		p[i] = s
	}
	return p
}
