// Package engine is the open-loop scheduler of the load generator.
//
// Flows (sessions, SMS events, balance inquiries; see loadgen/scenario)
// start at times computed from the offered rate and ramp-up (generated as
// they fall due, never materialised), and every later request of a session
// is due a think time after the previous one was *scheduled*, whatever the
// responses did. Requests leave at their due times; latency is measured
// from the due time (so a stalled server shows up in every request that
// queued behind it: no coordinated omission), service time from the
// actual send, and the scheduling lag (actual − due send) is recorded
// beside them so that a reader can see the instrument's own lateness.
//
// The engine knows flows, their timing and the ledger, and nothing about
// HTTP or Diameter: it describes each request as a protocol-neutral
// driver.Charge and reads back a driver.Outcome (see loadgen/driver).
//
// Data flow: Run starts W workers. A worker owns its flows, a min-heap of
// due requests, a bounded FIFO backlog, its histograms and counters, and
// its own driver.Worker (for h2c on Linux an event loop with its own
// connections): it queues every request due, flushes them, and waits in
// the driver worker's Poll until the next due time, the done callbacks
// running inside Poll on the worker's goroutine, so nothing in the load
// loop takes a shared lock. With Pacing it wakes on multiples of the
// pacing interval instead and sends every request due by then together.
// A request that finds MaxInFlight/W requests in flight waits in the
// backlog; it is counted late if it leaves more than LateThreshold after
// its due time, and a new flow that cannot leave within LateDrop (or finds
// the backlog full) is dropped and counted. A request shed or without a
// definitive answer waits for its retry in a retry queue bounded like the
// backlog, and leaves within the same in-flight share; a retry that finds
// the queue full or could not be answered within the drain bound is
// dropped and its request given up (its usage counted in UsageLost).
// Every request is bounded by the driver's timeout, the drain at the end
// by the timeout and the think time (one timeout more with retries), and
// a cancelled run by interruptGrace: memory and time never grow with the
// offered rate. Workers publish one interval summary per second
// to an aggregator that drives live progress and the time series; at the
// end the per-worker histograms are merged exactly.
package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// Op is the kind of one transaction.
type Op int

// Operations, each one transaction.
const (
	OpCreate Op = iota
	OpUpdate
	OpRelease
	OpEvent
	OpBalance
	NumOps
)

var opNames = [NumOps]string{"create", "update", "release", "event", "balance"}

func (o Op) String() string { return opNames[o] }

// OpNames returns the operation names in Op order.
func OpNames() []string { return opNames[:] }

// ErrConfig is returned for an unusable Config.
var ErrConfig = errors.New("engine: invalid config")

// Config is one run.
type Config struct {
	Scenario scenario.Scenario
	Driver   driver.Driver
	// Workers is the number of scheduler goroutines; 0 = one per
	// TxnPerWorker transactions per second offered, at least one and at
	// most GOMAXPROCS. Fewer workers batch more requests per wake-up.
	Workers int
	// Tick, when set, is called from one goroutine about once a second
	// with the figures of the last complete second.
	Tick func(Tick)
	// Pacing, when positive, makes workers wake on multiples of it and
	// send every request due by then in one batch: fewer wake-ups and
	// system calls per request, at the cost of sends up to Pacing late
	// (which the latency, measured from the due time, and the scheduling
	// lag show). 0 sends each request at its own due time.
	Pacing time.Duration
	// Rater, when set, gives the charge expected for each logical request
	// resolved as a success (Ledger.Expected): an expectation independent
	// of what the CHF reports.
	Rater Rater
	// Phase, when set, is called when the run enters a phase
	// ("ramp-up", "warm-up", "measure", "drain", "done").
	Phase func(name string)
	// Observe, when set, is called by the worker that completed it for
	// every first attempt: its operation, latency from the due time and
	// error class ("" on success). It runs on the hot path: it must not
	// block or take a lock shared by the workers (loadgen/live records
	// with atomic operations).
	Observe func(op Op, latency time.Duration, class string)
	// Operator, when set, is asked to notify the share of sessions
	// Scenario.Notifications gives (see Operator); it needs a driver that
	// delivers notifications (driver.Notifiable).
	Operator Operator
}

