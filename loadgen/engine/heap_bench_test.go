package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkFlowHeap: the scheduler's heap of flows waiting for their
// next request, at the open sessions of the default scenario (5,000) and
// of busy-hour at 10,000 TPS (500,000): take the flow due first and put
// it back a think time of 0–60 s later, as the worker does for every
// request.
func BenchmarkFlowHeap(b *testing.B) {
	for _, n := range []int{5000, 500000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var h flowHeap
			for range n {
				h.push(&flow{due: rng.Int64N(60e9), heapIdx: -1})
			}
			b.ReportAllocs()
			for b.Loop() {
				f := h.pop()
				f.due += rng.Int64N(60e9)
				h.push(f)
			}
		})
	}
}

// TestFlowHeapOrder: flows leave in due order, remove takes out the one
// asked for, and heapIdx follows every move.
func TestFlowHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h flowHeap
	flows := make([]*flow, 1000)
	for i := range flows {
		flows[i] = &flow{due: rng.Int64N(1000), heapIdx: -1, id: uint64(i)}
		h.push(flows[i])
	}
	check := func() {
		t.Helper()
		for i, e := range h {
			if int(e.f.heapIdx) != i || e.due != e.f.due {
				t.Fatalf("entry %d: heapIdx %d, due %d (flow's %d)", i, e.f.heapIdx, e.due, e.f.due)
			}
			if i > 0 && h[(i-1)/2].due > e.due {
				t.Fatalf("entry %d due %d before its parent's %d", i, e.due, h[(i-1)/2].due)
			}
		}
	}
	check()
	for _, i := range []int{999, 0, 500, 17} {
		if f := h.remove(int(flows[i].heapIdx)); f != flows[i] || f.heapIdx != -1 {
			t.Fatalf("remove took flow %d (heapIdx %d), want %d", f.id, f.heapIdx, i)
		}
		check()
	}
	for i := range h {
		h[i].f.due = 2000 - h[i].f.due
	}
	h.reorder()
	check()
	last := int64(-1)
	for n := 0; len(h) > 0; n++ {
		f := h.pop()
		if f.due < last || f.heapIdx != -1 {
			t.Fatalf("pop %d: due %d after %d, heapIdx %d", n, f.due, last, f.heapIdx)
		}
		last = f.due
	}
}
