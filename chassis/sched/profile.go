package sched

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Profile is a named set of scheduler settings a process applies at
// start-up: the services' --runtime-profile (Runtime), loadgen
// floor's relays, and what the commands that start a local CHF pass to
// it. Its zero value is Production.
type Profile string

// The profiles.
const (
	// Production changes nothing beyond what every service sets
	// (GOMAXPROCS and the memory limit): Go's sysmon parks when idle and
	// the threads keep the kernel's default policy. The default.
	Production Profile = "production"
	// Lab is the workarounds for a machine whose idle-to-busy wake-ups
	// are expensive (a small virtual machine running client and server
	// together): sysmon kept polling (Reexec with SysmonAwake) and every
	// thread under SCHED_BATCH (Batch). Opt-in where a measurement on
	// the machine at hand shows it helps.
	Lab Profile = "lab"
)

// Profiles lists the profiles, the default first.
var Profiles = []Profile{Production, Lab}

// FlagName is the profile's flag, --runtime-profile.
const FlagName = "runtime-profile"

// ErrProfile is wrapped by the error for a name that is no profile.
var ErrProfile = errors.New("sched: unknown runtime profile")

// ParseProfile returns the profile named s.
func ParseProfile(s string) (Profile, error) {
	for _, p := range Profiles {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w %q: want production or lab", ErrProfile, s)
}

// String returns the profile's name; the zero value is Production's.
func (p Profile) String() string {
	if p == "" {
		return string(Production)
	}
	return string(p)
}

// Set parses s (flag.Value), so that a bad --runtime-profile is refused
// while the flags are parsed, with the flag's name.
func (p *Profile) Set(s string) error {
	v, err := ParseProfile(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Validate checks that p is a profile (or the zero value, Production).
func (p Profile) Validate() error {
	if p == "" {
		return nil
	}
	_, err := ParseProfile(string(p))
	return err
}

// SchedBatch says whether the profile runs the threads under SCHED_BATCH.
func (p Profile) SchedBatch() bool { return p == Lab }

// KeepSysmonAwake says whether the profile keeps sysmon from parking.
func (p Profile) KeepSysmonAwake() bool { return p == Lab }

// SysmonAwake is the GODEBUG setting that keeps the Go runtime's sysmon
// thread from parking: with schedtrace > 0 sysmon never enters its deep
// sleep (it backs off to 10 ms polls instead), and an interval of 2^31−1
// ms (24.8 days) makes the trace itself practically never print.
const SysmonAwake = "schedtrace=2147483647"

// SysmonAwakeEnv returns env (os.Environ's form) with SysmonAwake added
// to its GODEBUG (kept first, any other GODEBUG settings after it).
func SysmonAwakeEnv(env []string) []string {
	godebug := SysmonAwake
	out := make([]string, 1, len(env)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				godebug = v + "," + SysmonAwake
			}
			continue
		}
		out = append(out, kv)
	}
	out[0] = "GODEBUG=" + godebug
	return out
}

// Reexec re-executes this process's binary with its arguments and
// SysmonAwake added to GODEBUG, unless GODEBUG already sets a
// schedtrace (then, and after the re-exec, it returns nil at once). It
// returns only when nothing was to be done or the exec failed.
func Reexec() error {
	if strings.Contains(os.Getenv("GODEBUG"), "schedtrace=") {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find this binary to re-execute it: %w", err)
	}
	if err := syscall.Exec(exe, os.Args, SysmonAwakeEnv(os.Environ())); err != nil {
		return fmt.Errorf("cannot re-execute %s: %w", exe, err)
	}
	return nil
}
