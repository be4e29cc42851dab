package report

import "testing"

func TestMedian(t *testing.T) {
	f := func(v []float64, want float64) {
		t.Helper()
		in := append([]float64(nil), v...)
		if got := Median(v); got != want {
			t.Errorf("Median(%v) = %v, want %v", v, got, want)
		}
		for i := range v {
			if v[i] != in[i] {
				t.Fatalf("Median modified its input: %v, was %v", v, in)
			}
		}
	}
	f(nil, 0)
	f([]float64{7}, 7)
	f([]float64{3, 1, 2}, 2)
	f([]float64{4, 1, 3, 2}, 2.5)
	f([]float64{-1, 5}, 2)
	f([]float64{3, 1, 2, 10}, 2.5) // the lab's case
}
