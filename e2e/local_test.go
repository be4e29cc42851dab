package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

var (
	buildOnce sync.Once
	chfBin    string
	buildErr  error
)

// buildCHF builds cmd/chf once per test binary.
func buildCHF(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "chf-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		chfBin = filepath.Join(dir, "chf")
		cmd := exec.Command("go", "build", "-o", chfBin, "github.com/chf-testbed/testbed/cmd/chf")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("cannot build cmd/chf: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return chfBin
}

var readyLine = regexp.MustCompile(`nchf (\S+) balance (\S+)\{supi\}(?: diameter \S+)? pids map\[(.*)\]`)

type localRun struct {
	cmd     *exec.Cmd
	nchfURL string
	balURL  string
	pids    map[string]int
	stderr  *syncBuffer
	exited  chan struct{}
	waitErr error
}

// startLocal runs `chf local` and waits for its ready line.
func startLocal(t *testing.T, args ...string) *localRun {
	t.Helper()
	return startLocalBin(t, buildCHF(t), args...)
}

// startLocalBin runs `bin local` and waits for its ready line.
func startLocalBin(t *testing.T, bin string, args ...string) *localRun {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"local"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	lr := &localRun{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{}), pids: map[string]int{}}
	cmd.Stderr = lr.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		// Drain stdout fully before Wait (os/exec requirement).
		lr.waitErr = cmd.Wait()
		close(lr.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-lr.exited:
		default:
			cmd.Process.Signal(syscall.SIGKILL)
			<-lr.exited
		}
	})
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				<-lr.exited
				t.Fatalf("chf local exited before ready: %v\n%s", lr.waitErr, lr.stderr.String())
			}
			m := readyLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			lr.nchfURL, lr.balURL = m[1], m[2]
			for _, kv := range strings.Fields(m[3]) {
				name, pid, _ := strings.Cut(kv, ":")
				lr.pids[name], _ = strconv.Atoi(pid)
			}
			go func() {
				for range lines {
				}
			}()
			return lr
		case <-timeout:
			t.Fatalf("chf local not ready after 3 minutes:\n%s", lr.stderr.String())
		}
	}
}

// alive reports whether pid exists (zombies included).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func (lr *localRun) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-lr.exited:
	case <-time.After(d):
		t.Fatalf("chf local did not exit within %v:\n%s", d, lr.stderr.String())
	}
}

func TestLocalProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary")
	}
	lr := startLocal(t, "--accounts", "1000", "--nchf", "127.0.0.1:0", "--quiet")
	for _, name := range []string{"aslite", "abm", "ocp", "cgw"} {
		if lr.pids[name] == 0 || !alive(lr.pids[name]) {
			t.Fatalf("%s not running: pids %v", name, lr.pids)
		}
	}
	// One data session over HTTP/2 prior knowledge.
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	post := func(url string, body []byte) (*http.Response, []byte) {
		t.Helper()
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("HTTP/%d", resp.ProtoMajor)
		}
		return resp, b
	}
	s := "imsi-001010000001000" // the last provisioned account
	resp, b := post(lr.nchfURL, req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`))
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	ref := resp.Header.Get("Location")
	if resp, b = post(ref+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":3000000}]}`)); resp.StatusCode != 200 || resp.Header.Get("X-Chf-Charged") != "3" {
		t.Fatalf("update: %d %s", resp.StatusCode, b)
	}
	if resp, b = post(ref+"/release", req("", 2, `{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":2,"totalVolume":1}]}`)); resp.StatusCode != 204 || resp.Header.Get("X-Chf-Charged") != "1" {
		t.Fatalf("release: %d %s", resp.StatusCode, b)
	}
	bresp, err := hc.Get(lr.balURL + s)
	if err != nil {
		t.Fatal(err)
	}
	bb, _ := io.ReadAll(bresp.Body)
	bresp.Body.Close()
	if !bytes.Contains(bb, []byte(`"balance":99999996,"reserved":0`)) {
		t.Fatalf("balance %s", bb)
	}
	if err := lr.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	lr.wait(t, 60*time.Second)
	if lr.waitErr != nil {
		t.Fatalf("chf local exited with %v:\n%s", lr.waitErr, lr.stderr.String())
	}
	for name, pid := range lr.pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still running after chf local stopped", name, pid)
		}
	}
}

