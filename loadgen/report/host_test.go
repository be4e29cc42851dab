package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/freeze"
)

// TestHostCPU: the machine's busy, idle and steal shares of the window,
// and what the run's components leave of the busy time, in the summary
// and the markdown; without local components that last share is unknown.
func TestHostCPU(t *testing.T) {
	r := &Result{DurationS: 10, CPUSeconds: map[string]float64{"cgw": 2, LoadgenComponent: 1},
		Host: &HostCPU{Cores: 2, BusySeconds: 4, StealSeconds: 0.2, Local: true}}
	if err := r.Recompute(); err != nil {
		t.Fatal(err)
	}
	h := r.Host
	if math.Abs(h.BusyPercent-40) > 1e-9 || math.Abs(h.IdlePercent-79) > 1e-9 || math.Abs(h.StealPercent-2) > 1e-9 || h.OtherPercent == nil || math.Abs(*h.OtherPercent-10) > 1e-9 {
		t.Fatalf("host %+v, want busy 40, idle 79, steal 2, other 10", h)
	}
	var sum, md bytes.Buffer
	r.WriteSummary(&sum)
	r.WriteMarkdown(&md)
	const line = "host CPU (this machine, 2 cores): busy 40.0%, idle 79% of the machine, not the run's processes 10.0%, steal 2.0%"
	if !strings.Contains(sum.String(), line) {
		t.Errorf("summary lacks %q:\n%s", line, sum.String())
	}
	if !strings.Contains(md.String(), "| host CPU (this machine, 2 cores) | busy 40.0%, idle 79% of the machine, not the run's processes 10.0%, steal 2.0% |") {
		t.Errorf("markdown lacks the host CPU row:\n%s", md.String())
	}

	r.Series = []Point{{HostBusy: 55.5, HostSteal: 3.25}}
	var csvb bytes.Buffer
	if err := r.WriteCSV(&csvb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csvb.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], ",host_busy,host_steal") || !strings.HasSuffix(lines[2], ",55.500,3.250") {
		t.Errorf("series.csv lacks the host's busy and steal per second:\n%s", csvb.String())
	}

	r.Host = &HostCPU{Cores: 2, BusySeconds: 4, Local: false}
	r.CPUSeconds["cgw"] = 9 // a remote SUT: more than the machine's busy time
	if err := r.Recompute(); err != nil {
		t.Fatal(err)
	}
	if r.Host.OtherPercent != nil {
		t.Errorf("other processes %v with remote components, want unknown", *r.Host.OtherPercent)
	}
	sum.Reset()
	r.WriteSummary(&sum)
	if strings.Contains(sum.String(), "not the run's processes") {
		t.Errorf("summary gives other processes' share with remote components:\n%s", sum.String())
	}
}

// TestHostFreezes: the probe's summary in the text and markdown reports,
// its share of the CPUs' time from the window, each second's worst freeze
// in series.csv (empty where the second was not probed), and the note
// that says why it was not measured.
func TestHostFreezes(t *testing.T) {
	r := &Result{DurationS: 10, HostFreezes: freeze.Summarize(freeze.Stats{
		{CPU: 0, Wakeups: 2000, Count: 3, Over10ms: 1, WorstMs: 23.5, FrozenMs: 40},
		{CPU: 1, Wakeups: 2000, Count: 1, WorstMs: 4, FrozenMs: 10},
	}, 0.1)}
	if err := r.Recompute(); err != nil {
		t.Fatal(err)
	}
	f := r.HostFreezes
	if f.Count != 4 || f.Over10ms != 1 || f.WorstMs != 23.5 || math.Abs(f.FrozenPercent-0.25) > 1e-9 {
		t.Fatalf("freezes %+v, want 4, 1 over 10 ms, worst 23.5, 0.25%% frozen (50 ms of 2 × 10 s)", f)
	}
	var sum, md bytes.Buffer
	r.WriteSummary(&sum)
	r.WriteMarkdown(&md)
	const line = "host freezes (a SCHED_FIFO probe on each of 2 CPUs, every 5 ms): worst 23.5 ms, 4 freezes of 2 ms or more (1 of 10 ms or more), 50 ms frozen in all (0.25% of the CPUs' time)"
	if !strings.Contains(sum.String(), line) {
		t.Errorf("summary lacks %q:\n%s", line, sum.String())
	}
	if !strings.Contains(md.String(), "| host freezes (SCHED_FIFO probe, 2 CPUs, every 5 ms) | worst 23.5 ms,") {
		t.Errorf("markdown lacks the host freezes row:\n%s", md.String())
	}

	worst := 12.25
	r.Series = []Point{{HostFreezeMs: &worst}, {}}
	var csvb bytes.Buffer
	if err := r.WriteCSV(&csvb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csvb.String()), "\n")
	if len(lines) != 4 || !strings.HasSuffix(lines[0], ",host_freeze") || !strings.HasSuffix(lines[2], ",12.250") || !strings.HasSuffix(lines[3], ",") {
		t.Errorf("series.csv lacks each second's worst freeze:\n%s", csvb.String())
	}

	r.HostFreezes, r.HostFreezesNote = nil, "not measured: needs root"
	sum.Reset()
	r.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "host freezes: not measured: needs root\n") {
		t.Errorf("summary lacks the note:\n%s", sum.String())
	}
}
