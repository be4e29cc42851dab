// Package sched holds the Go runtime's and the schedulers' settings of a
// process: Runtime, every service's --gomaxprocs, --gogc and
// --runtime-profile, applied by ApplyRuntime (with Go's memory limit
// from the cgroup's); the runtime profiles (Profile); and what the lab
// profile does to a process: it sets the Linux scheduling policy of the
// process's threads (Batch) and keeps Go's sysmon awake (Reexec). The
// services (chassis/service) and loadgen floor's relays use it.
package sched

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// batchPolicy is Linux's SCHED_BATCH.
const batchPolicy = 3

// Batch puts every thread of this process under SCHED_BATCH (threads
// created afterwards inherit it from the thread that clones them, and it
// survives an exec): a thread it wakes does not preempt the thread
// running on that CPU, which finishes and blocks first.
func Batch() error {
	// Twice: a thread the runtime created while the first pass ran may
	// have been cloned from one not yet changed.
	for range 2 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("cannot list this process's threads: %w", err)
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if err := setSchedBatch(tid); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("cannot set SCHED_BATCH on thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

func setSchedBatch(tid int) error {
	var priority int32 // sched_param: SCHED_BATCH takes priority 0
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), batchPolicy, uintptr(unsafe.Pointer(&priority)))
	if errno != 0 {
		return errno
	}
	return nil
}
