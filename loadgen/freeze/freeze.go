// Package freeze measures how long this machine's CPUs were frozen by
// what runs beneath the operating system: a virtual machine's host not
// running its virtual CPUs, or delivering their timer late.
//
// The probe is jHiccup's idea applied to the host rather than a runtime:
// a thread pinned to each CPU the load generator may use sleeps Period
// again and again and records how much later than asked it woke. The
// threads run under SCHED_FIFO at the highest real-time priority, so no
// process of the machine can keep them from running: the kernel switches
// to such a thread as soon as its timer fires. A wake-up later than
// Threshold therefore means the CPU itself did not run (or its timer
// interrupt did not arrive) for that long. A virtual machine's host can
// freeze a CPU for tens of milliseconds with the kernel's steal time at
// zero, and such freezes set a run's worst seconds; why sweeps read them
// is in docs/design/004-sweep-voids-noisy-attempts.md, and what one
// machine showed in docs/measurements/2026-12-05-host-freezes.md.
//
// The probe is a child process (`loadgen freeze-probe`, Serve) so that
// its real-time threads never share a Go runtime with the load
// generator, and its threads set SCHED_RESET_ON_FORK so that no thread
// it creates inherits the policy. The parent (Start, Probe) asks it for
// the figures since the last ask by writing a newline to its standard
// input and reads one line back; closing the input ends the child. It
// needs CAP_SYS_NICE (root) for SCHED_FIFO; without it, or on another OS,
// Start fails with ErrUnavailable and nothing is measured: a probe under
// the normal policy would measure the machine's own load instead.
package freeze

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Command is the loadgen subcommand that runs the probe (Serve).
const Command = "freeze-probe"

// Period is how long each probe thread sleeps between wake-ups: at 5 ms
// two CPUs wake 400 times a second, often enough to see a freeze of a
// few milliseconds and rarely enough that the probe's own cost (a
// wake-up of a virtual CPU is expensive) stays a small share of each CPU
// and does not show in the CHF's figures (measured in
// docs/measurements/2026-12-05-host-freezes.md).
const Period = 5 * time.Millisecond

// Threshold is the lateness of a wake-up that counts as a freeze. Below
// it, a real-time thread can be late for reasons inside the machine (a
// kernel built without preemption finishing a system call, interrupts);
// 2 ms is above what those gave under a CHF's load here.
const Threshold = 2 * time.Millisecond

// Long is the lateness from which a freeze is also counted apart (Over10ms):
// long enough to queue a loaded chain of services past a 10 ms SLO.
const Long = 10 * time.Millisecond

// ErrUnavailable is returned by Start where the probe cannot run: not
// Linux, or SCHED_FIFO refused (no CAP_SYS_NICE).
var ErrUnavailable = errors.New("freeze: host probe unavailable")

// ErrProbe is returned when a started probe stops answering or answers
// something it should not.
var ErrProbe = errors.New("freeze: host probe failed")

// CPU is one CPU's figures over an interval.
type CPU struct {
	CPU int `json:"cpu"`
	// Wakeups counts the probe's wake-ups; Count those late by Threshold
	// or more, Over10ms those late by Long or more.
	Wakeups  int64 `json:"wakeups"`
	Count    int64 `json:"count"`
	Over10ms int64 `json:"over_10ms"`
	// WorstMs is the lateness of the latest wake-up that counts (0: none
	// was Threshold late); FrozenMs sums the lateness of the wake-ups that
	// count (a freeze the probe slept through is seen as the
	// part of it after its timer was due).
	WorstMs  float64 `json:"worst_ms"`
	FrozenMs float64 `json:"frozen_ms"`
}

func (c *CPU) add(o CPU) {
	c.Wakeups += o.Wakeups
	c.Count += o.Count
	c.Over10ms += o.Over10ms
	c.WorstMs = max(c.WorstMs, o.WorstMs)
	c.FrozenMs += o.FrozenMs
}

// Stats are the figures of every probed CPU over one interval.
type Stats []CPU

// Add adds o's figures CPU by CPU (o's CPUs must be s's, or s empty).
func (s Stats) Add(o Stats) Stats {
	if len(s) == 0 {
		return append(Stats(nil), o...)
	}
	for i := range s {
		if i < len(o) {
			s[i].add(o[i])
		}
	}
	return s
}

