package cpu

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

const procStat = `cpu  2842479 260568 1293863 3283147 210670 0 387855 15576 0 0
cpu0 1414476 127480 635716 1721517 53026 0 186852 7921 0 0
cpu1 1428003 133088 658147 1561629 157644 0 201003 7655 0 0
intr 1 2 3
ctxt 123
`

// TestParseHostStat reads the cores, the idle time (idle + iowait) and
// the steal of /proc/stat, and names what is wrong with a malformed one.
func TestParseHostStat(t *testing.T) {
	h, err := parseHostStat([]byte(procStat))
	if err != nil {
		t.Fatal(err)
	}
	if h.Cores != 2 || math.Abs(h.Idle-(3283147+210670)/100.0) > 1e-6 || math.Abs(h.Steal-155.76) > 1e-6 {
		t.Errorf("parsed %+v, want 2 cores, idle 34938.17 s, steal 155.76 s", h)
	}
	for _, bad := range []string{"", "intr 1 2\n", "cpu  1 2 3\n", "cpu  1 2 x 4 5 6 7 8\n"} {
		if _, err := parseHostStat([]byte(bad)); err == nil || !strings.Contains(err.Error(), "host's CPU times") {
			t.Errorf("parseHostStat(%q) = %v, want an error about the host's CPU times", bad, err)
		}
	}
	if _, err := os.Stat("/proc/stat"); err == nil {
		if h, err := ReadHost(); err != nil || h.Cores < 1 {
			t.Errorf("ReadHost() = %+v, %v", h, err)
		}
	}
}

// TestHostDelta: a window's busy time is its length times the cores less
// the idle and stolen time, within [0, length × cores]; a sample without the host
// gives none.
func TestHostDelta(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := Sample{At: t0, Host: &Host{Cores: 2, Idle: 100, Steal: 1}}
	b := Sample{At: t0.Add(10 * time.Second), Host: &Host{Cores: 2, Idle: 112, Steal: 1.5}}
	w, ok := HostDelta(a, b)
	if !ok || w.Cores != 2 || math.Abs(w.Busy-7.5) > 1e-9 || math.Abs(w.Steal-0.5) > 1e-9 {
		t.Errorf("HostDelta = %+v %v, want 2 cores, busy 7.5 s (20 − 12 idle − 0.5 stolen), steal 0.5 s", w, ok)
	}
	b.Host.Idle = 130 // more idle than the window holds (clock skew)
	if w, _ := HostDelta(a, b); w.Busy != 0 {
		t.Errorf("busy %v with idle beyond the window, want 0", w.Busy)
	}
	b.Host.Idle = 90 // idle went backwards
	if w, _ := HostDelta(a, b); w.Busy != 20 {
		t.Errorf("busy %v with idle going backwards, want at most the window's 20 s", w.Busy)
	}
	if _, ok := HostDelta(a, Sample{At: b.At}); ok {
		t.Error("HostDelta without the second host sample is ok")
	}
	if _, ok := HostDelta(a, Sample{At: t0, Host: b.Host}); ok {
		t.Error("HostDelta over an empty window is ok")
	}
}

// TestSamplerLocal: other processes' share is known only when every
// source is a local process.
func TestSamplerLocal(t *testing.T) {
	if NewSampler().Local() {
		t.Error("an empty sampler is local")
	}
	s := NewSampler(Self("loadgen"), NewProc("cgw", 1))
	if !s.Local() {
		t.Error("processes are not local")
	}
	s.Add(NewMetrics("ocp", "http://127.0.0.1:1/metrics"))
	if s.Local() {
		t.Error("a scraped /metrics source counts as local")
	}
	if smp := NewSampler(Self("loadgen")).Sample(t.Context()); smp.Host == nil {
		if _, err := os.Stat("/proc/stat"); err == nil {
			t.Error("Sample has no host CPU on a machine with /proc/stat")
		}
	}
}
