package chassis

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/chf-testbed/testbed/chassis/sched"
)

// SysmonAwake is the GODEBUG setting that keeps the runtime's sysmon
// thread from parking: with schedtrace > 0 sysmon never enters its deep
// sleep (it backs off to 10 ms polls instead), and an interval of 2^31−1
// ms (24.8 days) makes the trace itself practically never print.
const SysmonAwake = "schedtrace=2147483647"

// Runtime is the Go runtime's and the scheduler's part of a service's
// configuration (--gomaxprocs, --sysmon-park, --gogc, --sched-batch),
// applied by ApplyRuntime at start-up.
type Runtime struct {
	// GOMAXPROCS is the number of Ps; 0 = Go's default: the CPUs of the
	// affinity mask, or the cgroup's CPU limit rounded up (at least 2),
	// whichever is less, re-read while the process runs (Go ≥ 1.25, cgroup
	// v1 and v2).
	GOMAXPROCS int
	// SysmonPark keeps Go's default of parking the sysmon thread while
	// every P is idle. Then the first system call after each idle spell
	// wakes it (a futex wake and two context switches on another thread),
	// which at light load is once per request per process; false keeps
	// sysmon polling (at most every 10 ms when idle) instead, by
	// re-executing the binary once with GODEBUG=schedtrace=2147483647.
	SysmonPark bool
	// GOGC is the GC's target heap growth in percent (debug.SetGCPercent);
	// 0 = Go's default (the GOGC environment variable, else 100).
	GOGC int
	// NoSchedBatch keeps the kernel's default scheduling policy for the
	// service's threads (--sched-batch=false). By default they run under
	// SCHED_BATCH (Linux): a thread the service wakes (its peer's answer
	// arrived) does not preempt the thread running on that CPU, which
	// finishes what it was doing and blocks first. Every hop of a
	// transaction wakes a peer, so this saves a context switch and its
	// cache refill per hop: at 1,000 TPS on the 2-core VM the SUT's CPU
	// per transaction fell from 465 to 401 µs (medians of 3 alternated
	// runs), `loadgen floor`'s four Go relays from 231 to 199 µs. The
	// cost: a woken thread waits for the running one to block or for the
	// scheduler tick, which matters only beside CPU-bound neighbours.
	NoSchedBatch bool
}

// RegisterFlags registers --gomaxprocs, --sysmon-park, --gogc and
// --sched-batch.
func (r *Runtime) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&r.GOMAXPROCS, "gomaxprocs", r.GOMAXPROCS,
		"Go's GOMAXPROCS for this service; 0 = Go's default (the CPUs of the affinity mask or the cgroup CPU limit rounded up, at least 2, whichever is less); in a pod set it from the CPU limit (the chart's downward-API CHF_GOMAXPROCS) or pin the pod")
	fs.BoolVar(&r.SysmonPark, "sysmon-park", r.SysmonPark,
		"let Go park its sysmon thread while the service is idle (Go's default); false keeps it polling, which spares every request at light load a thread wake-up (re-executes the binary once with GODEBUG=schedtrace=2147483647)")
	fs.IntVar(&r.GOGC, "gogc", r.GOGC,
		"the Go GC's heap growth target in percent for this service (as GOGC); higher = fewer collections and more memory; 0 = Go's default (the GOGC environment variable, else 100)")
	fs.Var(notBool{&r.NoSchedBatch}, "sched-batch",
		"run the service's threads under Linux's SCHED_BATCH policy: a woken thread does not preempt the one running, so each hop's wake-up of its peer costs no extra context switch (less CPU per transaction at light load); false keeps the kernel's default policy, e.g. beside CPU-bound neighbours on a shared node")
}

// notBool is a boolean flag that stores its negation, so that the field's
// zero value is the flag's default, true.
type notBool struct{ p *bool }

func (b notBool) String() string {
	if b.p == nil {
		return "false"
	}
	return strconv.FormatBool(!*b.p)
}

func (b notBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.p = !v
	return nil
}

func (b notBool) IsBoolFlag() bool { return true }

// MaxGOMAXPROCS bounds --gomaxprocs (Go's runtime aborts on a value that
// does not fit its int32).
const MaxGOMAXPROCS = 1024

// Validate checks --gomaxprocs.
func (r *Runtime) Validate() error {
	if r.GOMAXPROCS < 0 || r.GOMAXPROCS > MaxGOMAXPROCS {
		return fmt.Errorf("cannot use --gomaxprocs %d: want 0 (Go's default) or 1..%d", r.GOMAXPROCS, MaxGOMAXPROCS)
	}
	if r.GOGC < 0 {
		return fmt.Errorf("cannot use --gogc %d: want 0 (Go's default) or a positive percentage", r.GOGC)
	}
	return nil
}

// ApplyRuntime puts the service's threads under SCHED_BATCH (unless
// r.NoSchedBatch), sets GOMAXPROCS and, unless r.SysmonPark, re-executes
// the binary with the GODEBUG setting that keeps sysmon awake when it is
// not set yet (so it returns only when that is done, impossible or not
// wanted). A failed re-exec or policy change is logged and the service
// runs on.
func ApplyRuntime(r Runtime, log *slog.Logger) {
	batch := false
	if !r.NoSchedBatch {
		// Before a re-exec: the policy survives it, and every thread the
		// runtime creates later inherits it from the one cloning it.
		if err := sched.Batch(); err != nil {
			log.Warn("cannot run under SCHED_BATCH; the kernel's default scheduling policy stays", "err", err)
		} else {
			batch = true
		}
	}
	if !r.SysmonPark && !strings.Contains(os.Getenv("GODEBUG"), "schedtrace=") {
		exe, err := os.Executable()
		if err == nil {
			godebug := SysmonAwake
			if v := os.Getenv("GODEBUG"); v != "" {
				godebug = v + "," + SysmonAwake
			}
			env := []string{"GODEBUG=" + godebug}
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GODEBUG=") {
					env = append(env, kv)
				}
			}
			err = syscall.Exec(exe, os.Args, env)
		}
		log.Warn("cannot re-execute to keep sysmon awake; it parks when idle", "err", err)
	}
	if r.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(r.GOMAXPROCS)
	}
	gogc := debug.SetGCPercent(100)
	if r.GOGC > 0 {
		gogc = r.GOGC
	}
	debug.SetGCPercent(gogc)
	if os.Getenv("GOMEMLIMIT") == "" {
		if l := cgroupMemoryLimit("/sys/fs/cgroup"); l > 0 {
			debug.SetMemoryLimit(l / 10 * 9)
		}
	}
	memlimit := debug.SetMemoryLimit(-1) // the limit in force, ours or GOMEMLIMIT's
	if memlimit == math.MaxInt64 {
		memlimit = -1 // none
	}
	log.Info("go runtime", "gomaxprocs", runtime.GOMAXPROCS(0), "cpus", runtime.NumCPU(), "sysmon_park", r.SysmonPark, "gogc", gogc,
		"memlimit", memlimit, "sched_batch", batch)
}

// cgroupMemoryLimit returns the memory limit of the cgroup the process
// sees at root (cgroup v2 memory.max, else v1 memory/memory.limit_in_bytes:
// in a container, its own), or 0 when there is none or it cannot be read.
// ApplyRuntime sets Go's soft memory limit to 90% of it (unless GOMEMLIMIT
// is set), so that a service whose heap grows (a large cache, a high
// --gogc) collects more often near its pod's limit instead of being killed.
func cgroupMemoryLimit(root string) int64 {
	for _, f := range []string{root + "/memory.max", root + "/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 { // v1 writes about 2^63 for none
			return 0
		}
		return n
	}
	return 0
}
