package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/sweep"
)

func TestValidate(t *testing.T) {
	good := func() Options {
		return Options{Models: []string{"host"}, Pin: []bool{true}, KneeP99: time.Second, Duration: time.Second, Trials: 1, MTU: 1500,
			Out: "x", Baseline: "baremetal", Accounts: 1000, IPerfTime: time.Second, ProbeCount: 100, ShapingRateMbit: 100, ShapingRTT: time.Millisecond}
	}
	if err := (&Options{}).Validate(); err == nil {
		t.Fatal("empty options validated")
	}
	o := good()
	if err := o.Validate(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	f := func(flag string, edit func(*Options)) {
		t.Helper()
		o := good()
		edit(&o)
		err := o.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), flag) {
			t.Errorf("want an error naming %s, got %v", flag, err)
		}
	}
	f("--models", func(o *Options) { o.Models = []string{"calico-bgp"} })
	f("--models", func(o *Options) { o.Models = []string{"host", "host"} })
	f("--pin", func(o *Options) { o.Pin = nil })
	f("--rate", func(o *Options) { o.Rate = -1 })
	f("--pacing", func(o *Options) { o.Pacing = -time.Millisecond })
	f("--duration", func(o *Options) { o.Duration = time.Millisecond })
	f("--trials", func(o *Options) { o.Trials = 0 })
	f("--mtu", func(o *Options) { o.MTU = 1400 })
	f("--experiment", func(o *Options) { o.Experiment = "policing" })
	f("--experiment", func(o *Options) { o.Experiment = "shaping" }) // no iperf3
	f("--out", func(o *Options) { o.Out = "" })
	f("--baseline", func(o *Options) { o.Baseline = "k8s" })
	f("--accounts", func(o *Options) { o.Accounts = 1 })
	f("--accounts", func(o *Options) { o.Accounts = 999_999_999_999 })
	f("--probes", func(o *Options) { o.ProbeCount = 999_999_999_999 })
	f("--shaping-rate", func(o *Options) { o.ShapingRateMbit = 999_999_999_999 })
	f("--duration", func(o *Options) { o.Duration = 2 * time.Hour })
	f("--iperf-time", func(o *Options) { o.IPerfTime = 2 * time.Hour })
}

func TestPinning(t *testing.T) {
	two := Pinning([]int{0, 1})
	if two["cgw"] != "0" || two["ocp"] != "0" || two["aslite"] != "1" || two["abm"] != "1" || two["loadgen"] != "1" {
		t.Errorf("2 CPUs: one set per node, got %v", two)
	}
	six := Pinning([]int{0, 1, 2, 3, 4, 5})
	seen := map[string]bool{}
	for _, r := range Roles {
		if six[r] == "" || seen[six[r]] {
			t.Errorf("6 CPUs: want a set of its own per role, got %v", six)
		}
		seen[six[r]] = true
	}
	if six["loadgen"] != "4,5" {
		t.Errorf("6 CPUs: the last role takes the remainder, got %q", six["loadgen"])
	}
	if one := Pinning([]int{3}); one["cgw"] != "" {
		t.Errorf("1 CPU: no pinning, got %v", one)
	}
	if !strings.Contains(PinNote([]int{0, 1}), "2 CPUs for 5 processes") {
		t.Errorf("the 2-CPU note does not say what pinned means: %s", PinNote([]int{0, 1}))
	}
}

func TestVersus(t *testing.T) {
	if v := versus(Stat{10, 9, 11}, Stat{10.5, 10, 12}, true); v != "no measurable difference" {
		t.Errorf("overlapping ranges: %s", v)
	}
	if v := versus(Stat{20, 19, 21}, Stat{10, 9, 11}, true); !strings.HasPrefix(v, "better (+100.0%") {
		t.Errorf("higher is better: %s", v)
	}
	if v := versus(Stat{20, 19, 21}, Stat{10, 9, 11}, false); !strings.HasPrefix(v, "worse") {
		t.Errorf("lower is better: %s", v)
	}
}

