package sched

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
)

// Runtime is the Go runtime's and the scheduler's part of a service's
// configuration (--gomaxprocs, --gogc, --runtime-profile), applied by
// ApplyRuntime at start-up.
type Runtime struct {
	// GOMAXPROCS is the number of Ps; 0 = Go's default: the CPUs of the
	// affinity mask, or the cgroup's CPU limit rounded up (at least 2),
	// whichever is less, re-read while the process runs (Go ≥ 1.25, cgroup
	// v1 and v2).
	GOMAXPROCS int
	// GOGC is the GC's target heap growth in percent (debug.SetGCPercent);
	// 0 = Go's default (the GOGC environment variable, else 100).
	GOGC int
	// Profile is the runtime profile (--runtime-profile): Production
	// (the default: nothing beyond GOMAXPROCS, GOGC and the memory limit)
	// or Lab (every thread under SCHED_BATCH, and the binary
	// re-executed once with GODEBUG=schedtrace=2147483647 so that Go's
	// sysmon polls instead of parking while the service is idle: the
	// first system call after an idle spell then wakes no thread). Lab is
	// a workaround for machines whose thread wake-ups are expensive; the
	// cost: a woken thread waits for the running one to block or for the
	// scheduler tick, which matters beside CPU-bound neighbours.
	Profile Profile
}

// RegisterFlags registers --gomaxprocs, --gogc and --runtime-profile, and
// the removed --sysmon-park and --sched-batch, whose use is an error
// naming --runtime-profile.
func (r *Runtime) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&r.GOMAXPROCS, "gomaxprocs", r.GOMAXPROCS,
		"Go's GOMAXPROCS for this service; 0 = Go's default (the CPUs of the affinity mask or the cgroup CPU limit rounded up, at least 2, whichever is less); in a pod set it from the CPU limit (the chart's downward-API CHF_GOMAXPROCS) or pin the pod")
	fs.IntVar(&r.GOGC, "gogc", r.GOGC,
		"the Go GC's heap growth target in percent for this service (as GOGC); higher = fewer collections and more memory; 0 = Go's default (the GOGC environment variable, else 100)")
	fs.Var(&r.Profile, FlagName,
		"runtime profile: production (Go's and the kernel's scheduler defaults: nothing beyond GOMAXPROCS, GOGC and the memory limit) or lab (workarounds for machines with expensive thread wake-ups: every thread under SCHED_BATCH, and the binary re-executed once with GODEBUG=schedtrace=2147483647 to keep Go's sysmon from parking); see chassis/README.md")
	fs.Var(removedFlag{"sysmon-park", "use --runtime-profile: production (the default) lets sysmon park, lab keeps it awake"}, "sysmon-park", "removed: use --runtime-profile")
	fs.Var(removedFlag{"sched-batch", "use --runtime-profile: production (the default) keeps the kernel's policy, lab runs under SCHED_BATCH"}, "sched-batch", "removed: use --runtime-profile")
}

// removedFlag is a flag that no longer exists: setting it, on the command
// line or through its CHF_* variable, is an error saying what to use
// instead. The usage and service.FlagString leave it out (IsRemoved).
type removedFlag struct{ name, instead string }

func (f removedFlag) IsRemoved() bool  { return true }
func (f removedFlag) String() string   { return "" }
func (f removedFlag) IsBoolFlag() bool { return true }
func (f removedFlag) Set(string) error {
	return fmt.Errorf("--%s was removed: %s", f.name, f.instead)
}

// MaxGOMAXPROCS bounds --gomaxprocs (Go's runtime aborts on a value that
// does not fit its int32).
const MaxGOMAXPROCS = 1024

// Validate checks --gomaxprocs, --gogc and --runtime-profile.
func (r *Runtime) Validate() error {
	if err := r.Profile.Validate(); err != nil {
		return fmt.Errorf("cannot use --%s: %w", FlagName, err)
	}
	if r.GOMAXPROCS < 0 || r.GOMAXPROCS > MaxGOMAXPROCS {
		return fmt.Errorf("cannot use --gomaxprocs %d: want 0 (Go's default) or 1..%d", r.GOMAXPROCS, MaxGOMAXPROCS)
	}
	if r.GOGC < 0 {
		return fmt.Errorf("cannot use --gogc %d: want 0 (Go's default) or a positive percentage", r.GOGC)
	}
	return nil
}

// ApplyRuntime applies the runtime profile, sets GOMAXPROCS and GOGC,
// and sets Go's memory limit from the cgroup's. With Lab it puts
// the service's threads under SCHED_BATCH and then re-executes the
// binary with the GODEBUG setting that keeps sysmon awake when it is not
// set yet (so it returns only when that is done, impossible or not
// wanted); with Production it does neither. A failed re-exec or
// policy change is logged and the service runs on.
func ApplyRuntime(r Runtime, log *slog.Logger) {
	batch := false
	if r.Profile.SchedBatch() {
		// Before a re-exec: the policy survives it, and every thread the
		// runtime creates later inherits it from the one cloning it.
		if err := Batch(); err != nil {
			log.Warn("cannot run under SCHED_BATCH; the kernel's default scheduling policy stays", "err", err)
		} else {
			batch = true
		}
	}
	if r.Profile.KeepSysmonAwake() {
		if err := Reexec(); err != nil {
			log.Warn("cannot re-execute to keep sysmon awake; it parks when idle", "err", err)
		}
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
	log.Info("go runtime", "gomaxprocs", runtime.GOMAXPROCS(0), "cpus", runtime.NumCPU(), "runtime_profile", r.Profile.String(), "gogc", gogc,
		"memlimit", memlimit, "sched_batch", batch, "godebug", os.Getenv("GODEBUG"))
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
