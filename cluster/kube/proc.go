package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A process of the cluster runs detached from the command that started it
// (its own session), so that `cluster up` can return and `cluster down`,
// another invocation, can stop it: its pid is in <dir>/run/<name>.pid and
// its output in <dir>/logs/<name>.log. Every command line holds the
// cluster's directory, which is how a pid is known to be still ours.

// start runs path with args as process name; netns, when set, is the
// network namespace (a path under /run/netns) it runs in, entered with
// nsenter so that it keeps the host's mount namespace.
func start(dir, name, netns, path string, args ...string) error {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("cannot create the log directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
		return fmt.Errorf("cannot create the run directory: %w", err)
	}
	logPath := filepath.Join(dir, "logs", name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", logPath, err)
	}
	defer f.Close()
	if netns != "" {
		args = append([]string{"--net=" + netns, "--", path}, args...)
		path = "nsenter"
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it dies while this process lives; nothing waits for it
	// otherwise (it outlives `cluster up`).
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(pidFile(dir, name), []byte(strconv.Itoa(pid)), 0o644)
}

func pidFile(dir, name string) string { return filepath.Join(dir, "run", name+".pid") }

// pidOf returns the pid of process name when it still runs as ours.
func pidOf(dir, name string) (int, bool) {
	b, err := os.ReadFile(pidFile(dir, name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, false
	}
	return pid, ours(pid, dir)
}

// ours reports whether pid runs with dir in its command line.
func ours(pid int, dir string) bool {
	cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
			return false // a zombie: it has ended
		}
	}
	return bytes.Contains(cl, []byte(dir))
}

// running reports whether process name, started by this cluster, has not
// ended: its pid exists and is not a zombie. Its command line is not
// checked, unlike ours: while a process execs (nsenter exec'ing the
// kubelet, or the first exec after fork), /proc/<pid>/cmdline reads empty
// for a moment, and a wait that began right after the start took that for
// an exit ("kubelet exited", "etcd exited" on a busy machine).
func running(dir, name string) bool {
	b, err := os.ReadFile(pidFile(dir, name))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i > 0 && i+2 < len(st) && st[i+2] != 'Z'
}

// stop ends process name: SIGTERM, then SIGKILL after grace.
func stop(dir, name string, grace time.Duration) {
	if pid, ok := pidOf(dir, name); ok {
		kill(pid, dir, grace)
	}
	_ = os.Remove(pidFile(dir, name))
}

func kill(pid int, dir string, grace time.Duration) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !ours(pid, dir) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 40 && ours(pid, dir); i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// oursAll lists every process whose command line holds dir (processes the
// cluster started, and the containerd shims serving its containers), but
// this process and its ancestors (`cluster down --dir D` run by make or a
// shell holds D in its command line too).
func oursAll(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	mine := ancestors()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || mine[pid] {
			continue
		}
		if ours(pid, dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// logTail is the end of process name's log, for error messages.
func logTail(dir, name string, n int) string {
	b, _ := os.ReadFile(filepath.Join(dir, "logs", name+".log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitFor polls f until it succeeds, ctx ends or d passes; name says what
// is waited for; proc, when set, is the process whose exit ends the wait
// early (with its log's tail).
func waitFor(ctx context.Context, dir, what, proc string, d time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var err error
	for {
		if err = f(); err == nil {
			return nil
		}
		if proc != "" && !running(dir, proc) {
			return fmt.Errorf("%s exited while waiting for %s: %v\n%s", proc, what, err, logTail(dir, proc, 2000))
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not ready after %v: %v", what, d, err)
			}
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// run runs a short command and returns its combined output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// ancestors is this process and its ancestors.
func ancestors() map[int]bool {
	out := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !out[pid]; {
		out[pid] = true
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		i := bytes.LastIndexByte(st, ')')
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 2 {
			break
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return out
}