// TestReport renders a report from made-up trials: ratios, "no
// measurable difference", the ordering verdicts and the charts.
func TestReport(t *testing.T) {
	trial := func(p50, sut float64) Trial {
		return Trial{TPS: 1000, P50Ms: p50, P99Ms: 3 * p50, SUTUsTxn: sut, AuditOK: true,
			Network: Network{IPerf3Gbps: Pair{10, 12}, RTTUs: RTT{MedianUs: 30, P99Us: 60}}, raw: []byte(`{"tps":1000}`)}
	}
	rep := &Report{Kind: "lab", Baseline: "baremetal/pinned", Rows: []*Row{
		{Model: "baremetal", Pinned: true, Trials: []Trial{trial(1.0, 200), trial(1.1, 210), trial(1.05, 205)}},
		{Model: "sriov", Pinned: true, Trials: []Trial{trial(1.02, 150), trial(1.08, 155), trial(1.04, 152)}},
		{Model: "baremetal", Pinned: false, Trials: []Trial{trial(1.5, 300), trial(1.6, 310), trial(1.55, 305)}},
		{Model: "calico-ipip", Pinned: true, Unavailable: "not available on this kernel (no ipip module)"},
	}}
	rep.HostKneeTPS, rep.KneeRetries, rep.KneeStealRetries = 3000, 2, 3
	rep.HostKneeRetried = []string{"3000 TPS met on attempt 2; earlier: p99 80.00 ms > 50.00 ms"}
	rep.finish(Options{MatchGOMAXPROCS: true, MTU: 1500})
	sr := rep.Rows[1]
	if sr.Versus["p50_ms"] != "no measurable difference" || !strings.HasPrefix(sr.Versus["sut_cpu_us_per_txn"], "better") {
		t.Errorf("sriov vs baremetal: %v", sr.Versus)
	}
	if r := sr.Ratio["sut_cpu_us_per_txn"]; r < 0.73 || r > 0.75 {
		t.Errorf("SUT ratio %v, want 152/205", r)
	}
	if string(sr.Result) != `{"tps":1000}` {
		t.Errorf("the median trial's result is not kept: %s", sr.Result)
	}
	md, htm := rep.Markdown(), rep.HTML()
	for _, want := range []string{"sriov/pinned ahead of baremetal/pinned: agrees with the reference", "not available on this kernel", "| baremetal | emulated | unpinned |",
		"up to 2 more times before declaring the knee (up to 3 attempts a sweep that missed while the hypervisor stole more than loadgen sweep's --max-steal in one second are void and run again); retried or void: host sweep: 3000 TPS met on attempt 2"} {
		if !strings.Contains(md, want) {
			t.Errorf("lab.md lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(htm, "host sweep: 3000 TPS met on attempt 2") {
		t.Errorf("lab.html does not say which knee step was retried")
	}
	if strings.Count(htm, "<svg") != 5 || strings.Contains(htm, "<script") {
		t.Errorf("lab.html: want 5 inline charts and no script")
	}
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds chf and loadgen once for the package's tests.
func binaries(t *testing.T) (chf, loadgen string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the lab needs root (network namespaces); not root")
	}
	for _, tool := range []string{"ip", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the lab needs %s: %v", tool, err)
		}
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "labtest-bin-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", binDir+"/",
			"github.com/chf-testbed/testbed/cmd/chf", "github.com/chf-testbed/testbed/cmd/loadgen").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "chf"), filepath.Join(binDir, "loadgen")
}

