package chassis

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type testItem struct {
	id   int
	done atomic.Int32
}

// TestBatcherMergesWhileInFlight: with one batch allowed out, calls that
// arrive while it is out leave together in the next batch (up to
// MaxItems); every item is sent exactly once.
func TestBatcherMergesWhileInFlight(t *testing.T) {
	gate := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	first := true
	b := NewBatcher(BatchConfig{MaxInFlight: 1, MaxItems: 4}, func(ctx context.Context, items []*testItem) {
		mu.Lock()
		sizes = append(sizes, len(items))
		hold := first
		first = false
		mu.Unlock()
		if hold {
			<-gate // the first batch stays out until the others queued
		}
		for _, it := range items {
			it.done.Add(1)
		}
	})
	items := make([]*testItem, 10)
	for i := range items {
		items[i] = &testItem{id: i}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.Do(context.Background(), items[0]) }()
	for b.active0() == 0 {
		time.Sleep(time.Millisecond)
	}
	for _, it := range items[1:] {
		wg.Add(1)
		go func() { defer wg.Done(); b.Do(context.Background(), it) }()
	}
	for b.Queued() != 9 {
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	for _, it := range items {
		if n := it.done.Load(); n != 1 {
			t.Fatalf("item %d sent %d times", it.id, n)
		}
	}
	// 1 alone, then the 9 queued in batches of at most 4.
	want := []int{1, 4, 4, 1}
	if len(sizes) != len(want) {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("batch sizes %v, want %v", sizes, want)
		}
	}
	if b.Queued() != 0 || b.active0() != 0 {
		t.Fatalf("queued %d active %d after everything returned", b.Queued(), b.active0())
	}
}

// TestBatcherFullBatchLeavesAtOnce: while a batch is out and the
// in-flight limit allows another, the calls that queue leave as soon as
// they fill a batch, without waiting for the one out to return.
func TestBatcherFullBatchLeavesAtOnce(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	full := make(chan struct{})
	b := NewBatcher(BatchConfig{MaxInFlight: 2, MaxItems: 2}, func(ctx context.Context, items []*testItem) {
		mu.Lock()
		sizes = append(sizes, len(items))
		first := len(sizes) == 1
		mu.Unlock()
		if !first {
			close(full)
			return
		}
		select {
		case <-full: // the full batch left while this one was out
		case <-time.After(5 * time.Second):
			t.Error("the full batch did not leave while the first was out")
		}
	})
	b.setLimit(2) // as the limit would have grown to
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.Do(context.Background(), &testItem{id: 0}) }()
	for b.active0() == 0 {
		time.Sleep(time.Millisecond)
	}
	for i := 1; i <= 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); b.Do(context.Background(), &testItem{id: i}) }()
	}
	wg.Wait()
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 2 {
		t.Fatalf("batch sizes %v, want [1 2]", sizes)
	}
}

// TestBatcherDisabledAndMany: MaxInFlight < 0 sends every call alone;
// DoMany keeps its items together; the earliest deadline is the batch's.
func TestBatcherDisabledAndMany(t *testing.T) {
	var sizes []int
	var mu sync.Mutex
	off := NewBatcher(BatchConfig{MaxInFlight: -1}, func(ctx context.Context, items []*testItem) {
		mu.Lock()
		sizes = append(sizes, len(items))
		mu.Unlock()
	})
	off.DoMany(context.Background(), []*testItem{{id: 1}, {id: 2}, {id: 3}})
	off.Do(context.Background(), &testItem{})
	if len(sizes) != 2 || sizes[0] != 3 || sizes[1] != 1 {
		t.Fatalf("batch sizes %v, want [3 1]", sizes)
	}

	gate := make(chan struct{})
	var deadlines []time.Time
	b := NewBatcher(BatchConfig{MaxInFlight: 1}, func(ctx context.Context, items []*testItem) {
		d, _ := ctx.Deadline()
		mu.Lock()
		deadlines = append(deadlines, d)
		n := len(deadlines)
		mu.Unlock()
		if n == 1 {
			<-gate
		}
	})
	far, cancel1 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel1()
	near, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.Do(far, &testItem{}) }()
	for b.active0() == 0 {
		time.Sleep(time.Millisecond)
	}
	wg.Add(2)
	go func() { defer wg.Done(); b.Do(far, &testItem{}) }()
	for b.Queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	go func() { defer wg.Done(); b.Do(near, &testItem{}) }()
	for b.Queued() != 2 {
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	nd, _ := near.Deadline()
	if len(deadlines) != 2 || !deadlines[1].Equal(nd) {
		t.Fatalf("second batch deadline %v, want the earliest %v", deadlines, nd)
	}
}

