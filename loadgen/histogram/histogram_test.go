package histogram

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestMergeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []*Histogram{New(), New(), New()}
	union := New()
	for i := 0; i < 30000; i++ {
		d := time.Duration(rng.ExpFloat64() * float64(3*time.Millisecond))
		if i%997 == 0 {
			d = time.Duration(rng.IntN(70)) * time.Second // some beyond the range: clamped
		}
		parts[i%3].Record(d)
		union.Record(d)
	}
	merged := New()
	for _, p := range parts {
		merged.Merge(p)
	}
	if !merged.Equal(union) {
		t.Fatalf("merged histogram differs from the histogram of the union")
	}
	if merged.Summary() != union.Summary() {
		t.Fatalf("summaries differ: %+v vs %+v", merged.Summary(), union.Summary())
	}
	// Encoding round trip keeps it exact, and merging decoded parts too.
	again := New()
	for _, p := range parts {
		s, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decode(s)
		if err != nil {
			t.Fatal(err)
		}
		again.Merge(d)
	}
	if !again.Equal(union) || again.Count() != 30000 {
		t.Fatalf("decoded merge differs: count %d", again.Count())
	}
}

func TestSummary(t *testing.T) {
	h := New()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	s := h.Summary()
	near := func(name string, got, want float64) {
		t.Helper()
		if got < want*0.995 || got > want*1.005 {
			t.Errorf("%s = %v, want about %v", name, got, want)
		}
	}
	near("p50", s.P50, 500)
	near("p99", s.P99, 990)
	near("p99.9", s.P999, 999)
	near("max", s.Max, 1000)
	near("mean", s.Mean, 500.5)
	near("cv", s.CV, 288.675/500.5)
	if n := h.CountAtOrAbove(900 * time.Millisecond); n < 100 || n > 102 {
		t.Errorf("CountAtOrAbove(900ms) = %d, want about 101", n)
	}
	if _, err := Decode("not base64!"); err == nil {
		t.Error("Decode accepted garbage")
	}
}
