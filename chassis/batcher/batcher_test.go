package batcher

import (
	"context"
	"runtime"
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
	b := New(Config{MaxInFlight: 1, MaxItems: 4}, func(ctx context.Context, items []*testItem) {
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
	for b.InFlight() == 0 {
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
	if b.Queued() != 0 || b.InFlight() != 0 {
		t.Fatalf("queued %d active %d after everything returned", b.Queued(), b.InFlight())
	}
}

// TestBatcherFullBatchLeavesAtOnce: while a batch is out and the
// in-flight limit allows another, the calls that queue leave as soon as
// they fill a batch, without waiting for the one out to return.
func TestBatcherFullBatchLeavesAtOnce(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	full := make(chan struct{})
	b := New(Config{MaxInFlight: 2, MaxItems: 2}, func(ctx context.Context, items []*testItem) {
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
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.Do(context.Background(), &testItem{id: 0}) }()
	for b.InFlight() == 0 {
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
	off := New(Config{MaxInFlight: -1}, func(ctx context.Context, items []*testItem) {
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
	b := New(Config{MaxInFlight: 1}, func(ctx context.Context, items []*testItem) {
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
	for b.InFlight() == 0 {
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

// TestBatcherPipelines: with several batches allowed out, a burst of calls
// is carried by several full batches at once, every item is sent exactly
// once and nothing stays queued or out.
func TestBatcherPipelines(t *testing.T) {
	var out, most, sent atomic.Int32
	gate := make(chan struct{})
	b := New(Config{MaxInFlight: 4, MaxItems: 8}, func(ctx context.Context, items []*testItem) {
		sent.Add(int32(len(items)))
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
	items := make([]*testItem, 40)
	var wg sync.WaitGroup
	for i := range items {
		items[i] = &testItem{id: i}
		wg.Add(1)
		go func() { defer wg.Done(); b.Do(context.Background(), items[i]) }()
	}
	// The first call's batch (itself and what queued while it yielded,
	// 1 to 8 items), then three full batches of 8 while it is out; the
	// rest (7 to 14) wait.
	for int(sent.Load())+b.Queued() != len(items) || b.InFlight() != 4 {
		time.Sleep(time.Millisecond)
	}
	if q := b.Queued(); q < len(items)-8-3*8 || q > len(items)-1-3*8 {
		t.Fatalf("%d items wait behind 4 batches, want 7 to 14", q)
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
	if b.Queued() != 0 || b.InFlight() != 0 {
		t.Fatalf("queued %d active %d after everything returned", b.Queued(), b.InFlight())
	}
}

// TestBatcherPartialWaitsForIdle: while batches are out, a partial batch
// does not leave when one of them returns, only when none is out; full
// batches still leave at once.
func TestBatcherPartialWaitsForIdle(t *testing.T) {
	gates := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	var mu sync.Mutex
	var sizes []int
	b := New(Config{MaxInFlight: 2, MaxItems: 4}, func(ctx context.Context, items []*testItem) {
		mu.Lock()
		n := len(sizes)
		sizes = append(sizes, len(items))
		mu.Unlock()
		if n < len(gates) {
			<-gates[n]
		}
		for _, it := range items {
			it.done.Add(1)
		}
	})
	items := make([]*testItem, 7)
	var wg sync.WaitGroup
	start := func(from, to int) {
		for i := from; i < to; i++ {
			items[i] = &testItem{id: i}
			wg.Add(1)
			go func() { defer wg.Done(); b.Do(context.Background(), items[i]) }()
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s (queued %d, active %d)", what, b.Queued(), b.InFlight())
			}
		}
	}
	batches := func() int { mu.Lock(); defer mu.Unlock(); return len(sizes) }
	start(0, 1) // alone, out
	waitFor("the lone batch", func() bool { return batches() == 1 })
	start(1, 5) // a full batch: leaves beside it
	waitFor("the full batch", func() bool { return batches() == 2 && b.InFlight() == 2 })
	start(5, 7) // a partial batch: waits
	waitFor("the partial batch to queue", func() bool { return b.Queued() == 2 })
	close(gates[0]) // one of the two returns: the partial one still waits
	waitFor("the lone batch to return", func() bool { return b.InFlight() == 1 })
	time.Sleep(20 * time.Millisecond)
	if n := batches(); n != 2 || b.Queued() != 2 {
		t.Fatalf("a partial batch left while a batch was out: %d batches sent, %d queued", n, b.Queued())
	}
	close(gates[1]) // none out: it leaves
	waitFor("the partial batch", func() bool { return batches() == 3 })
	close(gates[2])
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 4, 2}; len(sizes) != 3 || sizes[0] != want[0] || sizes[1] != want[1] || sizes[2] != want[2] {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
	for _, it := range items {
		if n := it.done.Load(); n != 1 {
			t.Fatalf("item %d sent %d times", it.id, n)
		}
	}
}

// TestBatcherInFlightFollowsQueueing: 128 callers through one Batcher (at
// most 4 batches of 16 out) to a fake peer whose round trip is a 1 ms
// wait. A peer with room for every batch ("parallel") has several batches
// out most of the time; one that serves one batch at a time ("serial", a
// mutex around the wait) still gets full batches, so it pays no extra
// round trips for the batches that wait there.
func TestBatcherInFlightFollowsQueueing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 × 1 s")
	}
	for _, peer := range []string{"parallel", "serial"} {
		t.Run(peer, func(t *testing.T) {
			var mu sync.Mutex
			var batches, items atomic.Int64
			b := New(Config{MaxInFlight: 4, MaxItems: 16}, func(ctx context.Context, its []*testItem) {
				batches.Add(1)
				items.Add(int64(len(its)))
				if peer == "serial" {
					mu.Lock()
					defer mu.Unlock()
				}
				time.Sleep(time.Millisecond)
			})
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 128 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					it := &testItem{}
					for {
						select {
						case <-stop:
							return
						default:
							b.Do(context.Background(), it)
						}
					}
				}()
			}
			time.Sleep(200 * time.Millisecond)
			batches.Store(0)
			items.Store(0)
			var at [5]int
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
				at[b.InFlight()]++
			}
			close(stop)
			wg.Wait()
			n := at[0] + at[1] + at[2] + at[3] + at[4]
			per := float64(items.Load()) / float64(max(1, batches.Load()))
			t.Logf("%s: 0..4 out in %v of %d samples; %.1f items per batch", peer, at, n, per)
			if per < 14 {
				t.Fatalf("%s peer: %.1f items per batch, want ≥ 14 of 16 (full batches)", peer, per)
			}
			if several := at[2] + at[3] + at[4]; peer == "parallel" && several < n*7/10 {
				t.Fatalf("parallel peer: more than one batch out in %d of %d samples, want ≥ 70%%", several, n)
			}
		})
	}
}

// TestBatcherBurstJoinsLoneCall: calls made runnable together on one P
// (a burst of requests read at once, one handler goroutine each) leave in
// one batch when the peer was idle: the call that finds no batch out
// yields once and takes what queued meanwhile, instead of leaving alone
// with the rest waiting for its round trip. The runtime's scheduler
// checks its global queue (where a yield puts the caller) first every
// 61st time, so a trial may split; most must not (without the yield,
// every trial split, 1 + 7). Right after a batch returned, a lone call
// leaves at once.
func TestBatcherBurstJoinsLoneCall(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const trials, burst = 20, 8
	var batches, sent atomic.Int32
	b := New(Config{MaxInFlight: 4, MaxItems: 64}, func(ctx context.Context, items []*testItem) {
		batches.Add(1)
		for _, it := range items {
			sent.Add(1)
			it.done.Add(1)
		}
	})
	run := func() int32 {
		batches.Store(0)
		items := make([]*testItem, burst)
		var wg sync.WaitGroup
		for i := range items {
			items[i] = &testItem{id: i}
			wg.Add(1)
			go func() { defer wg.Done(); b.Do(context.Background(), items[i]) }()
		}
		wg.Wait()
		for _, it := range items {
			if n := it.done.Load(); n != 1 {
				t.Fatalf("item %d sent %d times", it.id, n)
			}
		}
		return batches.Load()
	}
	whole := 0
	for range trials {
		time.Sleep(2 * batchIdleGap) // the peer idle since its last batch
		if run() == 1 {
			whole++
		}
	}
	if whole < trials/2 {
		t.Fatalf("a burst of %d left in one batch in %d of %d trials, want most", burst, whole, trials)
	}
	t.Logf("%d of %d bursts left in one batch", whole, trials)
	// Busy: a burst right after a batch returned does not wait (the
	// first call leaves alone), unless the scheduler's clock is so slow
	// that the gap passed anyway.
	split := 0
	for range trials {
		start := time.Now()
		b.Do(context.Background(), &testItem{})
		if n := run(); n > 1 {
			split++
		} else if time.Since(start) < batchIdleGap {
			t.Fatalf("a burst right after a batch returned left in %d batch, want the first call alone", n)
		}
	}
	if split == 0 {
		t.Fatalf("no burst right after a batch split: the yield is not limited to an idle peer")
	}
	if int(sent.Load()) != 2*trials*burst+trials || b.Queued() != 0 || b.InFlight() != 0 {
		t.Fatalf("sent %d, queued %d, active %d after every trial", sent.Load(), b.Queued(), b.InFlight())
	}
}
