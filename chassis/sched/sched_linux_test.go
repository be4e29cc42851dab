package sched

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

// schedPolicy returns the scheduling policy of thread tid.
func schedPolicy(tid int) (int, error) {
	p, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(p), nil
}

// TestBatch: every thread of the process runs under SCHED_BATCH
// afterwards, threads created later too.
func TestBatch(t *testing.T) {
	if err := Batch(); err != nil {
		t.Fatal(err)
	}
	// Force new threads: goroutines locked to their threads while the
	// others block in a system call.
	done := make(chan struct{})
	ready := make(chan struct{})
	for range 4 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ready <- struct{}{}
			<-done
		}()
		<-ready
	}
	defer close(done)
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip(err)
	}
	if len(ents) < 4 {
		t.Fatalf("only %d threads", len(ents))
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		p, err := schedPolicy(tid)
		if err == syscall.ESRCH {
			continue
		}
		if err != nil || p != batchPolicy {
			t.Errorf("thread %d: policy %d (%v), want SCHED_BATCH (%d)", tid, p, err, batchPolicy)
		}
	}
}
