package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Host is the cumulative CPU time of the whole machine the load generator
// runs on, from /proc/stat: what the run's components left idle, what
// other processes (kernel threads included) took, and what the
// hypervisor stole, so that a report on a shared or noisy machine says so.
//
// The busy time of a window is its length times the cores less the idle
// and stolen time: /proc/stat's idle and iowait come from the idle loop's own clock,
// while its user and system columns are tick samples (250 a second per
// CPU here), which under-counted a 2,000 TPS run of the CHF's five short-
// burst processes by a third and varied run to run.
type Host struct {
	Cores int     // CPUs online (cpuN lines)
	Idle  float64 // seconds idle or waiting for I/O, all CPUs
	Steal float64 // seconds the hypervisor ran something else while a CPU wanted to run
}

// HostWindow is the machine's CPU between two samples.
type HostWindow struct {
	Cores int
	Busy  float64 // seconds, all CPUs: the window's length × Cores − idle − steal
	Steal float64
}

// ReadHost reads /proc/stat.
func ReadHost() (Host, error) { return readHost("/proc") }

func readHost(root string) (Host, error) {
	b, err := os.ReadFile(root + "/stat")
	if err != nil {
		return Host{}, fmt.Errorf("cannot read the host's CPU times: %w", err)
	}
	return parseHostStat(b)
}

// parseHostStat parses the cpu lines of /proc/stat (times in USER_HZ).
func parseHostStat(b []byte) (Host, error) {
	var h Host
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 || !bytes.HasPrefix(f[0], []byte("cpu")) {
			continue
		}
		if len(f[0]) > 3 {
			h.Cores++
			continue
		}
		// cpu user nice system idle iowait irq softirq steal [guest guest_nice]
		if len(f) < 9 {
			return Host{}, fmt.Errorf("cannot parse the host's CPU times: %d fields in %q, want at least 8 times", len(f)-1, sc.Bytes())
		}
		var t [8]float64
		for i := range t {
			v, err := strconv.ParseUint(string(f[i+1]), 10, 64)
			if err != nil {
				return Host{}, fmt.Errorf("cannot parse the host's CPU times: field %d of %q: %w", i+1, sc.Bytes(), err)
			}
			t[i] = float64(v) / clockTicks
		}
		h.Idle = t[3] + t[4]
		h.Steal = t[7]
		found = true
	}
	if !found {
		return Host{}, fmt.Errorf("cannot parse the host's CPU times: no cpu line")
	}
	if h.Cores == 0 {
		h.Cores = 1
	}
	return h, nil
}

// HostDelta returns the host's CPU between two samples; ok is false
// when either sample lacks it.
func HostDelta(a, b Sample) (w HostWindow, ok bool) {
	if a.Host == nil || b.Host == nil || !b.At.After(a.At) {
		return HostWindow{}, false
	}
	span := b.At.Sub(a.At).Seconds() * float64(b.Host.Cores)
	steal := max(0, b.Host.Steal-a.Host.Steal)
	busy := span - (b.Host.Idle - a.Host.Idle) - steal
	return HostWindow{Cores: b.Host.Cores, Busy: min(max(0, busy), span), Steal: steal}, true
}

// Local reports whether every source is a process on this machine (so the
// host's busy time minus theirs is what other processes took).
func (s *Sampler) Local() bool {
	for _, src := range s.sources {
		if _, ok := src.(*Proc); !ok {
			return false
		}
	}
	return len(s.sources) > 0
}