// Rater rates a charge independently of the CHF.
type Rater interface {
	// Rate returns the charge expected, in minor units, for the usage c
	// reports: Used on update and release, Requested on an event; 0 for
	// create and balance.
	Rate(c *driver.Charge) int64
}

// TimedRater is a Rater whose expectation depends on when the request was
// sent (a tariff changed during the run, audit.Change): RateAt returns
// the charge expected for c sent at sent and, when the CHF may have
// rated it on either of two tariffs then (ambiguous), the other
// acceptable charge. The engine takes alt when the CHF reported exactly
// it.
type TimedRater interface {
	Rater
	RateAt(c *driver.Charge, sent time.Time) (want, alt int64, ambiguous bool)
}

// Tick is one second of a run.
type Tick struct {
	Second    int     `json:"t"` // seconds since the run started
	Phase     string  `json:"phase"`
	Offered   int64   `json:"offered"` // requests due in this second
	Completed int64   `json:"completed"`
	Errors    int64   `json:"errors"`
	Late      int64   `json:"late"`
	Dropped   int64   `json:"dropped"`
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	P999      float64 `json:"p999_ms"`
	Max       float64 `json:"max_ms"`
	InFlight  int64   `json:"in_flight"`
	// OpenSessions is the data and voice sessions open at the second's
	// end (started, not yet ended).
	OpenSessions int64 `json:"open_sessions"`
	// ServiceP50/P99 are the service time (from the actual send) and
	// SchedLagP99 the scheduler's lateness (actual − due send) of the
	// second, in ms.
	ServiceP50  float64 `json:"service_p50_ms"`
	ServiceP99  float64 `json:"service_p99_ms"`
	SchedLagP99 float64 `json:"sched_lag_p99_ms"`
	// OpCompleted and OpErrors count completions and errors per
	// operation; ErrorClasses errors per class (nil when none).
	OpCompleted  map[string]int64 `json:"op_completed,omitempty"`
	OpErrors     map[string]int64 `json:"op_errors,omitempty"`
	ErrorClasses map[string]int64 `json:"error_classes,omitempty"`
}

// OpStats are the measured-window figures of one operation.
type OpStats struct {
	Count   int64 // completed (any outcome)
	Errors  int64
	Late    int64
	Dropped int64
	Latency *histogram.Histogram // from the due time
	Service *histogram.Histogram // from the actual send
	// SchedLag is actual send − due time of each request sent (first
	// attempts): the scheduler's own lateness.
	SchedLag *histogram.Histogram
	// Shed counts the requests the CHF refused for overload
	// (driver.Outcome.Shed); Admitted is the latency, from the due time,
	// of the others: what the admitted requests saw.
	Shed     int64
	Admitted *histogram.Histogram
}

// Add adds o's counts to s's and merges o's histograms into s's
// exactly: a worker's figures into its run's, or a shard's into the
// merged run's (report.Merge). A nil histogram of o is skipped; a nil
// one of s is created when o has it.
func (s *OpStats) Add(o *OpStats) {
	s.Count += o.Count
	s.Errors += o.Errors
	s.Late += o.Late
	s.Dropped += o.Dropped
	s.Shed += o.Shed
	mergeInto(&s.Latency, o.Latency)
	mergeInto(&s.Service, o.Service)
	mergeInto(&s.SchedLag, o.SchedLag)
	mergeInto(&s.Admitted, o.Admitted)
}

func mergeInto(dst **histogram.Histogram, src *histogram.Histogram) {
	if src == nil {
		return
	}
	if *dst == nil {
		*dst = histogram.New()
	}
	(*dst).Merge(src)
}

