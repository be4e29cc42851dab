package gate

import (
	"math"
	"testing"
)

// Exact null distributions against values from the published tables and
// from brute-force enumeration.
func TestSignedRankCDF(t *testing.T) {
	// n = 6: W+ = 0 only when every sign is negative (1/64); W+ ≤ 2 for
	// the positive sets ∅, {1} and {2} (3/64). The two-sided 5% critical
	// values of the tables: 0 (n = 6), 2 (7), 3 (8), 5 (9), 8 (10), 13
	// (12), 52 (20).
	if got := signedRankCDF(6); math.Abs(got[0]-1.0/64) > 1e-15 || math.Abs(got[2]-3.0/64) > 1e-15 {
		t.Fatalf("n=6: P(0)=%v P(≤2)=%v", got[0], got[2])
	}
	for n, want := range map[int]int{6: 0, 7: 2, 8: 3, 9: 5, 10: 8, 12: 13, 20: 52} {
		c, _, ok := critical(signedRankCDF(n), 0.025)
		if !ok || c != want {
			t.Errorf("n=%d: critical %d ok=%v, want %d", n, c, ok, want)
		}
	}
	if _, _, ok := critical(signedRankCDF(5), 0.025); ok {
		t.Error("n=5 has a 95% interval")
	}
	// Brute force for n = 9.
	n := 9
	cdf := signedRankCDF(n)
	counts := make([]float64, n*(n+1)/2+1)
	for mask := 0; mask < 1<<n; mask++ {
		w := 0
		for k := 0; k < n; k++ {
			if mask&(1<<k) != 0 {
				w += k + 1
			}
		}
		counts[w]++
	}
	s := 0.0
	for w, c := range counts {
		s += c / float64(int(1)<<n)
		if math.Abs(cdf[w]-s) > 1e-12 {
			t.Fatalf("n=9 w=%d: %v, brute force %v", w, cdf[w], s)
		}
	}
}

func TestMannWhitneyCDF(t *testing.T) {
	// Two-sided 5% critical values of U from the tables.
	for _, c := range []struct{ m, n, want int }{{4, 4, 0}, {5, 5, 2}, {6, 6, 5}, {7, 7, 8}, {8, 8, 13}, {10, 10, 23}, {5, 8, 6}} {
		got, _, ok := critical(mannWhitneyCDF(c.m, c.n), 0.025)
		if !ok || got != c.want {
			t.Errorf("m=%d n=%d: critical %d ok=%v, want %d", c.m, c.n, got, ok, c.want)
		}
	}
	if _, _, ok := critical(mannWhitneyCDF(3, 3), 0.025); ok {
		t.Error("3 and 3 trials have a 95% interval")
	}
	// The normal approximation above 60 trials a side agrees with the exact
	// recursion at the boundary to within a fraction of a percent.
	exact := mannWhitneyCDF(60, 60)
	approx := mannWhitneyCDF(61, 61)
	if math.Abs(exact[1500]-0.5*math.Erfc(-(1500.5-1800)/(math.Sqrt(3600*121/12.0)*math.Sqrt2))) > 0.005 || approx[1860] < 0.4 || approx[1860] > 0.6 {
		t.Errorf("normal approximation off: exact P(U≤1500)=%v approx P(U≤1860)=%v", exact[1500], approx[1860])
	}
}

// The Hodges-Lehmann estimate is the median of the Walsh averages and the
// interval their order statistics.
func TestSignedRankInterval(t *testing.T) {
	d := []float64{0.10, 0.12, 0.08, 0.11, 0.09, 0.13, 0.10, 0.50}
	iv := signedRank(d, 0.95)
	if !iv.ok || iv.conf < 0.95 {
		t.Fatalf("%+v", iv)
	}
	if iv.est < 0.10 || iv.est > 0.12 {
		t.Fatalf("estimate %v, want about 0.11 (the 0.50 outlier barely moves it)", iv.est)
	}
	if iv.lo < 0.09 || iv.lo > 0.10 || iv.hi > 0.32 {
		t.Fatalf("interval [%v, %v]", iv.lo, iv.hi)
	}
}
