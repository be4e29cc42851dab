//go:build linux

package freeze

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fifoPriority is the probe threads' SCHED_FIFO priority: the highest,
// above the kernel's threaded interrupts (50).
const fifoPriority = 99

// Serve runs the probe (the child's side): a thread pinned to each CPU of
// this process's affinity mask under SCHED_FIFO, each sleeping Period and
// counting how late it woke. It writes "ready PERIOD_NS THRESHOLD_NS
// CPUS" to out once every thread runs (or "unavailable REASON" and
// returns an error wrapping ErrUnavailable), then answers each newline
// read from in with one line of the figures since the previous answer,
// until in ends or ctx is done.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		fmt.Fprintf(out, "unavailable cannot read the CPU affinity: %v\n", err)
		return fmt.Errorf("%w: cannot read the CPU affinity: %v", ErrUnavailable, err)
	}
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	// A P for each probe thread and two for the goroutine that answers.
	runtime.GOMAXPROCS(len(cpus) + 2)
	probes := make([]cpuProbe, len(cpus))
	ready := make(chan error, len(cpus))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probes[i].run(c, ready, stop)
		}()
	}
	var failed error
	for range cpus {
		if err := <-ready; err != nil && failed == nil {
			failed = err
		}
	}
	defer wg.Wait()
	defer close(stop)
	if failed != nil {
		fmt.Fprintf(out, "unavailable %v\n", failed)
		return fmt.Errorf("%w: %v", ErrUnavailable, failed)
	}
	names := make([]string, len(cpus))
	for i, c := range cpus {
		names[i] = strconv.Itoa(c)
	}
	if _, err := fmt.Fprintf(out, "ready %d %d %s\n", Period, Threshold, strings.Join(names, ",")); err != nil {
		return fmt.Errorf("cannot write to the parent: %w", err)
	}
	var line []byte
	var werr error
	answer := func() {
		line = append(line[:0], 's')
		for i := range probes {
			c := probes[i].take()
			line = fmt.Appendf(line, " %d:%d:%d:%d:%d:%d", cpus[i], c.wakeups, c.count, c.over10, c.worst, c.frozen)
		}
		line = append(line, '\n')
		if _, err := out.Write(line); err != nil && werr == nil {
			werr = fmt.Errorf("cannot write to the parent: %w", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- serveAsks(in, answer) }()
	select {
	case err := <-done:
		if err == nil {
			err = werr
		}
		return err
	case <-ctx.Done():
		return nil
	}
}

// counts are one CPU's figures since the last take, in nanoseconds.
type counts struct {
	wakeups, count, over10 int64
	worst, frozen          int64
}

// cpuProbe is the probe thread of one CPU; mu guards its counts (taken
// once per answer, so the real-time thread seldom waits for it).
type cpuProbe struct {
	mu sync.Mutex
	c  counts
}

func (p *cpuProbe) take() counts {
	p.mu.Lock()
	c := p.c
	p.c = counts{}
	p.mu.Unlock()
	return c
}

// run pins its thread to cpu under SCHED_FIFO, says so on ready, and
// measures until stop is closed. The goroutine keeps its thread to
// itself and never unlocks it, so the thread ends with it.
func (p *cpuProbe) run(cpu int, ready chan<- error, stop <-chan struct{}) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		ready <- fmt.Errorf("cannot pin a thread to CPU %d: %w", cpu, err)
		return
	}
	// Threads the runtime later clones from this one start under the
	// normal policy again (SCHED_RESET_ON_FORK).
	param := int32(fifoPriority)
	if _, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, unix.SCHED_FIFO|unix.SCHED_RESET_ON_FORK, uintptr(unsafe.Pointer(&param))); errno != 0 {
		ready <- fmt.Errorf("cannot run a thread under SCHED_FIFO (it needs root or CAP_SYS_NICE): %w", errno)
		return
	}
	ready <- nil
	period := int64(Period)
	var now, deadline unix.Timespec
	for {
		select {
		case <-stop:
			return
		default:
		}
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
			return // cannot happen on Linux; the answers then show no wake-ups
		}
		deadline = unix.NsecToTimespec(now.Nano() + period)
		for {
			err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &deadline, nil)
			if err != unix.EINTR {
				break
			}
		}
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
		late := now.Nano() - deadline.Nano()
		p.mu.Lock()
		p.c.wakeups++
		if late >= int64(Threshold) {
			p.c.count++
			p.c.frozen += late
			p.c.worst = max(p.c.worst, late)
			if late >= int64(Long) {
				p.c.over10++
			}
		}
		p.mu.Unlock()
	}
}

// setProcAttr keeps the probe out of the terminal's process group (a
// Ctrl-C is the parent's to handle) and kills it if the parent dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