// Stats is the outcome of a run. Counts and histograms cover requests due
// inside the measured window; Ledger covers the whole run.
type Stats struct {
	Started       time.Time
	MeasureStart  time.Time
	MeasureEnd    time.Time
	Ended         time.Time
	Ops           [NumOps]OpStats
	Errors        map[string]int64 // by class, measured window
	ErrorsOutside int64            // errors in ramp-up, warm-up and drain
	Offered       int64            // requests due in the window (sent or dropped)
	Series        []Tick
	Ledger        *Ledger
	// Unresolved counts charging requests whose outcome is unknown
	// (timeout, connection failure, 5xx answer): the audit cannot expect
	// to reconcile exactly when it is not zero.
	Unresolved int64
	// MissingCharged counts 2xx charging answers without X-Chf-Charged.
	MissingCharged int64
	// Interrupted is set when ctx was cancelled before the run ended:
	// no flow started after it, live sessions were released, and what
	// was still in flight after a grace period was abandoned.
	Interrupted bool
	// Abandoned counts requests given up without an outcome: in flight or
	// waiting when an interrupted run (or a drain beyond its bound)
	// ended.
	Abandoned int64
	// Retransmits counts requests sent again with the same identity
	// (Scenario.Retransmit), RetransmitMismatches the retransmissions
	// whose answer reported another charge than the first answer.
	Retransmits          int64
	RetransmitMismatches int64
	// Retried counts the retries sent for requests shed or without a
	// definitive answer (Scenario.RetryErrors), RetryResolved the
	// requests one of them resolved (the rest stay in Unresolved when in
	// doubt). RetriesDropped counts the retries not made because the
	// retry queue was full or the retry could not be answered within the
	// run's drain bound: their requests were given up.
	Retried        int64
	RetryResolved  int64
	RetriesDropped int64
	// UsageLost is the usage no attempt delivered (all phases).
	UsageLost UsageLost
	// Notices are the CHF-initiated notifications of the run (all
	// phases); zero when the driver delivers none.
	Notices NoticeStats
	// OpenSessionsPeak is the most data and voice sessions open at once
	// (per-second figures), OpenSessionsEnd those open at the end of the
	// measured window; SessionLimited counts sessions not started
	// because Scenario.MaxOpenSessions were open (counted dropped).
	OpenSessionsPeak int64
	OpenSessionsEnd  int64
	SessionLimited   int64
}

// FlowBytes is the size of what the engine holds per open session between
// its requests (plus the session reference's bytes and a heap slot).
const FlowBytes = int(unsafe.Sizeof(flow{}))

// SchedLag returns the merged scheduling-lag histogram of every operation.
func (s *Stats) SchedLag() *histogram.Histogram {
	h := histogram.New()
	for i := range s.Ops {
		h.Merge(s.Ops[i].SchedLag)
	}
	return h
}

// Latency returns the merged latency histogram of every operation.
func (s *Stats) Latency() *histogram.Histogram {
	h := histogram.New()
	for i := range s.Ops {
		h.Merge(s.Ops[i].Latency)
	}
	return h
}

// Service returns the merged service-time histogram of every operation.
func (s *Stats) Service() *histogram.Histogram {
	h := histogram.New()
	for i := range s.Ops {
		h.Merge(s.Ops[i].Service)
	}
	return h
}

// Totals sums the per-operation counters.
func (s *Stats) Totals() (count, errs, late, dropped int64) {
	for _, o := range s.Ops {
		count += o.Count
		errs += o.Errors
		late += o.Late
		dropped += o.Dropped
	}
	return
}

