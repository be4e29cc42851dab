package freeze

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary a probe child (TestMain) of a kind.
const childEnv = "FREEZE_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		if err := Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "unavailable":
		fmt.Println("unavailable SCHED_FIFO refused")
		os.Exit(1)
	case "silent":
		time.Sleep(time.Minute)
	case "other-build":
		fmt.Println("ready 1000000 2000000 0")
		time.Sleep(time.Minute)
	case "garbage":
		fmt.Println("ready", int64(Period), int64(Threshold), "0")
		var b [1]byte
		os.Stdin.Read(b[:])
		fmt.Println("s 0:1:2:0:0:0") // more freezes than wake-ups
		time.Sleep(time.Minute)
	case "hang":
		fmt.Println("ready", int64(Period), int64(Threshold), "0,1")
		time.Sleep(time.Minute)
	case "exit":
		fmt.Println("ready", int64(Period), int64(Threshold), "0")
		os.Exit(0)
	}
	os.Exit(0)
}

// start starts the test binary as a probe child of kind.
func start(t *testing.T, kind string) (*Probe, error) {
	t.Helper()
	t.Setenv(childEnv, kind)
	// A -race child otherwise sleeps a second before it exits.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Start(ctx, exe)
}

func needFIFO(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("the probe needs Linux and root (SCHED_FIFO)")
	}
}

// TestProbeSeesAFreeze: a probe stopped for 60 ms (SIGSTOP, as a host
// that does not run the CPU) reports a wake-up that much late, its
// threads alone run under SCHED_FIFO, and Close ends it.
func TestProbeSeesAFreeze(t *testing.T) {
	needFIFO(t)
	p, err := start(t, "serve")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.CPUs()) == 0 {
		t.Fatal("no CPU probed")
	}
	fifo := 0
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.PID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		pol, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
		if errno == 0 && pol&^0x40000000 == 1 {
			fifo++
		}
	}
	if fifo != len(p.CPUs()) {
		t.Errorf("%d threads under SCHED_FIFO, want one per probed CPU (%d): no other thread may inherit it", fifo, len(p.CPUs()))
	}
	if _, err := p.Read(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	s, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(s), len(p.CPUs()); got != want {
		t.Fatalf("figures for %d CPUs, want %d", got, want)
	}
	for _, c := range s {
		// 200 ms at a 5 ms period is 40 wake-ups; a freeze of the host may take some.
		if c.Wakeups < 10 || c.Wakeups > 41 {
			t.Errorf("CPU %d: %d wake-ups in 200 ms at a %v period", c.CPU, c.Wakeups, Period)
		}
	}
	if err := syscall.Kill(p.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if err := syscall.Kill(p.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	s, err = p.Read()
	if err != nil {
		t.Fatal(err)
	}
	tot := s.Total()
	if tot.WorstMs < 40 || tot.Over10ms < 1 || tot.Count < len64(p.CPUs()) || tot.FrozenMs < tot.WorstMs {
		t.Errorf("after a 60 ms stop: %+v, want a wake-up of each CPU at least 40 ms late", tot)
	}
	pid := p.PID()
	p.Close()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the probe %d still runs after Close", pid)
	}
	if _, err := p.Read(); !errors.Is(err, ErrProbe) {
		t.Errorf("Read after Close: %v, want ErrProbe", err)
	}
}

func len64(s []int) int64 { return int64(len(s)) }

func TestStartFailures(t *testing.T) {
	defer func(d time.Duration) { readyTimeout = d }(readyTimeout)
	readyTimeout = 300 * time.Millisecond
	for _, tc := range []struct {
		kind string
		want error
		text string
	}{
		{"unavailable", ErrUnavailable, "SCHED_FIFO refused"},
		{"silent", ErrProbe, "not ready within"},
		{"other-build", ErrProbe, "another loadgen binary"},
	} {
		p, err := start(t, tc.kind)
		if !errors.Is(err, tc.want) || err == nil || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: Start = %v, want %v saying %q", tc.kind, err, tc.want, tc.text)
		}
		if p != nil {
			t.Errorf("%s: a probe returned with the error", tc.kind)
		}
	}
}

