package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/loadgen/internal/tail"
)

var pid = os.Getpid()

// proc is one process the lab started in a namespace, in its own process
// group, killed with the lab if the lab dies (Pdeathsig).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	tail *tail.Buf
}

// Pid is the process id (ip netns exec and taskset exec in place, so it is
// the service's own).
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// command returns `ip netns exec NS [taskset -c CPUS] ARGS...` with the
// lab's process attributes; env adds variables.
func command(ns, cpus string, env []string, args ...string) *exec.Cmd {
	full := []string{"netns", "exec", ns}
	if cpus != "" {
		full = append(full, "taskset", "-c", cpus)
	}
	cmd := exec.Command("ip", append(full, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The children read their flags, not the lab's CHF_* or GOMAXPROCS.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHF_") && !strings.HasPrefix(kv, "GOMAXPROCS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// start starts a long-running process; logs receives its output prefixed
// by name.
func start(name, ns, cpus string, env []string, logs io.Writer, args ...string) (*proc, error) {
	cmd := command(ns, cpus, env, args...)
	t := &tail.Buf{}
	w := io.MultiWriter(t, &prefixWriter{prefix: name + " | ", out: logs})
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), tail: t}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
	}
}

// exited returns an error naming the process and its last output if it
// has exited, else nil.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s (pid %d) exited: %v: %s", p.name, p.Pid(), p.err, p.tail.String())
	default:
		return nil
	}
}

// runOut runs a short command in ns to completion and returns its stdout;
// ctx cancellation sends SIGTERM to its group, then SIGKILL.
func runOut(ctx context.Context, ns, cpus string, env []string, stderr io.Writer, args ...string) ([]byte, error) {
	cmd := command(ns, cpus, env, args...)
	var out bytes.Buffer
	t := &tail.Buf{}
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(t, stderr)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", args[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
		return out.Bytes(), ctx.Err()
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s failed: %w: %s", strings.Join(args, " "), err, t.String())
	}
	return out.Bytes(), nil
}

// prefixWriter writes each line to out prefixed; out is shared, so writes
// are serialised.
type prefixWriter struct {
	prefix string
	out    io.Writer
	mu     sync.Mutex
	part   []byte
}

var logMu sync.Mutex

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		logMu.Lock()
		_, _ = io.WriteString(w.out, w.prefix+string(w.part[:i+1]))
		logMu.Unlock()
		w.part = w.part[i+1:]
	}
	return len(p), nil
}