// Run executes cfg and returns its statistics. Cancelling ctx ends the
// run within about interruptGrace: no new flow starts, live sessions are
// released at once, requests still in flight after the grace period are
// abandoned (Stats.Abandoned), and Stats.Interrupted is set.
func Run(ctx context.Context, cfg Config) (*Stats, error) {
	sc := cfg.Scenario
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if cfg.Driver == nil {
		return nil, fmt.Errorf("%w: no driver", ErrConfig)
	}
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	nw := cfg.Workers
	if nw <= 0 {
		nw = defaultWorkers(sc.OfferedTPS(), runtime.GOMAXPROCS(0))
	}
	if nw > sc.MaxInFlight {
		nw = sc.MaxInFlight
	}
	ramp := sc.Phases.RampUp.D()
	mStart := ramp + sc.Phases.WarmUp.D()
	mEnd := mStart + sc.Phases.Duration.D()

	start := time.Now()
	agg := newAggregator(cfg.Tick, start, ramp, mStart, mEnd)
	sched := newSchedule(sc.FlowRate(), ramp)

	workers := make([]*worker, nw)
	var refused *atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		dw, err := cfg.Driver.NewWorker()
		if err != nil {
			for _, w := range workers[:i] {
				w.dw.Close()
			}
			return nil, fmt.Errorf("cannot create a driver worker: %w", err)
		}
		workers[i] = newWorker(i, nw, &cfg, dw, first, start, sched, agg, mStart, mEnd)
	}
	if nd, ok := cfg.Driver.(driver.Notifiable); ok {
		r := &noticeRouter{workers: workers}
		for _, w := range workers {
			w.notices = make(chan driver.Notice, noticeCap)
			w.live = map[uint64]*flow{}
		}
		if !nd.SetNoticeSink(r.sink) {
			for _, w := range workers {
				w.notices, w.live = nil, nil
			}
		}
		defer func() { nd.SetNoticeSink(func(driver.Notice) bool { return false }) }()
		refused = &r.refused
	}
	if cfg.Operator != nil && sc.Notifications.Enabled() && workers[0].notices == nil {
		for _, w := range workers {
			w.dw.Close()
		}
		return nil, fmt.Errorf("%w: the scenario's notifications need a driver that receives them (a notify listener)", ErrConfig)
	}
	aggDone := make(chan struct{})
	go func() { agg.run(); close(aggDone) }()
	phaseDone := make(chan struct{})
	go announcePhases(cfg.Phase, start, ramp, mStart, mEnd, phaseDone)
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx) }()
	}
	wg.Wait()
	close(phaseDone)
	close(agg.in)
	<-aggDone
	if cfg.Phase != nil {
		cfg.Phase("done")
	}

	st := &Stats{
		Started:      start,
		MeasureStart: start.Add(mStart),
		MeasureEnd:   start.Add(mEnd),
		Ended:        time.Now(),
		Errors:       map[string]int64{},
		Series:       agg.series(),
		Ledger:       workers[0].ledger,
		Notices:      newNoticeStats(),
	}
	for i := range st.Ops {
		st.Ops[i].Latency = histogram.New()
		st.Ops[i].Service = histogram.New()
		st.Ops[i].SchedLag = histogram.New()
		st.Ops[i].Admitted = histogram.New()
	}
	for i, w := range workers {
		for o := range st.Ops {
			st.Ops[o].Add(&w.ops[o])
		}
		for k, v := range w.errors {
			st.Errors[k] += v
		}
		st.ErrorsOutside += w.errorsOutside
		st.Offered += w.offered
		st.Unresolved += w.unresolved
		st.MissingCharged += w.missingCharged
		st.Abandoned += w.abandoned
		st.Retransmits += w.retransmits
		st.RetransmitMismatches += w.retxMismatch
		st.Retried += w.retried
		st.RetryResolved += w.retryResolved
		st.RetriesDropped += w.retriesDropped
		st.UsageLost.Add(w.lost)
		st.SessionLimited += w.sessLimited
		st.Interrupted = st.Interrupted || w.interrupted
		st.Notices.merge(&w.nst)
		if i > 0 {
			st.Ledger.Merge(w.ledger)
		}
		if w.stoppedEarly && st.MeasureEnd.After(w.stopTime) {
			st.MeasureEnd = w.stopTime
		}
	}
	if refused != nil {
		st.Notices.Refused = refused.Load()
	}
	for _, t := range st.Series {
		st.OpenSessionsPeak = max(st.OpenSessionsPeak, t.OpenSessions)
		if time.Duration(t.Second)*time.Second < mEnd {
			st.OpenSessionsEnd = t.OpenSessions
		}
	}
	return st, nil
}

// TxnPerWorker is the offered load (transactions per second) one scheduler
// goroutine handles by default: one worker sends thousands of requests per
// second on a fraction of a core, and every extra worker splits the batches
// (more wake-ups and write system calls per request).
const TxnPerWorker = 25000

// defaultWorkers returns the default worker count for tps.
func defaultWorkers(tps float64, procs int) int {
	n := int(math.Ceil(tps / TxnPerWorker))
	return max(1, min(n, procs))
}

