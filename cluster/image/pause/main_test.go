package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is the pause binary when this variable is set: the tests
// start it as a separate process.
const asPause = "PAUSE_TEST_AS_PAUSE"

func TestMain(m *testing.M) {
	if os.Getenv(asPause) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// started is a pause process whose signal handlers are installed.
type started struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	done   chan error
}

// start runs name with args (the pause, or a shell that execs it) and
// waits for the pause's "not PID 1" line, printed once SIGTERM is handled.
func start(t *testing.T, name string, args ...string) *started {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), asPause+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &started{cmd: cmd, stdout: bufio.NewReader(stdout), done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stderr).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
	})
	select {
	case line := <-ready:
		if !strings.Contains(line, "not PID 1") {
			t.Fatalf("pause's first stderr line: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not start within 10s")
	}
	return s
}

// stop sends SIGTERM and returns the exit error (nil for status 0).
func (s *started) stop(t *testing.T) error {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not exit within 10s of SIGTERM")
		return nil
	}
}

func TestExitsZeroOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		s := start(t, os.Args[0])
		if err := s.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-s.done:
			s.done <- err
			if err != nil {
				t.Errorf("after %v: %v, want exit 0", sig, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("pause did not exit within 10s of %v", sig)
		}
	}
}

// procState returns a process's parent and state letter (R, S, Z, ...)
// from /proc, and false once the process is gone.
func procState(t *testing.T, pid int) (ppid int, state string, ok bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return 0, "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return ppid, f[0], true
}

// A child the pause inherits (a shell forks sleep, then execs the pause in
// its own process) is reaped when it exits, not left a zombie.
func TestReapsInheritedChild(t *testing.T) {
	s := start(t, "/bin/sh", "-c", `sleep 2 & echo $!; exec "$0"`, os.Args[0])
	line, err := s.stdout.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child pid: %q", line)
	}
	// Gone already (a loaded machine ran past its 2 s): only its parent,
	// the pause since the shell exec'd it, can have reaped it; a parent
	// that does not reap leaves a zombie, which procState still sees.
	if ppid, _, ok := procState(t, child); ok && ppid != s.cmd.Process.Pid {
		t.Fatalf("sleep %d: parent %d, want the pause %d", child, ppid, s.cmd.Process.Pid)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, state, ok := procState(t, child)
		if !ok {
			break // reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d still in state %s 10s after it was due to exit", child, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("after SIGTERM: %v, want exit 0", err)
	}
}

// The check above can fail: a parent that does not reap (sleep) leaves
// the same inherited child a zombie.
func TestZombieWithoutReaper(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `sleep 0.1 & echo $!; exec sleep 5`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child pid: %q", line)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, state, ok := procState(t, child)
		if !ok {
			t.Fatalf("child %d vanished without a reaper", child)
		}
		if state == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d in state %s, never a zombie", child, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestArgs(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-v"}, &out, &errb); code != 0 || out.String() != "pause dev\n" {
		t.Errorf("-v: exit %d, stdout %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"--bogus"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `"--bogus"`) {
		t.Errorf("--bogus: exit %d, stderr %q", code, errb.String())
	}
}
