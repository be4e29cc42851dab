package batcher

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// spin busy-waits for d: a peer's work, without the timer's granularity.
func spin(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

// BenchmarkBatcher: 64 callers per P through one Batcher to a fake peer
// whose round trip is a 50 µs wait (the network, another process) plus
// 200 ns of work per item, either independent per batch ("parallel": the
// peer has room, pipelining pays) or one batch at a time ("serial":
// batches only queue at the peer). Batches hold at most 64: the 128
// callers fill them (at the default 512 none would be full, so none
// would pipeline). Reports items per batch beside the time per call.
func BenchmarkBatcher(b *testing.B) {
	for _, peer := range []string{"parallel", "serial"} {
		b.Run(peer, func(b *testing.B) {
			var mu sync.Mutex
			var batches, items atomic.Int64
			bt := New(Config{MaxInFlight: 4, MaxItems: 64}, func(ctx context.Context, its []*testItem) {
				batches.Add(1)
				items.Add(int64(len(its)))
				if peer == "serial" {
					mu.Lock()
					defer mu.Unlock()
				}
				time.Sleep(50 * time.Microsecond)
				spin(time.Duration(len(its)) * 200 * time.Nanosecond)
			})
			b.ReportAllocs()
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				it := &testItem{}
				ctx := context.Background()
				for pb.Next() {
					bt.Do(ctx, it)
				}
			})
			if n := batches.Load(); n > 0 {
				b.ReportMetric(float64(items.Load())/float64(n), "items/batch")
			}
		})
	}
}

// BenchmarkBatcherLone: one caller at a time, the peer answering at once:
// every call finds no batch out and leaves alone, right after the last
// returned (so it does not yield). The Batcher's own cost per call.
func BenchmarkBatcherLone(b *testing.B) {
	bt := New(Config{MaxInFlight: 4}, func(ctx context.Context, its []*testItem) {})
	it, ctx := &testItem{}, context.Background()
	b.ReportAllocs()
	for b.Loop() {
		bt.Do(ctx, it)
	}
}

// TestBatcherDoAllocs: a call through the Batcher, alone or merged with
// others, allocates nothing in the steady state.
func TestBatcherDoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	bt := New(Config{MaxInFlight: 4}, func(ctx context.Context, its []*testItem) {
		runtime.Gosched()
	})
	ctx := context.Background()
	it := &testItem{}
	// Concurrent callers keep batches forming while the measured call runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := &testItem{}
			for {
				select {
				case <-stop:
					return
				default:
					bt.Do(ctx, x)
				}
			}
		}()
	}
	for range 1000 {
		bt.Do(ctx, it) // warm the pools
	}
	allocs := testing.AllocsPerRun(1000, func() { bt.Do(ctx, it) })
	close(stop)
	wg.Wait()
	if allocs > 0.01 { // a GC may empty a sync.Pool once in a while
		t.Fatalf("Batcher.Do allocates %.3f times per call, want 0", allocs)
	}
}