// Total is every CPU's figures together (CPU -1), the worst being the
// worst of any CPU.
func (s Stats) Total() CPU {
	t := CPU{CPU: -1}
	for _, c := range s {
		t.add(c)
	}
	return t
}

// Summary is a run's host freezes over its measured window.
type Summary struct {
	PeriodMs    float64 `json:"period_ms"`
	ThresholdMs float64 `json:"threshold_ms"`
	// The totals over every probed CPU.
	Wakeups  int64   `json:"wakeups"`
	Count    int64   `json:"count"`
	Over10ms int64   `json:"over_10ms"`
	WorstMs  float64 `json:"worst_ms"`
	FrozenMs float64 `json:"frozen_ms"`
	// FrozenPercent is FrozenMs over the window's time on every probed CPU
	// (set by report.Result.Recompute from the window).
	FrozenPercent float64 `json:"frozen_percent"`
	CPUs          []CPU   `json:"cpus"`
	// ProbeCPUSeconds is what the probe process itself used in the window
	// (it is not one of the run's components: the host's "not the run's
	// processes" share includes it).
	ProbeCPUSeconds float64 `json:"probe_cpu_seconds"`
}

// Summarize makes the window's summary of s.
func Summarize(s Stats, probeCPU float64) *Summary {
	t := s.Total()
	return &Summary{
		PeriodMs: ms(Period), ThresholdMs: ms(Threshold),
		Wakeups: t.Wakeups, Count: t.Count, Over10ms: t.Over10ms, WorstMs: t.WorstMs, FrozenMs: t.FrozenMs,
		CPUs: append([]CPU(nil), s...), ProbeCPUSeconds: probeCPU,
	}
}

// Line is the summary in a few words for reports.
func (s *Summary) Line() string {
	return fmt.Sprintf("worst %.1f ms, %d freezes of %.0f ms or more (%d of %.0f ms or more), %.0f ms frozen in all (%.2f%% of the CPUs' time)",
		s.WorstMs, s.Count, s.ThresholdMs, s.Over10ms, ms(Long), s.FrozenMs, s.FrozenPercent)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// readyTimeout bounds the probe's start; askTimeout one answer (tests
// shorten them).
var (
	readyTimeout = 5 * time.Second
	askTimeout   = 2 * time.Second
)

// maxLine bounds one line of the probe (a few dozen bytes per CPU).
const maxLine = 1 << 20

// Probe is a running probe process. Its methods are safe for concurrent
// use; Read and Close serialize.
type Probe struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	pid    int
	stdin  io.WriteCloser
	lines  chan string
	exited chan struct{}
	cpus   []int
	err    error // the first failure: every later Read returns it
	closed bool
}

// Start starts `exe freeze-probe` and waits until its threads run, at
// most 5 s. It returns an error wrapping ErrUnavailable when the child
// says it cannot run (no SCHED_FIFO, not Linux).
func Start(ctx context.Context, exe string) (*Probe, error) {
	cmd := exec.Command(exe, Command)
	setProcAttr(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("cannot start the host probe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("cannot start the host probe: %w", err)
	}
	var stderr tail
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the host probe %s: %w", exe, err)
	}
	p := &Probe{cmd: cmd, pid: cmd.Process.Pid, stdin: stdin, lines: make(chan string, 1), exited: make(chan struct{})}
	go p.readLines(stdout)
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	var first string
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.Close()
			return nil, fmt.Errorf("%w: it exited before it was ready (%s)", ErrProbe, stderr.String())
		}
		first = l
	case <-t.C:
		p.Close()
		return nil, fmt.Errorf("%w: not ready within %v", ErrProbe, readyTimeout)
	case <-ctx.Done():
		p.Close()
		return nil, fmt.Errorf("cannot start the host probe: %w", ctx.Err())
	}
	if msg, ok := strings.CutPrefix(first, "unavailable "); ok {
		p.Close()
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, msg)
	}
	cpus, err := parseReady(first)
	if err != nil {
		p.Close()
		return nil, err
	}
	p.cpus = cpus
	return p, nil
}

