package run

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/freeze"
)

// hostProbe is the host-freeze probe (package freeze) beside a run: each
// progress tick reads the second's figures for the time series, and the
// measured window's are summed for the result.
type hostProbe struct {
	mu     sync.Mutex
	p      *freeze.Probe // nil: not running (note says why)
	cpu    *cpu.Proc
	in     bool // inside the measured window
	window freeze.Stats
	cpuA   float64
	cpuSec float64
	opened bool
	closed bool
	note   string
}

// startHostProbe starts `exe freeze-probe` (o.HostProbe); "" = off (nil).
// A probe that cannot run leaves a note, never fails the run: it
// measures the machine, not the CHF.
func startHostProbe(ctx context.Context, o Options) *hostProbe {
	if o.HostProbe == "" {
		return nil
	}
	h := &hostProbe{}
	p, err := freeze.Start(ctx, o.HostProbe)
	if err != nil {
		h.note = "not measured: " + err.Error()
		if !errors.Is(err, freeze.ErrUnavailable) {
			o.Log.Warn("host freeze probe did not start", "err", err)
		}
		return h
	}
	h.p, h.cpu = p, cpu.NewProc("freeze-probe", p.PID())
	return h
}

// read returns the figures since the previous read (tick: the second's),
// adding them to the window's while it is open; ok is false once the
// probe is not running.
func (h *hostProbe) read() (s freeze.Stats, ok bool) {
	if h == nil {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.readLocked()
}

func (h *hostProbe) readLocked() (freeze.Stats, bool) {
	if h.p == nil {
		return nil, false
	}
	s, err := h.p.Read()
	if err != nil {
		h.note = fmt.Sprintf("not measured: %v", err)
		h.p.Close()
		h.p = nil
		return nil, false
	}
	if h.in {
		h.window = h.window.Add(s)
	}
	return s, true
}

// open starts the measured window: what came before it is dropped.
func (h *hostProbe) open() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readLocked()
	if h.p == nil {
		return
	}
	h.in, h.opened, h.window = true, true, nil
	h.cpuA, _ = h.cpu.Seconds(context.Background())
}

// shut ends the measured window.
func (h *hostProbe) shut() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.in {
		return
	}
	h.readLocked()
	h.in, h.closed = false, h.p != nil
	if h.p != nil {
		b, _ := h.cpu.Seconds(context.Background())
		h.cpuSec = max(0, b-h.cpuA)
	}
}

// stop ends the probe and returns the window's summary, or the note that
// says why there is none.
func (h *hostProbe) stop() (*freeze.Summary, string) {
	if h == nil {
		return nil, ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p != nil {
		h.p.Close()
		h.p = nil
	}
	switch {
	case h.closed:
		return freeze.Summarize(h.window, h.cpuSec), ""
	case h.note != "":
		return nil, h.note
	case h.opened:
		return nil, "not measured: the run stopped before the window closed"
	}
	return nil, "not measured: the window did not open"
}
