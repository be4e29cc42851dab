package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
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