// readLines passes the child's lines on until its output ends.
func (p *Probe) readLines(r io.Reader) {
	defer close(p.lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for sc.Scan() {
		p.lines <- sc.Text()
	}
}

// PID is the probe process's id.
func (p *Probe) PID() int { return p.pid }

// CPUs are the probed CPUs, in the order of every Stats.
func (p *Probe) CPUs() []int { return p.cpus }

// Read returns the figures since the previous Read (or since the probe
// started), waiting at most 2 s for the probe's answer. Once the probe
// has failed, every Read returns the error wrapping ErrProbe.
func (p *Probe) Read() (Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	if p.closed {
		return nil, fmt.Errorf("%w: read after close", ErrProbe)
	}
	fail := func(format string, a ...any) (Stats, error) {
		p.err = fmt.Errorf("%w: %s", ErrProbe, fmt.Sprintf(format, a...))
		p.kill()
		return nil, p.err
	}
	if _, err := io.WriteString(p.stdin, "\n"); err != nil {
		return fail("cannot ask it (it exited?): %v", err)
	}
	t := time.NewTimer(askTimeout)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok {
			return fail("it exited")
		}
		s, err := parseStats(l, p.cpus)
		if err != nil {
			return fail("%v", err)
		}
		return s, nil
	case <-t.C:
		return fail("no answer within %v", askTimeout)
	}
}

// Close ends the probe: its input is closed, and it is killed if it has
// not exited within a second.
func (p *Probe) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range p.lines { // drain, so that the reader ends
		}
		p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// kill stops a failed probe at once (Close still reaps it).
func (p *Probe) kill() { p.cmd.Process.Kill() }

// parseReady reads "ready PERIOD_NS THRESHOLD_NS CPU,CPU,...".
func parseReady(l string) ([]int, error) {
	f := strings.Fields(l)
	if len(f) != 4 || f[0] != "ready" {
		return nil, fmt.Errorf("%w: unexpected first line %q", ErrProbe, trim(l))
	}
	if f[1] != strconv.FormatInt(int64(Period), 10) || f[2] != strconv.FormatInt(int64(Threshold), 10) {
		return nil, fmt.Errorf("%w: it runs with period %s ns and threshold %s ns, not this build's %d and %d (another loadgen binary?)", ErrProbe, f[1], f[2], Period, Threshold)
	}
	var cpus []int
	for _, c := range strings.Split(f[3], ",") {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: bad CPU %q in %q", ErrProbe, c, trim(l))
		}
		cpus = append(cpus, n)
	}
	return cpus, nil
}

// parseStats reads "s CPU:WAKEUPS:COUNT:OVER10:WORST_NS:FROZEN_NS ..."
// with one field per CPU of cpus, in their order.
func parseStats(l string, cpus []int) (Stats, error) {
	f := strings.Fields(l)
	if len(f) != 1+len(cpus) || f[0] != "s" {
		return nil, fmt.Errorf("unexpected answer %q (want figures for %d CPUs)", trim(l), len(cpus))
	}
	s := make(Stats, len(cpus))
	for i, x := range f[1:] {
		v := strings.Split(x, ":")
		if len(v) != 6 {
			return nil, fmt.Errorf("unexpected figures %q in %q", x, trim(l))
		}
		var n [6]int64
		for j := range v {
			k, err := strconv.ParseInt(v[j], 10, 64)
			if err != nil || k < 0 {
				return nil, fmt.Errorf("unexpected figures %q in %q", x, trim(l))
			}
			n[j] = k
		}
		if int(n[0]) != cpus[i] || n[2] > n[1] || n[3] > n[2] {
			return nil, fmt.Errorf("inconsistent figures %q for CPU %d", x, cpus[i])
		}
		s[i] = CPU{CPU: cpus[i], Wakeups: n[1], Count: n[2], Over10ms: n[3],
			WorstMs: float64(n[4]) / 1e6, FrozenMs: float64(n[5]) / 1e6}
	}
	return s, nil
}

func trim(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// tail keeps the last 512 bytes written to it: the probe's last words.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > 512 {
		t.b = append(t.b[:0], t.b[len(t.b)-512:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return "no output"
	}
	return strings.TrimSpace(string(t.b))
}

// serveAsks calls answer for every newline read from r and returns when r
// ends (the parent closed the pipe, or died).
func serveAsks(r io.Reader, answer func()) error {
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cannot read the parent's asks: %w", err)
		}
		if b == '\n' {
			answer()
		}
	}
}
