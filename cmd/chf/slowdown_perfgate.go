//go:build perfgate_slowdown && linux

// A deliberate slowdown for checking that the performance gate catches a
// regression (make perf-gate-selftest). Built only with
// `-tags perfgate_slowdown`; an ordinary build has none of this.
//
// The OCP process does extra CPU work in proportion to its own: for every
// CPU second its other threads use serving requests, a burner thread spins
// for $PERFGATE_SLOWDOWN of a second (a fraction, "0.5", or a percentage,
// "50%"; default 50%). So the OCP costs that much more CPU per transaction
// whatever the rate and however the CGW batches its calls (a fixed cost
// per OCP request would shrink per transaction as batches grow), nothing
// needs calibrating against a clock on a noisy machine, and the burner
// competes for the same cores as the request path, as real extra work
// would. At 1000 TPS 50% measured +18% SUT CPU per transaction (the OCP's
// CPU went from 21% to 37.5% of a core: the burner's own wake-ups and the
// caches it shares count too).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// slowdownEnv names the environment variable holding the fraction. It is
// not CHF_*: the local testbed does not pass those on to the services.
const slowdownEnv = "PERFGATE_SLOWDOWN"

func init() {
	if len(os.Args) < 2 || os.Args[1] != "ocp" {
		return
	}
	frac, err := parseFraction(os.Getenv(slowdownEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "chf ocp: %v\n", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "chf ocp: perfgate_slowdown build: %.0f%% extra CPU on top of the OCP's own\n", 100*frac)
	if frac > 0 {
		go burn(frac)
	}
}

func parseFraction(v string) (float64, error) {
	if v == "" {
		return 0.5, nil
	}
	s, div := v, 1.0
	if strings.HasSuffix(s, "%") {
		s, div = strings.TrimSuffix(s, "%"), 100
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f/div > 10 {
		return 0, fmt.Errorf("cannot parse %s=%q: want a fraction (0.5) or a percentage (50%%) up to 1000%%", slowdownEnv, v)
	}
	return f / div, nil
}

// burn runs on its own OS thread: every 2 ms it adds frac times the CPU the
// rest of the process used since the last round to its debt, and spins
// until its own thread's CPU time has paid it.
func burn(frac float64) {
	runtime.LockOSThread()
	proc, self := processCPU(), threadCPU()
	debt := time.Duration(0)
	for range time.Tick(2 * time.Millisecond) {
		p, t := processCPU(), threadCPU()
		debt += time.Duration(frac * float64((p-proc)-(t-self)))
		for start := t; debt > 0; {
			spin(1 << 10)
			now := threadCPU()
			debt -= now - start
			start = now
		}
		proc, self = processCPU(), threadCPU()
	}
}

var spinSink uint64

// spin does n rounds of xorshift work the compiler cannot drop.
func spin(n int) {
	x := spinSink | 1
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	spinSink = x
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockThreadCPUTimeID is CLOCK_THREAD_CPUTIME_ID of Linux.
const clockThreadCPUTimeID = 3

func threadCPU() time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