func TestLocalChildDies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary")
	}
	lr := startLocal(t, "--accounts", "10", "--nchf", "127.0.0.1:0", "--quiet")
	if err := syscall.Kill(lr.pids["ocp"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lr.wait(t, 60*time.Second)
	var ee *exec.ExitError
	if !errors.As(lr.waitErr, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("chf local exited with %v, want a non-zero status", lr.waitErr)
	}
	if !strings.Contains(lr.stderr.String(), "ocp") || !strings.Contains(lr.stderr.String(), "killed") {
		t.Fatalf("stderr does not name the dead child:\n%s", lr.stderr.String())
	}
	for name, pid := range lr.pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still running", name, pid)
		}
	}
}

// Each service of `chf local` takes its own flags (--aslite-args and the
// like): with --flight-recorder, SIGUSR1 makes aslite and the ABM write
// the last seconds of their execution traces, and the CGW, without one,
// logs the signal and keeps serving.
func TestLocalFlightRecorder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary")
	}
	dir := t.TempDir()
	lr := startLocal(t, "--accounts", "10", "--nchf", "127.0.0.1:0", "--quiet",
		"--aslite-args", "--flight-recorder "+dir, "--abm-args", "--flight-recorder "+dir+" --flight-threshold 1h")
	for _, svc := range []string{"aslite", "abm", "cgw"} {
		if err := syscall.Kill(lr.pids[svc], syscall.SIGUSR1); err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, _ := filepath.Glob(filepath.Join(dir, "aslite-*.trace"))
		b, _ := filepath.Glob(filepath.Join(dir, "abm-*.trace"))
		if len(a) == 1 && len(b) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots after SIGUSR1: aslite %v, abm %v\n%s", a, b, lr.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c, _ := filepath.Glob(filepath.Join(dir, "cgw-*")); len(c) != 0 || !alive(lr.pids["cgw"]) {
		t.Fatalf("the CGW without a recorder: files %v, alive %v", c, alive(lr.pids["cgw"]))
	}
	resp, err := http.Post(lr.nchfURL, "application/json", bytes.NewReader(req("imsi-001010000000002", 0, `{"ratingGroup":10,"requestedUnit":{}}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create after the signals: %d", resp.StatusCode)
	}
}

// waitStopped waits (up to 10 s) until every thread of pid is stopped:
// SIGSTOP takes effect when each thread next enters the kernel, and on a
// loaded machine a running ABM thread once served a request after kill
// returned.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(tasks) > 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			i := bytes.LastIndexByte(b, ')')
			if err != nil || i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d not stopped 10 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent Write and String.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLocalStoppedABM is case 7 of issue 13 with real processes: with the
// ABM process stopped (SIGSTOP), a create answers 504 within the caller's
// 3gpp-Sbi-Max-Rsp-Time, over HTTP/2 and HTTP/1.1; once the ABM runs
// again the same create succeeds.
func TestLocalStoppedABM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary")
	}
	lr := startLocal(t, "--accounts", "10", "--nchf", "127.0.0.1:0", "--quiet")
	abmPid := lr.pids["abm"]
	if err := syscall.Kill(abmPid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { syscall.Kill(abmPid, syscall.SIGCONT) }
	t.Cleanup(cont)
	waitStopped(t, abmPid)
	h2 := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	h1 := &http.Transport{}
	defer h2.CloseIdleConnections()
	defer h1.CloseIdleConnections()
	body := req("imsi-001010000000003", 0, `{"ratingGroup":10,"requestedUnit":{}}`)
	post := func(rt http.RoundTripper) (int, time.Duration) {
		t.Helper()
		hreq, err := http.NewRequest("POST", lr.nchfURL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("3gpp-Sbi-Max-Rsp-Time", "500")
		start := time.Now()
		resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	for name, rt := range map[string]http.RoundTripper{"h2c": h2, "http1": h1} {
		if status, took := post(rt); status != http.StatusGatewayTimeout || took > 500*time.Millisecond+slack {
			t.Fatalf("%s: create with the ABM stopped: %d after %v, want 504 within 500ms", name, status, took)
		}
	}
	cont()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _ := post(h2)
		if status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create after SIGCONT: %d", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
