package sched

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// runtimeHelperEnv makes TestApplyRuntimeHelper a child process applying
// the profile it names.
const runtimeHelperEnv = "CHASSIS_RUNTIME_HELPER"

// TestApplyRuntimeHelper is the child of TestApplyRuntime: it puts its
// threads back under the kernel's default policy, applies the runtime
// profile (which may re-execute it: the re-executed test binary runs this
// test again), then prints its GODEBUG and every thread's policy.
func TestApplyRuntimeHelper(t *testing.T) {
	profile := os.Getenv(runtimeHelperEnv)
	if profile == "" {
		t.Skip("the child of TestApplyRuntime")
	}
	if err := setPolicy(0); err != nil { // SCHED_OTHER: as a production pod starts
		t.Fatal(err)
	}
	ApplyRuntime(Runtime{Profile: Profile(profile)}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	fmt.Printf("GODEBUG=%s\n", os.Getenv("GODEBUG"))
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		p, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
		if errno == 0 {
			fmt.Printf("policy=%d\n", p)
		}
	}
}

// setPolicy puts every thread of this process under policy (priority 0).
func setPolicy(policy int) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		var prio int32
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&prio))); errno != 0 && errno != syscall.ESRCH {
			return fmt.Errorf("thread %d: %w", tid, errno)
		}
	}
	return nil
}

// TestApplyRuntime: the production profile neither re-executes the
// binary nor changes the threads' policy; lab re-executes it with
// sysmon kept awake (GODEBUG schedtrace) and runs every thread under
// SCHED_BATCH. Each in a child process, as a service starts.
func TestApplyRuntime(t *testing.T) {
	for _, tc := range []struct {
		profile    Profile
		schedtrace bool
		policy     string
	}{
		{Production, false, "policy=0"},
		{Lab, true, "policy=3"}, // SCHED_BATCH
	} {
		t.Run(string(tc.profile), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestApplyRuntimeHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), runtimeHelperEnv+"="+string(tc.profile), "GODEBUG=")
			if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
				// this race-built binary would sleep 1 s at each exit
				cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(g+" atexit_sleep_ms=0"))
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var godebug string
			var policies []string
			for _, line := range strings.Split(string(out), "\n") {
				if v, ok := strings.CutPrefix(line, "GODEBUG="); ok {
					godebug = v
				}
				if strings.HasPrefix(line, "policy=") {
					policies = append(policies, line)
				}
			}
			if got := strings.Contains(godebug, SysmonAwake); got != tc.schedtrace {
				t.Errorf("GODEBUG=%q after ApplyRuntime: re-executed with %s = %v, want %v", godebug, SysmonAwake, got, tc.schedtrace)
			}
			if len(policies) == 0 {
				t.Fatalf("the child printed no thread policy:\n%s", out)
			}
			for _, p := range policies {
				if p != tc.policy {
					t.Errorf("a thread has %s, want %s (%v)", p, tc.policy, policies)
					break
				}
			}
		})
	}
}
