package h2c

import (
	"sync"
	"testing"
)

// TestWorkersReuse: sequential work runs on one goroutine; concurrent work
// gets one each; stop ends them all (the package's leak check would catch
// a survivor).
func TestWorkersReuse(t *testing.T) {
	var p workers
	done := make(chan struct{})
	for range 100 {
		p.run(func() { done <- struct{}{} })
		<-done
		// Let the worker park itself before the next run.
		for {
			p.mu.Lock()
			n := len(p.idle)
			p.mu.Unlock()
			if n == 1 {
				break
			}
		}
	}
	if p.spawned != 1 {
		t.Fatalf("100 sequential runs started %d goroutines, want 1", p.spawned)
	}
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range 4 {
		wg.Add(1)
		p.run(func() { defer wg.Done(); <-gate })
	}
	close(gate)
	wg.Wait()
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