// announcePhases reports phase changes on the wall clock.
func announcePhases(fn func(string), start time.Time, ramp, mStart, mEnd time.Duration, done <-chan struct{}) {
	if fn == nil {
		return
	}
	steps := []struct {
		at   time.Duration
		name string
	}{{0, "ramp-up"}, {ramp, "warm-up"}, {mStart, "measure"}, {mEnd, "drain"}}
	for _, s := range steps {
		if s.name == "ramp-up" && ramp == 0 || s.name == "warm-up" && mStart == ramp {
			continue
		}
		t := time.NewTimer(time.Until(start.Add(s.at)))
		select {
		case <-t.C:
			fn(s.name)
		case <-done:
			t.Stop()
			return
		}
	}
}

// schedule maps the global flow index k to its start time: the rate grows
// linearly from 0 to rate over ramp, then stays.
type schedule struct {
	rate float64 // flows per second
	ramp float64 // seconds
}

func newSchedule(rate float64, ramp time.Duration) schedule {
	return schedule{rate: rate, ramp: ramp.Seconds()}
}

// at returns the start of flow k in nanoseconds since the run began.
func (s schedule) at(k int64) int64 {
	n := float64(k)
	var t float64
	if s.ramp > 0 && n < s.rate*s.ramp/2 {
		t = math.Sqrt(2 * s.ramp * n / s.rate)
	} else if s.ramp > 0 {
		t = s.ramp + (n-s.rate*s.ramp/2)/s.rate
	} else {
		t = n / s.rate
	}
	return int64(t * 1e9)
}

// first returns the smallest flow index whose start is at or after t (ns
// since the run began): the inverse of at.
func (s schedule) first(t int64) int64 {
	if t <= 0 {
		return 0
	}
	x := float64(t) / 1e9
	var n float64
	if s.ramp > 0 && x < s.ramp {
		n = s.rate * x * x / (2 * s.ramp)
	} else if s.ramp > 0 {
		n = s.rate*s.ramp/2 + (x-s.ramp)*s.rate
	} else {
		n = x * s.rate
	}
	k := int64(math.Ceil(n))
	for k > 0 && s.at(k-1) >= t {
		k--
	}
	for s.at(k) < t {
		k++
	}
	return k
}

// aggregator collects per-second intervals from workers.
type aggregator struct {
	in    chan interval
	tick  func(Tick)
	start time.Time
	ramp  time.Duration
	mS    time.Duration
	mE    time.Duration
	secs  map[int]*secAgg
	pool  chan *histogram.Histogram
}

type interval struct {
	sec                                  int
	offered, completed, errs, late, drop int64
	inflight, open                       int64
	hist, svc, lag                       *histogram.Histogram
	opDone, opErrs                       [NumOps]int64
	classes                              map[string]int64 // nil until an error
}

type secAgg struct {
	t              Tick
	hist, svc, lag *histogram.Histogram // nil once final
	sent           bool
	// final: the percentiles are fixed and the histograms released.
	final bool
}

func newAggregator(tick func(Tick), start time.Time, ramp, mS, mE time.Duration) *aggregator {
	return &aggregator{
		in: make(chan interval, 1024), tick: tick, start: start, ramp: ramp, mS: mS, mE: mE,
		secs: map[int]*secAgg{}, pool: make(chan *histogram.Histogram, 256),
	}
}

// getHist returns a recycled or new interval histogram; safe for any goroutine.
func (a *aggregator) getHist() *histogram.Histogram {
	select {
	case h := <-a.pool:
		return h
	default:
		return histogram.New()
	}
}

func (a *aggregator) phase(sec int) string {
	t := time.Duration(sec) * time.Second
	switch {
	case t < a.ramp:
		return "ramp-up"
	case t < a.mS:
		return "warm-up"
	case t < a.mE:
		return "measure"
	}
	return "drain"
}

func (a *aggregator) run() {
	// Ticks fire ~250 ms after each second boundary so that workers have
	// flushed the second before.
	first := time.NewTimer(time.Until(a.start.Add(1250 * time.Millisecond)))
	defer first.Stop()
	tk := &time.Ticker{} // replaced at the first timer
	next := 0
	for {
		select {
		case iv, ok := <-a.in:
			if !ok {
				a.emit(math.MaxInt)
				return
			}
			a.add(iv)
		case now := <-first.C:
			tk = time.NewTicker(time.Second)
			defer tk.Stop()
			next = a.tickAt(now, next)
		case now := <-tk.C:
			next = a.tickAt(now, next)
		}
	}
}

