package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/freeze"
	"github.com/chf-testbed/testbed/loadgen/report"
)

const testVersion = "v0.0.0-test"

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error

	chfOnce sync.Once
	chfDir  string
	chfPath string
	chfErr  error
)

func TestMain(m *testing.M) {
	// In-process runs (runCmd) start os.Executable(), this test binary, as
	// their host-freeze probe: it must serve, not run the tests again.
	if len(os.Args) > 1 && os.Args[1] == freeze.Command {
		os.Exit(serveFreezeProbe())
	}
	// That probe is this binary: under -race, its exit would wait for
	// the race runtime's default atexit_sleep_ms (1 s), and each run's
	// end waits for the probe's (GORACE set by the caller is kept).
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	code := m.Run()
	for _, dir := range []string{binDir, chfDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// loadgenBinary builds loadgen once, with its version set as the
// Makefile does.
func loadgenBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "loadgen-cli-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "loadgen")
		cmd := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion, "-o", binPath, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("cannot build loadgen: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// chfBinary builds cmd/chf once for the package's end-to-end tests.
func chfBinary(t *testing.T) string {
	t.Helper()
	chfOnce.Do(func() {
		if chfDir, chfErr = os.MkdirTemp("", "loadgen-cli-chf-"); chfErr != nil {
			return
		}
		chfPath = filepath.Join(chfDir, "chf")
		cmd := exec.Command("go", "build", "-o", chfPath, "../chf")
		if out, err := cmd.CombinedOutput(); err != nil {
			chfErr = fmt.Errorf("cannot build chf: %v\n%s", err, out)
		}
	})
	if chfErr != nil {
		t.Fatal(chfErr)
	}
	return chfPath
}

// runBinary runs loadgen with args and returns its exit code, stdout and
// stderr.
func runBinary(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	// A bound against a hang, not a speed check: under make test's load
	// the first exec of the fresh 43 MB binary once took over 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, loadgenBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("loadgen %v: %v", args, err)
	return 0, "", ""
}

// --help prints the command's one-line description first, on stdout;
// --version prints the version the build set; an unknown flag or an
// extra argument is a usage error (exit 2) on stderr.
func TestHelpVersionUsage(t *testing.T) {
	for _, name := range []string{"run", "local", "sweep", "gate", "merge", "compare"} {
		code, out, errs := runBinary(t, name, "--help")
		want := "loadgen " + name + ": " + commands[name].summary + "\n"
		if code != 0 || !strings.HasPrefix(out, want) || errs != "" || !strings.Contains(out, "6 a threshold failed") {
			t.Errorf("%s --help: exit %d, stdout %.200q, stderr %q; want exit 0 and stdout starting %q", name, code, out, errs, want)
		}
	}
	if code, out, _ := runBinary(t, "--help"); code != 0 || !strings.HasPrefix(out, "loadgen: ") || !strings.Contains(out, "  merge ") {
		t.Errorf("--help: exit %d, stdout %q", code, out)
	}
	if code, out, _ := runBinary(t, "--version"); code != 0 || !strings.HasPrefix(out, "loadgen "+testVersion+" (") {
		t.Errorf("--version: exit %d, stdout %q", code, out)
	}
	for _, args := range [][]string{
		{"run", "--nope"},
		{"run", "--target", "http://127.0.0.1:1", "extra"},
		{"local", "--rate=x"},
		{"bogus"},
		{},
	} {
		code, out, errs := runBinary(t, args...)
		if code != exitUsage || errs == "" || strings.Contains(out, "usage:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and the error on stderr", args, code, out, errs)
		}
	}
}

// Every flag's bad values are refused before anything starts, with exit
// 2 and a message naming the flag.
func TestBadFlagValues(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("load: {tps: -5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Gy cannot carry an offline share (run.CheckProto).
	offline := filepath.Join(dir, "offline.yaml")
	if err := os.WriteFile(offline, []byte("accounts: {offline: 0.1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// If a bad value were accepted, these would make the run short and fail
	// on something else than usage.
	runBase := []string{"--target", "http://127.0.0.1:1", "--duration", "200ms", "--warmup", "0", "--ramp-up", "0", "--audit", "off", "--progress", "off"}
	localBase := []string{"--chf", filepath.Join(dir, "no-chf"), "--results", filepath.Join(dir, "results"), "--duration", "200ms", "--progress", "off"}
	sweepOut := filepath.Join(dir, "sweep-out")
	sweepBase := []string{"--local", "--chf", filepath.Join(dir, "no-chf"), "--out", sweepOut, "--progress", "off"}
	cases := []struct {
		cmd  string
		args []string
		want string
	}{
		{"run", []string{"--rate", "-5"}, "--rate"},
		{"run", []string{"--rate", "0"}, "--rate"},
		{"run", []string{"--rate", "NaN"}, "--rate"},
		{"run", []string{"--rate", "x"}, "-rate"},
		{"run", []string{"--sessions-per-second", "-1"}, "--sessions-per-second"},
		{"run", []string{"--rate", "10", "--sessions-per-second", "5"}, "--rate and --sessions-per-second"},
		{"run", []string{"--duration", "-1s"}, "--duration"},
		{"run", []string{"--duration", "0"}, "--duration"},
		{"run", []string{"--warmup", "-1s"}, "--warmup"},
		{"run", []string{"--ramp-up", "-1s"}, "--ramp-up"},
		{"run", []string{"--subscribers", "0"}, "--subscribers"},
		{"run", []string{"--subscribers", "-3"}, "--subscribers"},
		{"run", []string{"--subscribers", "200000000"}, "--subscribers"},
		{"run", []string{"--first", "imsi-abc"}, "--first"},
		{"run", []string{"--first", "imsi-99", "--subscribers", "5"}, "--subscribers"},
		{"run", []string{"--max-inflight", "0"}, "--max-inflight"},
		{"run", []string{"--max-inflight", "-1"}, "--max-inflight"},
		{"run", []string{"--timeout", "0"}, "--timeout"},
		{"run", []string{"--timeout", "-1s"}, "--timeout"},
		{"run", []string{"--workers", "-1"}, "--workers"},
		{"run", []string{"--pacing", "-1ms"}, "--pacing"},
		{"run", []string{"--procs", "-1"}, "--procs"},
		{"run", []string{"--runtime-profile", "turbo"}, "--runtime-profile"},
		{"local", []string{"--runtime-profile", "Lab"}, "--runtime-profile"},
		{"sweep", []string{"--runtime-profile", "fast"}, "--runtime-profile"},
		{"gate", []string{"--baseline-chf", "a", "--candidate-chf", "b", "--runtime-profile", "x"}, "--runtime-profile"},
		{"lab", []string{"--runtime-profile", "x"}, "-runtime-profile"},
		{"floor", []string{"--runtime-profile", "x"}, "-runtime-profile"},
		{"floor", []string{"--sched-batch=false"}, "use --runtime-profile"},
		{"run", []string{"--conns", "-1"}, "--conns"},
		// Counts allocated up front: a typo must not exhaust memory or
		// abort the runtime (GOMAXPROCS 10^12: "procresize: invalid arg").
		{"run", []string{"--conns", "999999999999"}, "--conns"},
		{"run", []string{"--procs", "999999999999"}, "--procs"},
		{"run", []string{"--workers", "999999999999"}, "--workers"},
		{"run", []string{"--audit-concurrency", "999999999999"}, "--audit-concurrency"},
		{"run", []string{"--max-inflight", "999999999999"}, "--max-inflight"},
		{"run", []string{"--initial-balance", "-1"}, "--initial-balance"},
		{"run", []string{"--audit-concurrency", "0"}, "--audit-concurrency"},
		{"run", []string{"--audit", "bogus"}, "--audit"},
		{"run", []string{"--progress", "bogus"}, "--progress"},
		{"run", []string{"--metrics-listen", "nope"}, "--metrics-listen"},
		{"run", []string{"--metrics-listen", "127.0.0.1:http"}, "--metrics-listen"},
		{"run", []string{"--proto", "bogus"}, "--proto"},
		{"run", []string{"--log-level", "loud"}, "--log-level"},
		{"run", []string{"--shard", "3/3"}, "--shard"},
		{"run", []string{"--shard", "x"}, "--shard"},
		{"run", []string{"--subscribers", "2", "--shard", "0/3"}, "--shard"},
		{"run", []string{"--threshold", "p99<<1"}, "--threshold"},
		{"run", []string{"--threshold", "bogus<1"}, "--threshold"},
		{"run", []string{"--cpu", "=pid:1"}, "--cpu"},
		{"run", []string{"--cpu", "cgw=ftp://x"}, "--cpu"},
		{"run", []string{"--cpu", "no-such-process-xyz"}, "--cpu"},
		{"run", []string{"--cpu", "cgw=pid:1073741824"}, "--cpu"},
		{"run", []string{"--balance-url", "ftp://x"}, "--balance-url"},
		{"run", []string{"--target", ""}, "--target"},
		{"run", []string{"--target", "http://"}, "--target"},
		{"run", []string{"--proto", "http1", "--target", "diameter://127.0.0.1:1"}, "--proto"},
		{"run", []string{"--scenario", bad}, "load.tps"},
		{"run", []string{"--scenario", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{"run", []string{"--scenario", offline, "--proto", "gy", "--target", "diameter://127.0.0.1:1"}, "accounts.offline"},
		{"run", []string{"--scenario", offline, "--target", "diameter://127.0.0.1:1"}, "accounts.offline"},
		{"local", []string{"--scenario", offline, "--proto", "gy"}, "accounts.offline"},
		{"sweep", []string{"--scenario", offline, "--proto", "gy"}, "accounts.offline"},
		{"local", []string{"--accounts", "0"}, "--accounts"},
		{"local", []string{"--balance", "0"}, "--balance"},
		{"local", []string{"--accounts", "100", "--subscribers", "200"}, "--subscribers"},
		{"local", []string{"--rate", "-1"}, "--rate"},
		{"sweep", []string{"--step", "0"}, "--step"},
		{"sweep", []string{"--start", "-1"}, "--start"},
		{"sweep", []string{"--start", "100", "--max", "50"}, "--max"},
		{"sweep", []string{"--step", "0.001"}, "--step"},
		{"sweep", []string{"--slo-p99", "-1ms"}, "--slo-p99"},
		{"sweep", []string{"--slo-error-rate", "2"}, "--slo-error-rate"},
		{"sweep", []string{"--slo-late-rate", "-1"}, "--slo-late-rate"},
		{"sweep", []string{"--target", "http://127.0.0.1:1", "--local"}, "--target and --local"},
		{"sweep", []string{"--rate", "5"}, "--rate"},
		{"sweep", []string{"--accounts", "10", "--max", "20000"}, "--subscribers"},
		{"sweep", []string{"--timeout", "0"}, "--timeout"},
		{"sweep", []string{"--max-steal", "-1"}, "--max-steal"},
		{"sweep", []string{"--max-steal", "NaN"}, "--max-steal"},
		{"sweep", []string{"--max-freeze", "-1ms"}, "--max-freeze"},
		{"sweep", []string{"--max-freeze", "2m"}, "--max-freeze"},
		{"sweep", []string{"--steal-retries", "101"}, "--steal-retries"},
		{"gate", []string{"--baseline-chf", "a", "--candidate-chf", "b", "--trials", "0"}, "--trials"},
		{"gate", []string{"--tolerance", "0"}, "--tolerance"},
		{"gate", []string{"--baseline-chf", "a", "--candidate-chf", "b", "--duration", "-1s"}, "--duration"},
		{"merge", []string{"--start-tolerance", "-1s", "-o", "x.json", "y.json"}, "--start-tolerance"},
		{"merge", []string{"y.json"}, "-o"},
		{"compare", nil, "result file"},
		{"lab", []string{"--duration", "x"}, "-duration"}, // a flag that does not parse is usage too
		{"lab", []string{"--accounts", "999999999999"}, "--accounts"},
		// Options are checked before the file is read.
		{"plan", []string{"--tps", "1e99", "--from", filepath.Join(dir, "missing.json")}, "--tps"},
		{"plan", []string{"--tps", "1000", "--replication", "0", "--from", filepath.Join(dir, "missing.json")}, "--replication"},
		// A file that never ends is refused, not read into memory.
		{"run", []string{"--scenario", "/dev/zero"}, "/dev/zero holds more than"},
	}
	for _, c := range cases {
		args := c.args
		switch c.cmd {
		case "run":
			args = append(append([]string(nil), runBase...), args...)
		case "local":
			args = append(append([]string(nil), localBase...), args...)
		case "sweep":
			if !strings.Contains(strings.Join(args, " "), "--target") {
				args = append(append([]string(nil), sweepBase...), args...)
			} else {
				args = append([]string{"--out", sweepOut}, args...)
			}
		}
		err := commands[c.cmd].run(args)
		if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s %v: exit %d, err %v; want exit 2 naming %q", c.cmd, c.args, code, err, c.want)
		}
	}
	// Nothing started: no results directory left behind.
	for _, d := range []string{filepath.Join(dir, "results"), sweepOut} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s exists after refused arguments", d)
		}
	}
}

// A flag and a scenario file field break the same rule with the same
// message.
func TestFlagAndFileSameMessage(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(file, []byte("max_in_flight: -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--target", "http://127.0.0.1:1", "--duration", "200ms"}
	ef := runCmd(append(base, "--max-inflight", "-1"))
	es := runCmd(append(base, "--scenario", file))
	msg := "must be 1..1048576, got -1"
	if !strings.Contains(fmt.Sprint(ef), "invalid --max-inflight: "+msg) || !strings.Contains(fmt.Sprint(es), "max_in_flight: "+msg) {
		t.Fatalf("flag: %v\nfile: %v", ef, es)
	}
}

// waitLine reads r until a line contains s (or r ends), copying every
// line to log.
func waitLine(r io.Reader, s string, log *bytes.Buffer, mu *sync.Mutex) <-chan struct{} {
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(r)
		once := false
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if !once && strings.Contains(sc.Text(), s) {
				once = true
				close(found)
			}
		}
		if !once {
			close(found)
		}
	}()
	return found
}

// interruptRun starts the built loadgen with args, sends sig once a line
// of its stderr contains waitFor (and again after again, when positive), and
// returns the exit code, the time from the first signal to the exit, the
// output.
func interruptRun(t *testing.T, args []string, waitFor string, sig syscall.Signal, again time.Duration) (int, time.Duration, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, loadgenBinary(t), args...)
	var out bytes.Buffer
	var errs bytes.Buffer
	var mu sync.Mutex
	cmd.Stdout = &out
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-waitLine(pipe, waitFor, &errs, &mu)
	t0 := time.Now()
	cmd.Process.Signal(sig)
	if again > 0 {
		time.Sleep(again)
		cmd.Process.Signal(sig)
	}
	err = cmd.Wait()
	took := time.Since(t0)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return code, took, out.String(), errs.String()
}

// SIGINT or SIGTERM during `loadgen run`: the run stops, the report is
// written and marked interrupted, and the exit code says which signal.
func TestInterruptedRun(t *testing.T) {
	srv, err := fakechf.Start(fakechf.Options{Accounts: 1000, Balance: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{{syscall.SIGINT, exitSIGINT, "SIGINT"}, {syscall.SIGTERM, exitSIGTERM, "SIGTERM"}} {
		dir := t.TempDir()
		code, took, out, errs := interruptRun(t, []string{"run", "--target", "http://" + srv.Addr(), "--rate", "200", "--duration", "60s",
			"--warmup", "0", "--ramp-up", "0", "--subscribers", "1000", "--audit", "off", "--progress", "plain", "--out", dir}, " offered ", c.sig, 0)
		if code != c.code || took > 10*time.Second {
			t.Fatalf("%s: exit %d after %s, want %d within 10s\nstdout:\n%s\nstderr:\n%s", c.name, code, took, c.code, out, errs)
		}
		t.Logf("%s: exit %d %s after the signal", c.name, code, took.Round(time.Millisecond))
		res, err := report.ReadJSON(filepath.Join(dir, "result.json"))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !res.Interrupted || res.InterruptedBy != c.name || res.Transactions == 0 || res.Provenance.LoadgenVersion != testVersion {
			t.Fatalf("%s: interrupted %v by %q, %d transactions, version %q", c.name, res.Interrupted, res.InterruptedBy, res.Transactions, res.Provenance.LoadgenVersion)
		}
		if !strings.Contains(out, "INTERRUPTED by "+c.name) {
			t.Fatalf("%s: summary does not say interrupted:\n%s", c.name, out)
		}
	}
}

// A server that accepts and never answers: a second SIGINT exits at once
// (130) whatever the first left running.
func TestSecondSignalExits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	code, took, out, errs := interruptRun(t, []string{"run", "--target", "http://" + ln.Addr().String(), "--rate", "50", "--duration", "60s",
		"--warmup", "0", "--ramp-up", "0", "--timeout", "30s", "--audit", "off", "--progress", "plain"}, "", syscall.SIGINT, 300*time.Millisecond)
	if code != exitSIGINT || took > 5*time.Second {
		t.Fatalf("exit %d after %s, want 130 within 5s\nstdout:\n%s\nstderr:\n%s", code, took, out, errs)
	}
}

// A failed threshold exits 6, and so does a run where every request
// fails (the default thresholds); thresholds come from the scenario file
// too.
func TestThresholdExitCodes(t *testing.T) {
	srv, err := fakechf.Start(fakechf.Options{Accounts: 100, Balance: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(file, []byte("thresholds: [\"p99<1ns\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--rate", "100", "--duration", "500ms", "--warmup", "0", "--ramp-up", "0", "--subscribers", "100", "--audit", "off", "--progress", "off"}
	f := func(target string, want int, extra ...string) {
		t.Helper()
		js := filepath.Join(dir, "r.json")
		err := runCmd(append(append([]string{"--target", target, "--json", js}, base...), extra...))
		if code := exitCode(err); code != want {
			t.Fatalf("%s %v: exit %d (%v), want %d", target, extra, code, err, want)
		}
		res, err := report.ReadJSON(js)
		if err != nil {
			t.Fatal(err)
		}
		if res.ThresholdsOK != (want == 0) || len(res.Thresholds) == 0 {
			t.Fatalf("%v: thresholds ok %v: %+v", extra, res.ThresholdsOK, res.Thresholds)
		}
	}
	f("http://"+srv.Addr(), 0)
	f("http://"+srv.Addr(), exitThreshold, "--threshold", "p99<1ns")
	f("http://"+srv.Addr(), exitThreshold, "--scenario", file)
	f("http://"+srv.Addr(), 0, "--threshold", "tps>=0.5*offered", "--threshold", "errors<50%")
	// Nothing listens there: each request fails at once, and a short
	// timeout shortens the drain its retries are bounded by (2 timeouts
	// and more).
	f("http://127.0.0.1:1", exitThreshold, "--timeout", "200ms")
	f("http://127.0.0.1:1", exitThreshold, "--timeout", "200ms", "--threshold", "errors<=100%") // tps>0 still applies
}

// merge refuses the same shard twice (exit 1, the file untouched) and
// merges distinct shards; compare picks its baseline by label.
func TestMergeAndCompareCommands(t *testing.T) {
	srv, err := fakechf.Start(fakechf.Options{Accounts: 100, Balance: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	var shards []string
	for i := range 2 {
		p := filepath.Join(dir, fmt.Sprintf("shard-%d.json", i))
		args := []string{"--target", "http://" + srv.Addr(), "--rate", "100", "--duration", "300ms", "--warmup", "0", "--ramp-up", "0",
			"--subscribers", "100", "--audit", "off", "--progress", "off", "--shard", fmt.Sprintf("%d/2", i), "--label", fmt.Sprint("s", i), "--json", p}
		if err := runCmd(args); err != nil {
			t.Fatal(err)
		}
		shards = append(shards, p)
	}
	out := filepath.Join(dir, "merged.json")
	if err := mergeCmd([]string{"-o", out, shards[0], shards[0]}); exitCode(err) != exitError || !strings.Contains(err.Error(), "both shard 0/2") {
		t.Fatalf("the same shard twice: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a refused merge wrote its output")
	}
	if err := mergeCmd([]string{"-o", out, shards[0], shards[1]}); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(dir, "cmp.md")
	if err := compareCmd([]string{shards[0], shards[1], "--baseline", "s1", "--md", md}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(md); !strings.Contains(string(b), "Baseline: s1.") {
		t.Fatalf("baseline by label:\n%s", b)
	}
	if err := compareCmd([]string{shards[0], shards[1], "--baseline", "s9"}); exitCode(err) != exitUsage {
		t.Fatalf("unknown baseline label: %v", err)
	}
}

// --scenario busy-hour names the embedded scenario from any directory;
// an unknown name is a usage error naming the built-in ones.
func TestBuiltinScenario(t *testing.T) {
	code, out, errs := runBinary(t, "run", "--target", "http://127.0.0.1:1", "--scenario", "busy-hour", "--check-flags")
	if code != 0 || !strings.Contains(out, `"name": "busy-hour"`) || !strings.Contains(out, `"count": 20000000`) {
		t.Fatalf("exit %d, stdout %.300s, stderr %s", code, out, errs)
	}
	code, _, errs = runBinary(t, "run", "--target", "http://127.0.0.1:1", "--scenario", "busy-hours", "--check-flags")
	if code != 2 || !strings.Contains(errs, "busy-hour") {
		t.Fatalf("unknown name: exit %d, stderr %s", code, errs)
	}
	// Its steady start needs a ramp-up of one think time (60 s).
	code, _, errs = runBinary(t, "run", "--target", "http://127.0.0.1:1", "--scenario", "busy-hour", "--ramp-up", "5s", "--check-flags")
	if code != 2 || !strings.Contains(errs, "--ramp-up") || !strings.Contains(errs, "1m0s") {
		t.Fatalf("busy-hour with --ramp-up 5s: exit %d, stderr %s", code, errs)
	}
	code, out, errs = runBinary(t, "plan", "--tps", "70000")
	if code != 2 || !strings.Contains(errs, "--from") {
		t.Fatalf("plan without --from: exit %d, stderr %s", code, errs)
	}
}
