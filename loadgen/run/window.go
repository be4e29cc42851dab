package run

import (
	"context"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/hops"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// window measures the edges of a run's measured window from the engine's
// phase callback: when it opens ("measure") the faults start and the CPU,
// host probe and per-hop histograms are sampled; when it shuts ("drain")
// they are sampled again with the memory. Execute reads the figures after
// the run; mu guards them against the callback's goroutine.
type window struct {
	ctx     context.Context // the run's: fault injection stops with it
	o       *Options
	sampler *cpu.Sampler
	hp      *hostProbe

	mu         sync.Mutex
	start      time.Time         // when the window opened
	waitFaults func() []faultRun // waits for the injected faults to be undone
	cpuA, cpuB cpu.Sample
	haveA      bool
	haveB      bool
	hopsA      hops.Snapshot
	hopsB      hops.Snapshot
	haveHopsA  bool
	haveHopsB  bool
	mem        map[string]cpu.Memory
	heapLive   int64
}

// phase is the engine's phase callback.
func (w *window) phase(name string) {
	switch name {
	case "measure":
		w.open()
	case "drain":
		w.shut()
	}
}

func (w *window) open() {
	w.mu.Lock()
	w.start = time.Now()
	if len(w.o.Faults) > 0 {
		w.waitFaults = injectFaults(w.ctx, w.o.Injector, w.o.Faults, w.start)
	}
	w.mu.Unlock()
	s := w.sampler.Sample(context.Background())
	w.mu.Lock()
	w.cpuA, w.haveA = s, true
	w.mu.Unlock()
	w.hp.open()
	w.snapHops(&w.hopsA, &w.haveHopsA)
}

func (w *window) shut() {
	w.hp.shut()
	w.snapHops(&w.hopsB, &w.haveHopsB)
	s := w.sampler.Sample(context.Background())
	m, h := w.sampler.Memory(context.Background(), nil), liveHeap()
	w.mu.Lock()
	w.cpuB, w.haveB = s, true
	w.mem, w.heapLive = m, h
	w.mu.Unlock()
}

func (w *window) snapHops(into *hops.Snapshot, have *bool) {
	if w.o.Hops == nil {
		return
	}
	h := w.o.Hops.Snapshot(context.Background())
	w.mu.Lock()
	*into, *have = h, true
	w.mu.Unlock()
}

// measureStart is when the window opened (zero when it did not).
func (w *window) measureStart() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start
}

// faults waits until every fault injected is undone and returns their
// runs (nil without faults).
func (w *window) faults() []faultRun {
	w.mu.Lock()
	wait := w.waitFaults
	w.mu.Unlock()
	return wait()
}

// cpu returns the CPU seconds of every component over the window (scaled
// to st's measured window, which ctx may have cut short) and the host's,
// nil when the window never opened. A window that did not shut is shut
// now.
func (w *window) cpu(st *engine.Stats) (map[string]float64, *report.HostCPU) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.haveB {
		w.cpuB = w.sampler.Sample(context.Background())
	}
	if !w.haveA {
		return nil, nil
	}
	cpuSecs := cpu.Delta(w.cpuA, w.cpuB)
	h, hostOK := cpu.HostDelta(w.cpuA, w.cpuB)
	// The window may have been cut short by ctx; CPU covers the same span.
	if dt := w.cpuB.At.Sub(w.cpuA.At).Seconds(); dt > 0 {
		want := st.MeasureEnd.Sub(st.MeasureStart).Seconds()
		for k, v := range cpuSecs {
			cpuSecs[k] = v * want / dt
		}
		h.Busy, h.Steal = h.Busy*want/dt, h.Steal*want/dt
	}
	if !hostOK {
		return cpuSecs, nil
	}
	return cpuSecs, &report.HostCPU{Cores: h.Cores, BusySeconds: h.Busy, StealSeconds: h.Steal, Local: w.sampler.Local()}
}

// memory sets res's memory and per-hop figures and returns the load
// generator's live heap: as the window shut, or now when the run was
// interrupted before.
func (w *window) memory(res *report.Result) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mem == nil { // interrupted before the drain: what it holds now
		w.mem, w.heapLive = w.sampler.Memory(context.Background(), nil), liveHeap()
	}
	res.Memory = w.mem
	res.Hops, res.HopsNote = hopsOf(w.hopsA, w.hopsB, w.haveHopsA && w.haveHopsB, *w.o)
	return w.heapLive
}
