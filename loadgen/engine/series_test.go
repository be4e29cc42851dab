package engine

import (
	"testing"
	"time"
)

// TestSeriesMemoryBounded: the aggregator keeps the histograms of only the
// last few seconds; older ones keep their Tick (with its percentiles), so a
// long run's series costs a Tick a second, not three histograms. A late
// interval for a finished second still adds to its counts. (Two minutes
// are 12 times the bound: what is held is steady long before; each
// second's summary costs much under -race.)
func TestSeriesMemoryBounded(t *testing.T) {
	const secs, maxHeld = 120, 10
	agg := newAggregator(nil, time.Now(), 0, 0, secs*time.Second)
	for sec := range secs {
		h := agg.getHist()
		for v := range 100 {
			h.Record(time.Duration(sec*1000+v) * time.Microsecond)
		}
		agg.add(interval{sec: sec, offered: 100, completed: 100, hist: h, svc: agg.getHist(), lag: agg.getHist()})
		agg.emit(sec)
		held := 0
		for _, s := range agg.secs {
			if s.hist != nil || s.svc != nil || s.lag != nil {
				held++
			}
		}
		if held > maxHeld {
			t.Fatalf("second %d: %d seconds still hold histograms, want at most %d", sec, held, maxHeld)
		}
	}
	agg.add(interval{sec: 10, offered: 7, completed: 7, hist: agg.getHist(), svc: agg.getHist(), lag: agg.getHist()})
	agg.emit(1 << 62)
	series := agg.series()
	if len(series) != secs {
		t.Fatalf("%d ticks, want %d", len(series), secs)
	}
	for _, tk := range []Tick{series[10], series[secs/2], series[secs-1]} {
		if min := float64(tk.Second); tk.P50 < min || tk.P99 < min || tk.P99 > min+1 {
			t.Errorf("second %d: p50 %.3f p99 %.3f ms, want within [%d, %d]", tk.Second, tk.P50, tk.P99, tk.Second, tk.Second+1)
		}
	}
	if series[10].Completed != 107 {
		t.Errorf("second 10 completed %d, want 107 (the late interval counted)", series[10].Completed)
	}
}
