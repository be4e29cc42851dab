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

// TestBatcherNoWaitBelowInFlight: calls that find a free slot leave at
// once, alone, concurrently.
func TestBatcherNoWaitBelowInFlight(t *testing.T) {
	var out atomic.Int32
	both := make(chan struct{})
	b := NewBatcher(BatchConfig{MaxInFlight: 2}, func(ctx context.Context, items []*testItem) {
		if len(items) != 1 {
			t.Errorf("batch of %d, want 1", len(items))
		}
		if out.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both: // the other call is out at the same time
		case <-time.After(5 * time.Second):
			t.Error("the second call did not leave while the first was out")
		}
	})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); b.Do(context.Background(), &testItem{id: i}) }()
	}
	wg.Wait()
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

func (b *Batcher[T]) active0() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active
}
