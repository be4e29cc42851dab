package h2c

import (
	"sync"
	"testing"
	"time"
)

// runFunc is a pool whose items are the work itself.
func runFunc(f func()) { f() }

// waitIdle waits (at most 5 s) until n workers are parked.
func waitIdle(t *testing.T, p *workers[func()], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		got := len(p.idle)
		p.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers idle after 5 s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// runAtOnce runs n items on p that all run at once (none finishes before
// all were handed out), and returns when they are done.
func runAtOnce(p *workers[func()], n int) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Add(1)
		p.run(func() { defer wg.Done(); <-gate })
	}
	close(gate)
	wg.Wait()
}

// TestWorkersReuse: sequential work runs on one goroutine; concurrent work
// gets one each; stop ends them all (the package's leak check would catch
// a survivor).
func TestWorkersReuse(t *testing.T) {
	p := workers[func()]{fn: runFunc, idleFor: time.Hour}
	done := make(chan struct{})
	for range 100 {
		p.run(func() { done <- struct{}{} })
		<-done
		// Let the worker park itself before the next run.
		waitIdle(t, &p, 1)
	}
	if p.spawned != 1 {
		t.Fatalf("100 sequential runs started %d goroutines, want 1", p.spawned)
	}
	runAtOnce(&p, 4)
	if p.spawned != 4 {
		t.Fatalf("4 concurrent runs after one idle worker started %d goroutines in all, want 4", p.spawned)
	}
	p.stop()
	ran := false
	p.run(func() { ran = true; close(done) })
	<-done
	if !ran {
		t.Fatal("run after stop did not run")
	}
}

// TestWorkersReap: a reap ends exactly the workers that sat idle through
// the whole period since the previous one, the least recently used; a
// worker used meanwhile survives. The reaps are called by hand (the
// timer's period is an hour) so that the test does not depend on timing.
func TestWorkersReap(t *testing.T) {
	p := workers[func()]{fn: runFunc, idleFor: time.Hour}
	defer p.stop()
	runAtOnce(&p, 3)
	waitIdle(t, &p, 3)

	p.reap() // the first period: none was idle through the one before
	waitIdle(t, &p, 3)

	done := make(chan struct{})
	p.run(func() { done <- struct{}{} }) // takes the most recently used
	<-done
	waitIdle(t, &p, 3)
	p.mu.Lock()
	used := p.idle[2]
	p.mu.Unlock()

	p.reap() // the two at the bottom sat idle through the period
	waitIdle(t, &p, 1)
	p.mu.Lock()
	survivor := p.idle[0]
	p.mu.Unlock()
	if survivor != used {
		t.Fatal("the reap ended the worker used in its period")
	}
	p.reap()
	waitIdle(t, &p, 0)
	if p.spawned != 3 {
		t.Fatalf("spawned %d, want 3", p.spawned)
	}
	p.run(func() { done <- struct{}{} })
	<-done
	if p.spawned != 4 {
		t.Fatalf("a run after every worker was reaped started %d goroutines in all, want 4", p.spawned)
	}
}

// TestWorkersReaperTimer: with a short period the timer itself ends an idle
// worker.
func TestWorkersReaperTimer(t *testing.T) {
	p := workers[func()]{fn: runFunc, idleFor: 10 * time.Millisecond}
	defer p.stop()
	done := make(chan struct{})
	p.run(func() { close(done) })
	<-done
	waitIdle(t, &p, 1)
	waitIdle(t, &p, 0)
}

// BenchmarkWorkers hands work to a connection's pool from one goroutine (the
// connection's reader) with up to 64 items running at once.
func BenchmarkWorkers(b *testing.B) {
	p := workers[func()]{fn: runFunc}
	defer p.stop()
	sem := make(chan struct{}, 64)
	work := func() { <-sem }
	b.ReportAllocs()
	for b.Loop() {
		sem <- struct{}{}
		p.run(work)
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
}