func TestReadFailures(t *testing.T) {
	defer func(d time.Duration) { askTimeout = d }(askTimeout)
	askTimeout = 300 * time.Millisecond
	for _, tc := range []struct{ kind, text string }{
		{"garbage", "inconsistent figures"},
		{"hang", "no answer within"},
		{"exit", "exited"},
	} {
		p, err := start(t, tc.kind)
		if err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		if tc.kind == "exit" {
			time.Sleep(100 * time.Millisecond)
		}
		t0 := time.Now()
		_, err = p.Read()
		if !errors.Is(err, ErrProbe) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: Read = %v, want ErrProbe saying %q", tc.kind, err, tc.text)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("%s: Read took %v", tc.kind, d)
		}
		if _, again := p.Read(); again == nil || again.Error() != err.Error() {
			t.Errorf("%s: second Read = %v, want the first failure again", tc.kind, again)
		}
		t0 = time.Now()
		p.Close()
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("%s: Close took %v", tc.kind, d)
		}
	}
}

func TestParse(t *testing.T) {
	ok := fmt.Sprintf("ready %d %d 0,3", Period, Threshold)
	cpus, err := parseReady(ok)
	if err != nil || len(cpus) != 2 || cpus[0] != 0 || cpus[1] != 3 {
		t.Fatalf("parseReady(%q) = %v, %v", ok, cpus, err)
	}
	for _, l := range []string{"", "ready", "go away", fmt.Sprintf("ready %d %d 0,x", Period, Threshold), fmt.Sprintf("ready %d %d -1", Period, Threshold)} {
		if _, err := parseReady(l); !errors.Is(err, ErrProbe) {
			t.Errorf("parseReady(%q) = %v, want ErrProbe", l, err)
		}
	}
	s, err := parseStats("s 0:200:3:1:12500000:20000000 3:199:0:0:0:0", cpus)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{{CPU: 0, Wakeups: 200, Count: 3, Over10ms: 1, WorstMs: 12.5, FrozenMs: 20}, {CPU: 3, Wakeups: 199}}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("parseStats = %+v, want %+v", s, want)
	}
	for _, l := range []string{
		"s 0:200:3:1:1:1",                              // one CPU missing
		"x 0:1:0:0:0:0 3:1:0:0:0:0",                    // not figures
		"s 0:1:0:0:0 3:1:0:0:0:0",                      // a field missing
		"s 1:1:0:0:0:0 3:1:0:0:0:0",                    // another CPU
		"s 0:1:0:0:0:-5 3:1:0:0:0:0",                   // negative
		"s 0:1:0:2:0:0 3:1:0:0:0:0",                    // more long freezes than freezes
		"s 0:1:0:0:0:x 3:1:0:0:0:0",                    // not a number
		"s 0:1:0:0:0:99999999999999999999 3:1:0:0:0:0", // overflow
	} {
		if _, err := parseStats(l, cpus); err == nil {
			t.Errorf("parseStats(%q) accepted", l)
		}
	}
}

func TestStatsSummary(t *testing.T) {
	a := Stats{{CPU: 0, Wakeups: 100, Count: 2, Over10ms: 1, WorstMs: 12, FrozenMs: 15}, {CPU: 1, Wakeups: 100}}
	b := Stats{{CPU: 0, Wakeups: 100, Count: 1, WorstMs: 3, FrozenMs: 3}, {CPU: 1, Wakeups: 99, Count: 1, Over10ms: 1, WorstMs: 30, FrozenMs: 30}}
	var sum Stats
	sum = sum.Add(a)
	sum = sum.Add(b)
	if a[0].Wakeups != 100 {
		t.Fatal("Add changed its first operand's source")
	}
	s := Summarize(sum, 0.25)
	if s.Wakeups != 399 || s.Count != 4 || s.Over10ms != 2 || s.WorstMs != 30 || s.FrozenMs != 48 || len(s.CPUs) != 2 || s.CPUs[0].WorstMs != 12 || s.ProbeCPUSeconds != 0.25 {
		t.Errorf("Summarize = %+v", s)
	}
	if l := s.Line(); !strings.Contains(l, "worst 30.0 ms, 4 freezes of 2 ms or more (2 of 10 ms or more), 48 ms frozen") {
		t.Errorf("Line = %q", l)
	}
}
