package report

import "slices"

// Median is the median of v (the mean of the middle two when len(v) is
// even; 0 when v is empty). v is not modified. Every median of trials,
// steps and thirds in loadgen (gate, lab, soak) is this one.
func Median(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