// tickAt reports the seconds completed by now, from next on.
func (a *aggregator) tickAt(now time.Time, next int) int {
	cur := int(now.Sub(a.start) / time.Second)
	if cur-1 >= next {
		a.emit(cur - 1)
		return cur
	}
	return next
}

func (a *aggregator) add(iv interval) {
	s := a.secs[iv.sec]
	if s == nil {
		s = &secAgg{t: Tick{Second: iv.sec, Phase: a.phase(iv.sec)}, hist: a.getHist(), svc: a.getHist(), lag: a.getHist()}
		a.secs[iv.sec] = s
	}
	for i := range NumOps {
		if iv.opDone[i] > 0 || iv.opErrs[i] > 0 {
			if s.t.OpCompleted == nil {
				s.t.OpCompleted, s.t.OpErrors = map[string]int64{}, map[string]int64{}
			}
			s.t.OpCompleted[opNames[i]] += iv.opDone[i]
			s.t.OpErrors[opNames[i]] += iv.opErrs[i]
		}
	}
	for k, v := range iv.classes {
		if s.t.ErrorClasses == nil {
			s.t.ErrorClasses = map[string]int64{}
		}
		s.t.ErrorClasses[k] += v
	}
	if s.final {
		// Too late for the second's percentiles, which were released;
		// its counts still add up (the run's totals come from the
		// workers' own histograms).
		a.release(iv.svc)
		a.release(iv.lag)
		a.release(iv.hist)
	} else {
		a.recycle(s.svc, iv.svc)
		a.recycle(s.lag, iv.lag)
		a.recycle(s.hist, iv.hist)
	}
	s.t.Offered += iv.offered
	s.t.Completed += iv.completed
	s.t.Errors += iv.errs
	s.t.Late += iv.late
	s.t.Dropped += iv.drop
	s.t.InFlight += iv.inflight
	s.t.OpenSessions += iv.open
}

// emit reports every second up to and including last not yet reported.
func (a *aggregator) emit(last int) {
	keys := make([]int, 0, len(a.secs))
	for k, s := range a.secs {
		if k <= last && !s.sent {
			keys = append(keys, k)
		}
	}
	sort.Ints(keys)
	for _, k := range keys {
		s := a.secs[k]
		s.sent = true
		s.fill()
		if a.tick != nil && last != math.MaxInt {
			a.tick(s.t)
		}
	}
	// A second reported keepSeconds ago keeps only its Tick: its three
	// histograms (about 100 KB each) go back to the pool, so that the
	// series costs a Tick per second, not 300 KB, whatever --duration is.
	if last != math.MaxInt {
		for k, s := range a.secs {
			if s.sent && !s.final && k <= last-keepSeconds {
				s.fill() // with what arrived since it was reported
				a.release(s.hist)
				a.release(s.svc)
				a.release(s.lag)
				s.hist, s.svc, s.lag, s.final = nil, nil, nil, true
			}
		}
	}
}

// keepSeconds is how long after it is reported a second still takes late
// intervals into its percentiles.
const keepSeconds = 5

// release resets h and returns it to the pool.
func (a *aggregator) release(h *histogram.Histogram) {
	if h == nil {
		return
	}
	h.Reset()
	select {
	case a.pool <- h:
	default:
	}
}

// recycle merges h into dst and returns h to the pool.
func (a *aggregator) recycle(dst, h *histogram.Histogram) {
	if h == nil {
		return
	}
	dst.Merge(h)
	a.release(h)
}

func (s *secAgg) fill() {
	if s.final {
		return
	}
	sum := s.hist.Summary()
	s.t.P50, s.t.P90, s.t.P99, s.t.P999, s.t.Max = sum.P50, sum.P90, sum.P99, sum.P999, sum.Max
	svc, lag := s.svc.Summary(), s.lag.Summary()
	s.t.ServiceP50, s.t.ServiceP99, s.t.SchedLagP99 = svc.P50, svc.P99, lag.P99
}

func (a *aggregator) series() []Tick {
	keys := make([]int, 0, len(a.secs))
	for k := range a.secs {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]Tick, 0, len(keys))
	for _, k := range keys {
		s := a.secs[k]
		s.fill()
		out = append(out, s.t)
	}
	return out
}