// The lab reads its knee sweeps' sweep.json as loadgen sweep writes it:
// the knee, and a note for every void, retried or failed step. The knee
// sweeps' retries and steal voids fit the accounts' slices.
func TestKneeOf(t *testing.T) {
	miss := "p99 80.00 ms > 50.00 ms"
	res := sweep.Result{KneeTPS: 2000, Steps: []sweep.Step{
		{OfferedTPS: 1000, Pass: true},
		{OfferedTPS: 2000, Pass: true, Voided: []string{miss + ", host steal 31% of a core in its worst second > 5%"}, Retried: []string{miss}},
		{OfferedTPS: 3000, Reason: miss, Retried: []string{miss, miss}},
	}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	knee, notes, err := KneeOf(b)
	if err != nil || knee != 2000 {
		t.Fatalf("knee %v, %v", knee, err)
	}
	want := []string{
		"2000 TPS attempt void (" + miss + ", host steal 31% of a core in its worst second > 5%)",
		"2000 TPS met on attempt 2; earlier: " + miss,
		"3000 TPS missed 3 times (last: " + miss + "); earlier: " + miss + "; " + miss,
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("notes\n%s\nwant\n%s", strings.Join(notes, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range []struct{ accounts, retries, steal int }{{40, 0, 0}, {41, 0, 1}, {80, 1, 0}, {122, 2, 2}, {100000, kneeRetries, kneeStealRetries}} {
		l := &Lab{o: Options{Accounts: c.accounts}}
		if r, s := l.retries(), l.stealRetries(); r != c.retries || s != c.steal || kneeSteps*(1+r)+s > c.accounts {
			t.Errorf("%d accounts: retries %d, steal retries %d; want %d, %d", c.accounts, r, s, c.retries, c.steal)
		}
		// The cluster's knee sweeps pass the same flags.
		args := strings.Join(KneeSweepArgs(c.accounts, 50*time.Millisecond), " ")
		if want := fmt.Sprintf("--retries %d --steal-retries %d --slo-p99 50ms", c.retries, c.steal); !strings.Contains(args, want) {
			t.Errorf("%d accounts: KneeSweepArgs %q, want it to hold %q", c.accounts, args, want)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// labCmd starts `loadgen lab` with args and returns it with a channel of
// its stderr lines (closed at EOF).
func labCmd(t *testing.T, ctx context.Context, args ...string) (*exec.Cmd, <-chan string, *bytes.Buffer) {
	t.Helper()
	chf, loadgen := binaries(t)
	cmd := exec.CommandContext(ctx, loadgen, append([]string{"lab", "--chf", chf}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	all := &bytes.Buffer{}
	var mu sync.Mutex
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			all.WriteString(sc.Text() + "\n")
			mu.Unlock()
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	return cmd, lines, all
}

// prefixOf waits for the line naming the run's namespace prefix.
func prefixOf(t *testing.T, lines <-chan string) string {
	t.Helper()
	for l := range lines {
		if p, ok := strings.CutPrefix(l, "lab: namespaces "); ok {
			p, _, _ = strings.Cut(p, "*")
			return p
		}
	}
	t.Fatal("loadgen lab never named its namespace prefix")
	return ""
}

// leftovers lists namespaces with prefix and processes of binDir or
// iperf3 servers still alive.
func leftovers(t *testing.T, prefix string) []string {
	t.Helper()
	var left []string
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, prefix) {
			left = append(left, "namespace "+l)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cl, binDir) || (strings.Contains(cl, "iperf3") && strings.Contains(cl, "5201")) || strings.HasPrefix(cl, "taskset ") {
			left = append(left, "process "+p+": "+cl)
		}
	}
	return left
}

// waitGone polls until nothing is left (processes take a moment to be
// reaped after the lab exits).
func waitGone(t *testing.T, prefix string) {
	t.Helper()
	var left []string
	for i := 0; i < 50; i++ {
		if left = leftovers(t, prefix); len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left behind:\n%s", strings.Join(left, "\n"))
}

// TestLabModels runs the lab through the real binaries on host,
// baremetal, calico-vxlan and sriov with and without pinning, and checks
// the report has every row with figures and that nothing is left.
func TestLabModels(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := t.TempDir()
	models := []string{"host", "baremetal", "calico-vxlan", "sriov", "calico-ipip"} // ipip: a row even where unavailable
	cmd, lines, all := labCmd(t, ctx, "--models", strings.Join(models, ","), "--pin", "both", "--rate", "300",
		"--duration", "1s", "--warmup", "0s", "--trials", "1", "--iperf-time", "1s", "--probes", "200", "--accounts", "1000", "--out", out)
	prefix := prefixOf(t, lines)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("loadgen lab: %v\n%s", err, all)
	}
	waitGone(t, prefix)
	b, err := os.ReadFile(filepath.Join(out, "lab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []struct {
			Model       string          `json:"model"`
			Pinned      bool            `json:"pinned"`
			Unavailable string          `json:"unavailable"`
			Result      json.RawMessage `json:"result"`
			Network     Network         `json:"network"`
			GOMAXPROCS  map[string]int  `json:"gomaxprocs"`
			Trials      []Trial         `json:"trials"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2*len(models) {
		t.Fatalf("want %d rows, got %d", 2*len(models), len(rep.Rows))
	}
	for _, r := range rep.Rows {
		name := fmt.Sprintf("%s pinned=%v", r.Model, r.Pinned)
		if r.Model == "calico-ipip" && !HasIPIP(ctx) {
			if !strings.Contains(r.Unavailable, "not available on this kernel") {
				t.Errorf("%s: want \"not available on this kernel\", got %q", name, r.Unavailable)
			}
			continue
		}
		if len(r.Trials) != 1 {
			t.Errorf("%s: want 1 trial, got %d", name, len(r.Trials))
			continue
		}
		tr := r.Trials[0]
		if tr.TPS <= 0 || tr.P50Ms <= 0 || tr.SUTUsTxn <= 0 || !tr.AuditOK || tr.Errors != 0 {
			t.Errorf("%s: implausible run: %+v", name, tr)
		}
		for _, c := range []string{"cgw", "ocp", "abm", "aslite"} {
			// Present, not necessarily > 0: /proc CPU time has 10 ms ticks,
			// which a one-second run at 300 TPS may not reach per process.
			if _, ok := tr.CompUsTxn[c]; !ok {
				t.Errorf("%s: no CPU source for %s: %v", name, c, tr.CompUsTxn)
			}
			if r.GOMAXPROCS[c] < 1 {
				t.Errorf("%s: no GOMAXPROCS for %s: %v", name, c, r.GOMAXPROCS)
			}
		}
		var res struct {
			TPS float64 `json:"tps"`
		}
		if err := json.Unmarshal(r.Result, &res); err != nil || res.TPS <= 0 {
			t.Errorf("%s: the loadgen result is missing: %v", name, err)
		}
		if r.Network.RTTUs.MedianUs <= 0 {
			t.Errorf("%s: no probe RTT", name)
		}
		if r.Network.Missing == "" && r.Network.IPerf3Gbps.Single <= 0 {
			t.Errorf("%s: no iperf3 figure", name)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "lab.md"))
	if err != nil {
		t.Fatal(err)
	}
	htm, err := os.ReadFile(filepath.Join(out, "lab.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		if !strings.Contains(string(md), "| "+m+" | emulated | pinned |") || !strings.Contains(string(md), "| "+m+" | emulated | unpinned |") {
			t.Errorf("lab.md lacks the rows of %s", m)
		}
		if !strings.Contains(string(htm), "<td>"+m+"</td><td>emulated</td>") {
			t.Errorf("lab.html lacks %s", m)
		}
	}
	if !strings.Contains(string(md), "Reference deployment") || strings.Contains(string(htm), "src=\"http") || strings.Contains(string(htm), "href=\"http") {
		t.Errorf("lab.md lacks the ordering or lab.html is not offline")
	}
}

// TestLabSweepAfterRun: a row's knee sweep runs on the CHF its fixed-rate
// run has just charged, so it must read the balances before each step
// rather than take them as provisioned: its first step's audit passes.
// (The p99 limit no step can meet ends the sweep after its first step's
// attempts.)
func TestLabSweepAfterRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := t.TempDir()
	cmd, lines, all := labCmd(t, ctx, "--models", "host", "--pin", "off", "--rate", "1000", "--duration", "1s", "--warmup", "0s",
		"--trials", "1", "--iperf-time", "1s", "--probes", "100", "--accounts", "1000", "--sweep", "--knee-slo-p99", "1us", "--out", out)
	prefix := prefixOf(t, lines)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("loadgen lab --sweep: %v\n%s", err, all)
	}
	waitGone(t, prefix)
	b, err := os.ReadFile(filepath.Join(out, "runs", "host-unpinned-t1-sweep", "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Steps []struct {
			Result struct {
				Transactions int64 `json:"transactions"`
				Audit        struct {
					OK     bool   `json:"ok"`
					Reason string `json:"reason"`
				} `json:"audit"`
			} `json:"result"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &s); err != nil || len(s.Steps) == 0 {
		t.Fatalf("sweep.json: %v, %d steps", err, len(s.Steps))
	}
	if r := s.Steps[0].Result; !r.Audit.OK || r.Transactions == 0 {
		t.Errorf("the sweep's first step after the fixed-rate run: %d transactions, audit ok %v: %s", r.Transactions, r.Audit.OK, r.Audit.Reason)
	}
}

// TestLabInterrupted sends SIGINT while a model's load runs, and SIGTERM
// while the CHF starts, and checks nothing is left behind.
func TestLabInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		// when: the stderr line, or a child process's argument, to wait for
		when func(prefix string) bool
	}{
		{"SIGINT during the run", syscall.SIGINT, func(string) bool { return childRunning(" run --target ") }},
		{"SIGTERM during start-up", syscall.SIGTERM, func(prefix string) bool { return childRunning(" aslite --listen ") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd, lines, all := labCmd(t, ctx, "--models", "baremetal", "--pin", "on", "--rate", "300",
				"--duration", "30s", "--warmup", "0s", "--trials", "1", "--iperf-time", "1s", "--probes", "100", "--accounts", "1000", "--out", t.TempDir())
			prefix := prefixOf(t, lines)
			go func() {
				for range lines {
				}
			}()
			deadline := time.Now().Add(40 * time.Second)
			for !tc.when(prefix) {
				if time.Now().After(deadline) {
					t.Fatalf("the moment to interrupt never came:\n%s", all)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			_ = cmd.Wait()
			if code, want := cmd.ProcessState.ExitCode(), 128+int(tc.sig); code != want {
				t.Errorf("an interrupted lab exited %d, want %d (128 + the signal)", code, want)
			}
			if d := time.Since(t0); d > 30*time.Second { // SIGTERM, 3 s grace per process, on a busy machine
				t.Errorf("the lab took %v to stop", d)
			}
			waitGone(t, prefix)
		})
	}
}

// childRunning reports whether a process of the test binaries has arg in
// its command line.
func childRunning(arg string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.HasPrefix(cl, binDir) && strings.Contains(cl, arg) {
			return true
		}
	}
	return false
}

// TestRemoveStale: the namespaces of a lab that was SIGKILLed (its pid no
// longer a loadgen) go at the next lab's start; a running lab's stay.
func TestRemoveStale(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces); not root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("needs ip: %v", err)
	}
	dead := "chfl999999-c1-n1"
	if _, err := os.Stat("/proc/999999"); err == nil {
		t.Skip("pid 999999 exists here")
	}
	mine := fmt.Sprintf("chfl%d-c1-n1", os.Getpid()) // the calling lab's own
	for _, ns := range []string{dead, mine} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", ns, err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", dead).Run()
		exec.Command("ip", "netns", "del", mine).Run()
	})
	if err := removeStale(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), dead) {
		t.Errorf("%s is left", dead)
	}
	// pid == this process counts as the running lab (Run calls it first).
	if !strings.Contains(string(out), mine) {
		t.Errorf("%s (this process's own prefix) was removed", mine)
	}
}
