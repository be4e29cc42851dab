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
	b.limitA.Store(int32(n))
	b.mu.Unlock()
}

func (b *Batcher[T]) active0() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active
}

// simPeer drives v as a Batcher would with limit batches always out at a
// peer: rtt(limit) is each batch's round trip and items(limit) its size;
// the limit batches return evenly spread over one round trip. It runs n
// round trips from limit, checking the limit stays in 1..max, and returns
// the limit then and in how many of those round trips it was at want.
func simPeer(t *testing.T, v *inflight, now *time.Time, limit, max, n, want int, demand bool, rtt func(limit int) time.Duration, items func(limit int) int) (int, int) {
	t.Helper()
	at := 0
	for range n {
		*now = now.Add(rtt(limit) / time.Duration(limit))
		limit = v.sample(items(limit), *now, limit, max, demand)
		if limit < 1 || limit > max {
			t.Fatalf("limit %d outside 1..%d", limit, max)
		}
		if limit == want {
			at++
		}
	}
	return limit, at
}

// TestInflightLimit: the in-flight limit climbs while full batches wait
// here and each step pays in items per second (a peer with room answers
// as fast with more out), not without demand; it stays at 1 for a peer
// that serves one batch at a time, whether the round trip grows with the
// limit or the batches get smaller, with tries that get rarer; it settles
// at 2 for a peer that serves two at once, and comes back to 1 when the
// demand goes.
func TestInflightLimit(t *testing.T) {
	const ms = time.Millisecond
	const n = 20000
	now := time.Unix(0, 0)
	full := func(int) int { return 64 }
	flat := func(int) time.Duration { return ms }
	// A peer with room: the round trip does not depend on the limit.
	var v inflight
	limit, at := simPeer(t, &v, &now, 1, 4, n, 4, true, flat, full)
	if limit != 4 || at < n*98/100 || v.undone != 0 {
		t.Fatalf("flat RTT with demand: limit %d, at 4 in %d of %d round trips, %d steps undone; want 4, ≥ 98%%, 0", limit, at, n, v.undone)
	}
	// The demand falls to what one batch out carries (64 items per
	// round trip, split between the batches out): the limit comes back
	// to 1.
	if limit, _ = simPeer(t, &v, &now, limit, 4, n, 1, false, flat, func(l int) int { return 64 / l }); limit != 1 {
		t.Fatalf("flat RTT after the demand went: limit %d, want 1", limit)
	}
	// No full batch waiting here: nothing to gain, the limit stays.
	v = inflight{}
	if limit, at = simPeer(t, &v, &now, 1, 4, n, 1, false, flat, full); limit != 1 || at != n || v.tried != 0 {
		t.Fatalf("flat RTT without demand: limit %d, at 1 in %d of %d, %d steps tried; want 1, all, 0", limit, at, n, v.tried)
	}
	// A peer that serves one batch at a time: the round trip is the limit
	// times the service time; every added batch only waits there. The
	// step up is tried, found not to pay and undone, more and more rarely.
	serial := func(limit int) time.Duration { return time.Duration(limit) * ms }
	v = inflight{}
	limit, at = simPeer(t, &v, &now, 1, 4, n, 1, true, serial, full)
	if at < n*97/100 || v.tried == 0 || v.undone+1 < v.tried || v.tried > 10 {
		t.Fatalf("serial peer: at 1 in %d of %d round trips, %d steps tried, %d undone; want ≥ 97%%, all undone, ≤ 10", at, n, v.tried, v.undone)
	}
	// Same, with batches that get smaller as more are out (the calls
	// waiting here split between them) and a service time of 1 ms per
	// batch plus 20 µs per item: items per second fall, the step is
	// undone.
	split := func(limit int) int { return 128 / (limit + 1) }
	splitRTT := func(l int) time.Duration {
		return time.Duration(l) * (ms + time.Duration(split(l))*20*time.Microsecond)
	}
	v = inflight{}
	limit, at = simPeer(t, &v, &now, 1, 4, n, 1, true, splitRTT, split)
	if at < n*97/100 || v.tried == 0 || v.undone+1 < v.tried {
		t.Fatalf("serial peer, smaller batches: at 1 in %d of %d round trips, %d steps tried, %d undone; want ≥ 97%%, all undone", at, n, v.tried, v.undone)
	}
	// A peer that serves two batches at once: the limit settles at 2.
	two := func(limit int) time.Duration { return time.Duration(max(2, limit)) * ms / 2 }
	v = inflight{}
	if limit, at = simPeer(t, &v, &now, 1, 4, n, 2, true, two, full); at < n*95/100 {
		t.Fatalf("peer serving two at once: limit 2 in %d of %d round trips, want ≥ 95%%", at, n)
	}
	// A peer with room that then serves one batch at a time: the limit
	// comes down (the steps down carry as much) to 1.
	v = inflight{}
	limit, _ = simPeer(t, &v, &now, 1, 4, 2000, 4, true, flat, full)
	if limit, at = simPeer(t, &v, &now, limit, 4, n, 1, false, serial, full); limit != 1 || at < n*9/10 {
		t.Fatalf("peer turned serial: limit %d, at 1 in %d of %d round trips; want 1, ≥ 90%%", limit, at, n)
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

// TestBatcherLimitConverges: 128 callers through one Batcher (at most 4
// batches out) to a fake peer whose round trip is a 1 ms wait plus 200 ns
// of work per item. A peer with room for every batch ("parallel") has
// the limit above 1 for most of the run; one that serves one batch at a
// time ("serial", a mutex around the wait) has it at 1, apart from the
// raises tried and undone.
func TestBatcherLimitConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 × 1.5 s")
	}
	for _, peer := range []string{"parallel", "serial"} {
		t.Run(peer, func(t *testing.T) {
			var mu sync.Mutex
			b := NewBatcher(BatchConfig{MaxInFlight: 4}, func(ctx context.Context, its []*testItem) {
				if peer == "serial" {
					mu.Lock()
					defer mu.Unlock()
				}
				time.Sleep(time.Millisecond)
				spin(time.Duration(len(its)) * 200 * time.Nanosecond)
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
			time.Sleep(500 * time.Millisecond) // converge
			var at [5]int
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
				at[b.InFlightLimit()]++
			}
			close(stop)
			wg.Wait()
			b.mu.Lock()
			v := b.probe
			b.mu.Unlock()
			n := at[1] + at[2] + at[3] + at[4]
			t.Logf("%s: limit 1..4 in %v of %d samples; %d raises tried, %d undone", peer, at[1:], n, v.tried, v.undone)
			switch {
			case peer == "serial" && at[1] < n*8/10:
				t.Fatalf("serial peer: limit 1 in %d of %d samples, want ≥ 80%%", at[1], n)
			case peer == "parallel" && n-at[1] < n*8/10:
				t.Fatalf("parallel peer: limit above 1 in %d of %d samples, want ≥ 80%%", n-at[1], n)
			}
		})
	}
}