func (b *Batcher[T]) setLimit(n int) {
	b.mu.Lock()
	b.limit = n
	b.mu.Unlock()
}

func (b *Batcher[T]) active0() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active
}

// TestVegasLimit: the in-flight limit grows while calls queue and the
// round trip stays at its base (the peer answers as fast with more out),
// not without demand, shrinks when the round trip grows with the limit
// (batches wait at the peer), and never leaves 1..max.
func TestVegasLimit(t *testing.T) {
	const ms = time.Millisecond
	run := func(v *vegas, limit, max, n int, demand bool, rtt func(limit int) time.Duration) int {
		t.Helper()
		for range n {
			limit = v.sample(rtt(limit), limit, max, demand)
			if limit < 1 || limit > max {
				t.Fatalf("limit %d outside 1..%d", limit, max)
			}
		}
		return limit
	}
	flat := func(int) time.Duration { return ms }
	// A peer with room: the round trip does not depend on the limit.
	var v vegas
	if got := run(&v, 1, 4, 100, true, flat); got != 4 {
		t.Fatalf("flat RTT with demand: limit %d, want 4", got)
	}
	// No calls waiting here: nothing to gain, the limit stays.
	v = vegas{}
	if got := run(&v, 1, 4, 100, false, flat); got != 1 {
		t.Fatalf("flat RTT without demand: limit %d, want 1", got)
	}
	// A peer that serves one batch at a time: the round trip is the limit
	// times the service time, every added batch only waits there.
	v = vegas{}
	serial := func(limit int) time.Duration { return time.Duration(limit) * ms }
	if got := run(&v, 1, 4, 100, true, serial); got > 2 {
		t.Fatalf("serialising peer: limit %d, want at most 2", got)
	}
	// The base follows a peer that became slower for good: after a window
	// at the new speed, the limit grows again.
	v = vegas{}
	run(&v, 1, 4, 10, true, flat)
	slow := func(int) time.Duration { return 3 * ms }
	if got := run(&v, 1, 4, 3*baseWindow, true, slow); got != 4 {
		t.Fatalf("after the peer slowed for good: limit %d, want 4", got)
	}
}

// TestBatcherPipelines: with several batches allowed out, a burst of calls
// is carried by several full batches at once, every item is sent exactly
// once and nothing stays queued or out.
func TestBatcherPipelines(t *testing.T) {
	var out, most atomic.Int32
	gate := make(chan struct{})
	b := NewBatcher(BatchConfig{MaxInFlight: 4, MaxItems: 8}, func(ctx context.Context, items []*testItem) {
		n := out.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-gate
		for _, it := range items {
			it.done.Add(1)
		}
		out.Add(-1)
	})
	b.setLimit(4)
	items := make([]*testItem, 40)
	var wg sync.WaitGroup
	for i := range items {
		items[i] = &testItem{id: i}
		wg.Add(1)
		go func() { defer wg.Done(); b.Do(context.Background(), items[i]) }()
	}
	// One alone, then three full batches of 8 while it is out; 15 wait.
	for b.Queued() != len(items)-1-3*8 || b.active0() != 4 {
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	for _, it := range items {
		if n := it.done.Load(); n != 1 {
			t.Fatalf("item %d sent %d times", it.id, n)
		}
	}
	if m := most.Load(); m != 4 {
		t.Fatalf("at most %d batches were out at once, want 4", m)
	}
	if b.Queued() != 0 || b.active0() != 0 {
		t.Fatalf("queued %d active %d after everything returned", b.Queued(), b.active0())
	}
}
