package engine

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// flow is one session, event or inquiry in progress. It belongs to its
// worker. Between two requests of a session (the think time, usually
// most of its life) it is all the loadgen holds for the session
// (FlowBytes); the request in flight or queued (Charge, Outcome,
// callback, timing, retransmission state) is a *request taken from the
// worker's pool at send and put back when the answer has been recorded,
// so the pool is bounded by the requests in flight and the backlog, not
// by the open sessions.
type flow struct {
	due     int64  // ns since start: when the current request is scheduled
	end     int64  // sessions: when the release is due
	id      uint64 // global flow index
	ref     []byte
	r       *request // the current request; nil between requests
	kind    scenario.Kind
	op      Op
	heapIdx int32
	sub     int32
	step    int32 // 0 first request; 1.. updates; then the release
	seq     uint32
	target  int32
	first   bool // the current request starts the flow (may be dropped)
	gone    bool // the session no longer exists
	open    bool // counted in the worker's open sessions
	// CHF-initiated notifications (notify.go); the rest of a notified
	// session's state (arrival times, the interrupted request, operator
	// calls) is in the worker's side map, w.side[id], when side is set
	notice    uint8 // pending: noticeReauth or noticeAbort
	answering uint8 // the current request answers a notice of this kind
	side      bool
	// threshold-driven sessions (scenario usage.go): the next request
	// reports used (volume or time, the requested unit), when its due
	// time came from a grant
	grantDriven bool
	offline     bool // the session's usage is charged offline
	used        uint64
}

// request is one request of a flow, from its send to its recorded
// answer. While it is in flight the driver worker holds its charge and
// outcome (the done callback hands them back on the worker's goroutine).
type request struct {
	f      *flow
	charge driver.Charge
	out    driver.Outcome
	err    error
	cb     func(error)
	supi   []byte
	sent   int64
	done   int64
	// retransmission of the current request
	attempt  uint8 // 0 the first; 1 the retransmission
	dup      uint8 // after the first's answer send it again: dupFlagged, dupPlain
	counted  bool  // the logical request's outcome is in the ledger
	hasChg0  bool
	charged0 int64 // what the first attempt reported charging
	// retries of a request shed or without a definitive answer
	// (Scenario.RetryErrors)
	tries   uint8 // retries scheduled so far
	retryAt int64 // ns since start: when the scheduled retry leaves
	doubt   bool  // an attempt got no definitive answer: it may have been applied
	flying  bool  // handed to the driver, not yet completed
}

// retryQueue holds the requests waiting to be retried, earliest first.
type retryQueue []*request

func (q retryQueue) Len() int           { return len(q) }
func (q retryQueue) Less(i, j int) bool { return q[i].retryAt < q[j].retryAt }
func (q retryQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *retryQueue) Push(x any)        { *q = append(*q, x.(*request)) }
func (q *retryQueue) Pop() any {
	old := *q
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return r
}

const (
	dupNone    = iota
	dupFlagged // a duplicate with the retransmission flag
	dupPlain   // a duplicate without it (same identity and content)
)

// flowHeap is a binary min-heap of the flows waiting for their next
// request, by due time. Each entry keeps its flow's due beside the
// pointer, so a comparison reads only the heap's own array (with
// hundreds of thousands of open sessions, following each flow's pointer
// was a cache miss per comparison), and nothing goes through
// container/heap's interface. The algorithms are container/heap's, so
// flows due at the same time leave in the same order. f.heapIdx is the
// flow's index here, -1 when it is not in the heap.
type flowHeap []flowEntry

type flowEntry struct {
	due int64
	f   *flow
}

func (h flowHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].f.heapIdx, h[j].f.heapIdx = int32(i), int32(j)
}

func (h flowHeap) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || h[j].due >= h[i].due {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h flowHeap) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h[j2].due < h[j1].due {
			j = j2 // right child
		}
		if h[j].due >= h[i].due {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// push adds f, due at f.due.
func (h *flowHeap) push(f *flow) {
	f.heapIdx = int32(len(*h))
	*h = append(*h, flowEntry{f.due, f})
	h.up(len(*h) - 1)
}

// pop removes and returns the flow due first.
func (h *flowHeap) pop() *flow {
	n := len(*h) - 1
	h.swap(0, n)
	h.down(0, n)
	return h.cut()
}

// remove removes the flow at index i.
func (h *flowHeap) remove(i int) *flow {
	n := len(*h) - 1
	if n != i {
		h.swap(i, n)
		if !h.down(i, n) {
			h.up(i)
		}
	}
	return h.cut()
}

// cut drops the last entry and returns its flow.
func (h *flowHeap) cut() *flow {
	old := *h
	e := old[len(old)-1]
	e.f.heapIdx = -1
	old[len(old)-1] = flowEntry{}
	*h = old[:len(old)-1]
	return e.f
}

// reorder restores the heap after the flows' due times changed.
func (h flowHeap) reorder() {
	for i := range h {
		h[i].due = h[i].f.due
	}
	n := len(h)
	for i := n/2 - 1; i >= 0; i-- {
		h.down(i, n)
	}
}

// worker is one scheduler goroutine with its own driver worker and
// statistics.
type worker struct {
	id, n      int
	cfg        *Config
	sc         *scenario.Scenario
	first      scenario.SUPI
	start      time.Time
	timed      TimedRater // cfg.Rater when it is one
	sched      schedule
	agg        *aggregator
	dw         driver.Worker
	mStart     int64
	mEnd       int64
	stopAt     int64 // no new flow at or after
	rng        *rand.Rand
	jit        *rand.Rand // the retries' jitter, apart from rng: faults do not change the load after them
	shares     [scenario.NumKinds]float64
	timeout    int64
	lateThr    int64
	lateDrop   int64
	pacing     int64
	retransmit float64
	// retries (Scenario.RetryErrors): at most retryMax, the first
	// retryBackoff after the failure (or the Retry-After a shed asked
	// for), doubling; none that could not finish by retryLimit, and at
	// most retryCap waiting (the retry queue is bounded as the backlog is)
	retryMax     int
	retryBackoff int64
	retryLimit   int64
	retryCap     int
	retryQ       retryQueue

	heap        flowHeap
	backlog     []*flow // FIFO; head at bhead
	bhead       int
	backlogCap  int // new flows beyond it are dropped at once
	free        []*flow
	reqs        []*request // free requests
	allReqs     []*request // every request of the pool (the abandoned in flight are found here)
	picker      *scenario.Picker
	open        int // data and voice sessions started and not ended
	openPeak    int
	maxOpen     int // bound on open (Scenario.MaxOpenSessions split over the workers)
	sessLimited int64
	// steady start: prefill flows j = id, id+n, ... < pTotal, due at
	// j·pSpan/pTotal (pSpan: the ramp-up, cut to whole think times); a
	// data one with probability pData
	pk, pTotal  int64
	pSpan       int64
	pData       float64
	resid       [2]residual // data, voice
	inflight    int
	cap         int
	queued      bool    // requests queued since the last Flush
	completions []*flow // filled by done callbacks during Poll
	k           int64   // next global flow index of this worker
	nextAt      int64
	genDone     bool
	interrupted bool
	abandonAt   int64 // interrupted: requests still in flight then are abandoned
	drainLimit  int64 // the drain never lasts beyond

	// statistics
	ops            [NumOps]OpStats
	errors         map[string]int64
	errorsOutside  int64
	offered        int64
	unresolved     int64
	missingCharged int64
	abandoned      int64
	retransmits    int64
	retxMismatch   int64
	retried        int64 // retries sent
	retryResolved  int64 // requests a retry resolved
	retriesDropped int64 // retries not scheduled or given up: queue full, or past retryLimit
	lost           UsageLost
	lostSUPI       []byte // scratch of losePending
	ledger         *Ledger
	stoppedEarly   bool
	stopTime       time.Time

	// notifications (notify.go): nil notices and live without a
	// notifying driver
	notices  chan driver.Notice
	live     map[uint64]*flow // open sessions by flow id
	triggers [2][]trigger     // operator calls to make, data and voice
	thead    [2]int
	nst      NoticeStats
	side     map[uint64]*noticeState // notified sessions' state (notify.go)
	sideFree []*noticeState
	supi     []byte // scratch: an operator call's SUPI

	// current interval
	sec     int
	iv      interval
	nextSec int64
}

// genBatch bounds the flows started in one pass, so that completions are
// taken between batches whatever the offered rate.
const genBatch = 1024

// jitStream seeds the retries' jitter stream (worker.jit) apart from the
// load's.
const jitStream = 0x6a69747465720001

func newWorker(id, n int, cfg *Config, dw driver.Worker, first scenario.SUPI, start time.Time, sched schedule, agg *aggregator, mStart, mEnd time.Duration) *worker {
	sc := &cfg.Scenario
	c := sc.MaxInFlight / n
	if c < 1 {
		c = 1
	}
	w := &worker{
		id: id, n: n, cfg: cfg, sc: sc, first: first, start: start, sched: sched, agg: agg, dw: dw,
		mStart: int64(mStart), mEnd: int64(mEnd), stopAt: int64(mEnd),
		rng:        rand.New(rand.NewPCG(uint64(sc.Seed), uint64(id)+1)),
		jit:        rand.New(rand.NewPCG(uint64(sc.Seed)^jitStream, uint64(id)+1)),
		shares:     sc.Shares(),
		timeout:    int64(sc.Timeout.D()),
		lateThr:    int64(sc.LateThreshold),
		lateDrop:   int64(sc.LateDrop),
		pacing:     int64(cfg.Pacing),
		retransmit: sc.Retransmit,
		cap:        c,
		backlogCap: max(4*c, 4096),
		k:          int64(id),
		errors:     map[string]int64{},
		ledger:     NewLedger(sc.Subscribers.Count),
		picker:     sc.Subscribers.Picker(),
		maxOpen:    max(sc.MaxOpenSessions/n, 1),
		nextSec:    int64(time.Second),
		nst:        newNoticeStats(),
	}
	w.timed, _ = cfg.Rater.(TimedRater)
	w.lost.Rated = cfg.Rater != nil
	think := max(sc.Data.ThinkTime.D(), sc.Voice.ThinkTime.D())
	w.drainLimit = w.stopAt + int64(think) + 2*w.timeout + int64(time.Second)
	w.retryCap = w.backlogCap
	w.retryMax, w.retryBackoff = sc.RetryErrors, int64(sc.RetryBackoff)
	if w.retryMax > 0 {
		// Room for one retry of the last request (its wait up to a
		// timeout, and its own timeout); a retry that could not be
		// answered by retryLimit is given up (its usage lost) rather
		// than lengthen the run: the drain bound does not grow with the
		// retries allowed, nor with what the CHF answers.
		w.drainLimit += w.timeout
		w.retryLimit = w.drainLimit - int64(time.Second)
	}
	for i := range w.ops {
		w.ops[i].Latency = histogram.New()
		w.ops[i].Service = histogram.New()
		w.ops[i].SchedLag = histogram.New()
		w.ops[i].Admitted = histogram.New()
	}
	if pd, pv := sc.PrefillSessions(); pd+pv > 0 {
		w.pk, w.pTotal, w.pSpan = int64(id), int64(pd+pv), int64(sc.Phases.RampUp)
		// Spread over a whole number of think times, so that the
		// sessions' updates (every think time after their create) fall
		// evenly over each think time instead of bunching.
		if t := int64(max(sc.Data.ThinkTime, sc.Voice.ThinkTime)); t > 0 && w.pSpan >= t {
			w.pSpan = w.pSpan / t * t
		}
		w.pData = float64(pd) / float64(pd+pv)
		w.resid = [2]residual{newResidual(&sc.Data), newResidual(&sc.Voice)}
	}
	w.iv.hist, w.iv.svc, w.iv.lag = agg.getHist(), agg.getHist(), agg.getHist()
	w.nextAt = sched.at(w.k)
	return w
}

func (w *worker) now() int64 { return int64(time.Since(w.start)) }

// maxWait bounds one wait, so that cancellation is seen promptly.
const maxWait = int64(50 * time.Millisecond)

// interruptGrace is how long an interrupted run waits for the requests in
// flight (at most the timeout) before abandoning them.
const interruptGrace = 500 * time.Millisecond

func (w *worker) run(ctx context.Context) {
	defer w.dw.Close()
	done := ctx.Done()
	for {
		now := w.now()
		for now >= w.nextSec {
			w.flush()
		}
		if done != nil {
			select {
			case <-done:
				done = nil
				w.interrupt(now)
			default:
			}
		}
		// Paced, only what was due by the last tick leaves: a wake-up
		// between ticks (a completion) sends nothing early.
		upTo := now
		if p := w.pacing; p > 0 {
			upTo = now / p * p
		}
		w.generate(now, upTo)
		for len(w.heap) > 0 && w.heap[0].due <= upTo {
			w.ready(w.heap.pop(), now)
		}
		w.sendRetries(now)
		if w.queued {
			w.queued = false
			w.dw.Flush()
		}
		idle := w.genDone && w.pk >= w.pTotal && len(w.heap) == 0 && w.bhead == len(w.backlog)
		if idle && len(w.retryQ) == 0 && w.inflight == 0 {
			w.flush()
			return
		}
		if w.interrupted && now >= w.abandonAt || idle && now >= w.drainLimit {
			w.abandon()
			w.flush()
			return
		}
		next := w.nextSec
		if !w.genDone && w.nextAt < next {
			next = w.nextAt
		}
		if len(w.heap) > 0 && w.heap[0].due < next {
			next = w.heap[0].due
		}
		if len(w.retryQ) > 0 && w.retryQ[0].retryAt < next && w.inflight < w.cap {
			next = w.retryQ[0].retryAt // (with the pool full, a completion wakes the loop)
		}
		if w.cfg.Operator != nil {
			next = w.nextTrigger(next)
		}
		if w.pk < w.pTotal {
			next = min(next, w.prefillAt(w.pk))
		}
		if p := w.pacing; p > 0 {
			next = (next + p - 1) / p * p // wake on pacing ticks: sends batch
		}
		wait := min(next-w.now(), maxWait)
		if w.interrupted {
			wait = min(wait, w.abandonAt-now)
		}
		if len(w.completions) > 0 {
			wait = 0
		}
		if err := w.dw.Poll(time.Duration(max(wait, 0))); err != nil && wait > 0 {
			time.Sleep(time.Duration(wait)) // not expected; avoid spinning
		}
		for i := 0; i < len(w.completions); i++ {
			f := w.completions[i]
			w.completions[i] = nil
			w.completed(f)
		}
		w.completions = w.completions[:0]
		if w.notices != nil {
			now := w.now()
			w.takeNotices(now)
			if w.cfg.Operator != nil {
				w.fireTriggers(now)
			}
		}
	}
}

// interrupt ends the run now (ctx cancelled): no new flow, every live
// session released at once, and what is still in flight after the grace
// period abandoned.
func (w *worker) interrupt(now int64) {
	w.interrupted = true
	w.abandonAt = now + min(int64(interruptGrace), w.timeout)
	if now < w.stopAt {
		w.stopAt = now
		w.stoppedEarly = true
		w.stopTime = w.start.Add(time.Duration(now))
	}
	w.genDone = true
	w.pk = w.pTotal
	for _, e := range w.heap {
		e.f.due = now
	}
	w.heap.reorder()
	for _, r := range w.retryQ {
		r.retryAt = now // the last try, within the grace period
		r.tries = uint8(w.retryMax)
	}
}

// abandon gives up on every request in flight or waiting (the run was
// interrupted, or the drain outlived its bound); the usage they carried,
// or that the waiting sessions' next requests would have, is lost.
func (w *worker) abandon() {
	w.abandoned += int64(w.inflight + len(w.backlog) - w.bhead + len(w.heap) + len(w.retryQ))
	now := w.now()
	for _, r := range w.allReqs {
		if r.flying && !r.counted {
			w.lose(r, lostAbandoned, r.sent)
		}
	}
	for _, r := range w.retryQ {
		w.lose(r, lostAbandoned, r.sent)
	}
	for _, f := range w.backlog[w.bhead:] {
		w.losePending(f, now)
	}
	for _, e := range w.heap {
		w.losePending(e.f, now)
	}
	w.inflight = 0
}

// flush publishes the current one-second interval and starts the next.
func (w *worker) flush() {
	w.iv.sec = w.sec
	w.iv.inflight = int64(w.inflight)
	w.iv.open = int64(w.open)
	w.agg.in <- w.iv
	w.sec++
	w.nextSec += int64(time.Second)
	w.iv = interval{hist: w.agg.getHist(), svc: w.agg.getHist(), lag: w.agg.getHist()}
}

func (w *worker) measured(due int64) bool { return due >= w.mStart && due < w.mEnd }

func (w *worker) getFlow() *flow {
	if n := len(w.free); n > 0 {
		f := w.free[n-1]
		w.free = w.free[:n-1]
		return f
	}
	return &flow{heapIdx: -1}
}

func (w *worker) putFlow(f *flow) {
	w.putReq(f)
	if f.open {
		f.open = false
		w.open--
	}
	if w.live != nil {
		delete(w.live, f.id)
		if f.notice != noticeNone {
			w.nst.Stale[f.notice-1]++ // arrived while the session ended
		}
	}
	if f.side {
		w.putSide(f)
	}
	f.notice, f.answering = noticeNone, noticeNone
	f.ref = f.ref[:0]
	w.free = append(w.free, f)
}

// getReq gives f a request from the pool.
func (w *worker) getReq(f *flow) *request {
	var r *request
	if n := len(w.reqs); n > 0 {
		r = w.reqs[n-1]
		w.reqs = w.reqs[:n-1]
	} else {
		r = &request{}
		r.cb = func(err error) {
			r.err = err
			w.completions = append(w.completions, r.f)
		}
		w.allReqs = append(w.allReqs, r)
	}
	r.f, f.r = f, r
	return r
}

// putReq returns f's request, if any, to the pool.
func (w *worker) putReq(f *flow) {
	if r := f.r; r != nil {
		r.f, f.r = nil, nil
		w.reqs = append(w.reqs, r)
	}
}

// generate starts the flows due by upTo: at most genBatch per call, and a
// run of flows already later than LateDrop is dropped in one step (a rate
// the machine cannot offer costs neither memory nor a pass per flow).
func (w *worker) generate(now, upTo int64) {
	for i := 0; w.pk < w.pTotal && i < genBatch; i++ {
		at := w.prefillAt(w.pk)
		if at > upTo || at >= w.stopAt {
			break
		}
		w.startPrefill(at, now)
		w.pk += int64(w.n)
	}
	for i := 0; !w.genDone && w.nextAt <= upTo && i < genBatch; i++ {
		if w.nextAt >= w.stopAt {
			w.genDone = true
			break
		}
		if now-w.nextAt > w.lateDrop {
			w.skipLate(now)
			continue
		}
		w.startFlow(w.nextAt, now)
		w.k += int64(w.n)
		w.nextAt = w.sched.at(w.k)
	}
	if !w.genDone && w.nextAt >= w.stopAt {
		w.genDone = true
	}
}

// skipLate drops, without starting them, this worker's flows due before
// now - LateDrop (and before the stop): they could not leave in time.
func (w *worker) skipLate(now int64) {
	end := min(w.sched.first(now-w.lateDrop), w.sched.first(w.stopAt))
	n := int64(w.n)
	count := func(lo, hi int64) int64 { // this worker's indexes in [max(k, lo), hi)
		lo = max(lo, w.k)
		if hi <= lo {
			return 0
		}
		first := w.k + (lo-w.k+n-1)/n*n
		if first >= hi {
			return 0
		}
		return (hi - first + n - 1) / n
	}
	j := count(w.k, end)
	if j == 0 {
		j = 1 // at least the flow that was due
	}
	meas := count(w.sched.first(w.mStart), min(w.k+j*n, w.sched.first(w.mEnd)))
	w.offered += meas
	w.iv.offered += j
	w.iv.drop += j
	// attribute the measured drops to the operations by the mix
	var ops [NumOps]float64
	ops[OpCreate] = w.shares[scenario.KindData] + w.shares[scenario.KindVoice]
	ops[OpEvent] = w.shares[scenario.KindSMS]
	ops[OpBalance] = w.shares[scenario.KindBalance]
	left, top := meas, OpBalance
	for op := range NumOps {
		d := int64(float64(meas) * ops[op])
		w.ops[op].Dropped += d
		left -= d
		if ops[op] > ops[top] {
			top = op
		}
	}
	w.ops[top].Dropped += left
	w.k += j * n
	w.nextAt = w.sched.at(w.k)
}

// startFlow creates flow k due at due.
func (w *worker) startFlow(due, now int64) {
	f := w.getFlow()
	x := w.rng.Float64()
	f.kind = scenario.KindBalance
	for k := scenario.Kind(0); k < scenario.NumKinds; k++ {
		if x < w.shares[k] {
			f.kind = k
			break
		}
		x -= w.shares[k]
	}
	f.sub = int32(w.picker.Pick(w.rng))
	f.step, f.seq, f.due, f.first, f.gone = 0, 0, due, true, false
	f.id = uint64(w.k)
	f.target = int32(int(w.k/int64(w.n)) % w.cfg.Driver.Targets())
	f.offline = false
	switch f.kind {
	case scenario.KindData, scenario.KindVoice:
		if !w.openSession(f, due) {
			return
		}
		if s := w.session(f); s.Length != nil {
			f.end = due + int64(s.Length.Quantile(w.rng.Float64()))
		}
		f.op = OpCreate
		if o := w.sc.Accounts.Offline; o > 0 {
			f.offline = w.rng.Float64() < o
		}
	case scenario.KindSMS:
		f.op = OpEvent
	default:
		f.op = OpBalance
	}
	w.ready(f, now)
}

// prefillAt returns when prefill flow j is due.
func (w *worker) prefillAt(j int64) int64 {
	return int64(float64(j) * float64(w.pSpan) / float64(w.pTotal))
}

// startPrefill opens, due at due, a session of the steady state
// (Phases.SteadyStart): it is left with the remaining length of a
// session in progress at the end of the ramp-up.
func (w *worker) startPrefill(due, now int64) {
	f := w.getFlow()
	f.kind = scenario.KindVoice
	if w.rng.Float64() < w.pData {
		f.kind = scenario.KindData
	}
	f.sub = int32(w.picker.Pick(w.rng))
	f.step, f.seq, f.due, f.first, f.gone = 0, 0, due, true, false
	f.id = 1<<63 | uint64(w.pk) // apart from the scheduled flows' indexes
	f.target = int32(int(w.pk/int64(w.n)) % w.cfg.Driver.Targets())
	if !w.openSession(f, due) {
		return
	}
	f.offline = false
	if o := w.sc.Accounts.Offline; o > 0 {
		f.offline = w.rng.Float64() < o
	}
	s := w.session(f)
	rem := w.resid[f.kind].remaining(w.rng)
	if s.Length != nil {
		f.end = int64(w.sc.Phases.RampUp) + int64(rem)
	} else if s.ThinkTime > 0 {
		// the steps a session of Updates updates has left
		f.step = int32(max(0, s.Updates-int(rem/s.ThinkTime.D())))
	}
	f.op = OpCreate
	w.ready(f, now)
}

// openSession counts f as an open session, or refuses it (counted
// dropped) when Scenario.MaxOpenSessions are open.
func (w *worker) openSession(f *flow, due int64) bool {
	if w.open >= w.maxOpen {
		// the bound on the loadgen's memory: not started, counted dropped
		w.sessLimited++
		if w.measured(due) {
			w.offered++
			w.ops[OpCreate].Dropped++
		}
		w.iv.offered++
		w.iv.drop++
		w.putFlow(f)
		return false
	}
	f.open = true
	w.open++
	w.openPeak = max(w.openPeak, w.open)
	return true
}

// residual draws the remaining length of a session in progress: its
// length biased by length (a longer session is more likely to be in
// progress at a given time), times a uniform share still to run.
type residual struct {
	cum []float64       // cumulative lengths over the quantile grid
	q   []time.Duration // the lengths
}

func newResidual(s *scenario.Session) residual {
	const grid = 1024
	r := residual{cum: make([]float64, grid), q: make([]time.Duration, grid)}
	var sum float64
	for i := range grid {
		l := s.MeanLength()
		if s.Length != nil {
			l = s.Length.Quantile((float64(i) + 0.5) / grid)
		}
		sum += float64(l)
		r.cum[i], r.q[i] = sum, l
	}
	return r
}

func (r *residual) remaining(rng *rand.Rand) time.Duration {
	x := rng.Float64() * r.cum[len(r.cum)-1]
	i, _ := slices.BinarySearch(r.cum, x)
	i = min(i, len(r.q)-1)
	return time.Duration(rng.Float64() * float64(r.q[i]))
}

// session returns the shape of f's session kind.
func (w *worker) session(f *flow) *scenario.Session {
	if f.kind == scenario.KindVoice {
		return &w.sc.Voice
	}
	return &w.sc.Data
}

// ready sends f's request now, or queues it when the pool is full (a new
// flow that finds the backlog full is dropped at once).
func (w *worker) ready(f *flow, now int64) {
	if f.due >= w.stopAt && f.op == OpUpdate {
		f.op = OpRelease // run ending: release instead of updating further
	}
	if w.measured(f.due) {
		w.offered++
	}
	w.iv.offered++
	if w.inflight < w.cap && w.bhead == len(w.backlog) {
		w.send(f, now)
		return
	}
	if f.first && len(w.backlog)-w.bhead >= w.backlogCap {
		w.drop(f)
		return
	}
	w.backlog = append(w.backlog, f)
}

func (w *worker) drop(f *flow) {
	if w.measured(f.due) {
		w.ops[f.op].Dropped++
	}
	w.iv.drop++
	w.putFlow(f)
}

// send hands f's current request (first attempt) to the driver.
func (w *worker) send(f *flow, now int64) {
	r := f.r
	if r == nil {
		r = w.getReq(f)
	}
	r.attempt, r.dup, r.counted, r.tries, r.doubt = 0, dupNone, false, 0, false
	w.fillCharge(f)
	if w.retransmit > 0 && f.op != OpBalance && w.rng.Float64() < w.retransmit {
		r.dup = dupFlagged
		if w.rng.IntN(2) == 0 {
			r.dup = dupPlain
		}
	}
	r.sent = w.now()
	lag := time.Duration(max(r.sent-f.due, 0))
	if w.measured(f.due) {
		w.ops[f.op].SchedLag.Record(lag)
	}
	w.iv.lag.Record(lag)
	w.queue(f)
}

// queue hands f.charge to the driver; a refusal completes it at once.
func (w *worker) queue(f *flow) {
	if f.op != OpBalance {
		w.ledger.Touch(f.sub)
	}
	w.inflight++
	r := f.r
	r.flying = true
	if err := w.dw.Queue(&r.charge, &r.out, r.cb); err != nil {
		err = driver.Classify(err)
		r.out.Fail(err)
		r.err = err
		w.completions = append(w.completions, f)
		return
	}
	w.queued = true
}

// resend sends f's current request again with the same identity (same
// sequence number, timestamp and content); flagged sets the protocol's
// retransmission flag. A scheduled retry (r.tries > 0) counts as retried,
// anything else as a retransmission.
func (w *worker) resend(f *flow, flagged bool) {
	r := f.r
	r.charged0, r.hasChg0 = r.out.Charged, r.out.HasCharged
	r.attempt = 1
	r.charge.Retransmit = flagged
	r.charge.Retry = r.tries > 0
	r.charge.Session = f.ref
	r.sent = w.now()
	if r.tries > 0 {
		w.retried++
	} else {
		w.retransmits++
	}
	w.queue(f)
}

// retryFlagged tells whether a retry of op carries the retransmission
// flag. Updates and releases do: the session and sequence number identify
// them. A create or event is repeated exactly (same invocation time) but
// unflagged: a flagged one may be matched by its identity without the
// invocation time (Nchf lets a retransmission carry a new one), which is
// ambiguous for a client that numbers every create and event 0, as this
// one does and SMFs do: a retry of an event whose first attempt never
// landed would be answered as an earlier event of the subscriber.
func retryFlagged(op Op) bool { return op == OpUpdate || op == OpRelease }

// retry schedules f's request, shed or without a definitive answer, to
// be sent again with the same identity (Scenario.RetryErrors) and reports
// whether it did. A shed that said how long to wait (Retry-After) is
// retried after that wait, capped at MaxRetryAfter; anything else after
// the doubling backoff. Not past the retries allowed, nor when the retry
// could not be answered by retryLimit or the retry queue is full: the
// retries obey the bounds of first sends, and one that cannot is dropped
// (counted in RetriesDropped) instead of queued.
func (w *worker) retry(f *flow) bool {
	r := f.r
	if int(r.tries) >= w.retryMax {
		return false
	}
	var at int64
	if ra := int64(min(r.out.RetryAfter, MaxRetryAfter)); r.out.Shed && ra > 0 {
		// at least what the CHF asked, spread over half of it again
		at = w.now() + ra + int64(w.jit.Float64()*float64(ra)/2)
	} else {
		at = w.now() + retryWait(w.retryBackoff<<r.tries, w.jit.Float64())
	}
	if at+w.timeout > w.retryLimit || len(w.retryQ) >= w.retryCap {
		w.retriesDropped++
		return false
	}
	r.tries++
	r.retryAt = at
	heap.Push(&w.retryQ, r)
	return true
}

// MaxRetryAfter caps the wait a shed request's Retry-After asks for.
const MaxRetryAfter = 10 * time.Second

// sendRetries sends the retries due by now while the worker's share of
// MaxInFlight leaves room (before the backlog: a retry is older than
// anything waiting there); one that could no longer be answered by
// retryLimit is given up.
func (w *worker) sendRetries(now int64) {
	for len(w.retryQ) > 0 && w.retryQ[0].retryAt <= now && w.inflight < w.cap {
		f := heap.Pop(&w.retryQ).(*request).f
		if now+w.timeout > w.retryLimit {
			w.retriesDropped++
			w.giveUp(f)
			w.next(f)
			continue
		}
		w.resend(f, retryFlagged(f.op))
	}
}

// retryWait is a retry's wait for the nominal wait d and u uniform in
// [0,1): uniform in [d/2, 3d/2), so that the requests a fault failed
// together are not retried together, in a burst that an admission
// control sheds again ("equal jitter").
func retryWait(d int64, u float64) int64 {
	return d/2 + int64(u*float64(d))
}

// drainBacklog sends queued requests while the pool has room, dropping new
// flows that waited beyond LateDrop.
func (w *worker) drainBacklog(now int64) {
	w.sendRetries(now)
	for w.inflight < w.cap && w.bhead < len(w.backlog) {
		f := w.backlog[w.bhead]
		w.backlog[w.bhead] = nil
		w.bhead++
		if f.first && now-f.due > w.lateDrop {
			w.drop(f)
			continue
		}
		w.send(f, now)
	}
	if w.bhead == len(w.backlog) {
		w.backlog = w.backlog[:0]
		w.bhead = 0
	}
}

// completed records f's finished request and schedules what follows.
func (w *worker) completed(f *flow) {
	w.inflight--
	r := f.r
	r.flying = false
	now := w.now()
	r.done = now
	if rx := r.out.Received; !rx.IsZero() {
		// When the answer arrived (the event loop: reached the socket),
		// not when the worker got round to it.
		r.done = min(now, max(int64(rx.Sub(w.start)), r.sent))
	}
	if r.attempt > 0 {
		w.retransmitted(f)
		return
	}
	lat := time.Duration(r.done - f.due)
	svc := time.Duration(r.done - r.sent)
	late := r.sent-f.due > w.lateThr
	failed := r.out.Class != ""
	class := r.out.Class
	if failed && w.refusedByAbort(f) {
		// The run's own abort barred the account: counted apart.
		failed, class = false, ""
		w.nst.Barred++
	}
	if w.measured(f.due) {
		o := &w.ops[f.op]
		o.Count++
		o.Latency.Record(lat)
		o.Service.Record(svc)
		if r.out.Shed {
			o.Shed++
		} else {
			o.Admitted.Record(lat)
		}
		if late {
			o.Late++
		}
		if failed {
			o.Errors++
			w.errors[class]++
		}
	} else if failed {
		w.errorsOutside++
	}
	if w.cfg.Observe != nil {
		w.cfg.Observe(f.op, lat, class)
	}
	if f.answering != noticeNone {
		w.noticeAnswered(f)
	}
	w.iv.completed++
	w.iv.opDone[f.op]++
	w.iv.hist.Record(lat)
	w.iv.svc.Record(svc)
	if late {
		w.iv.late++
	}
	if failed {
		w.iv.errs++
		w.iv.opErrs[f.op]++
		if w.iv.classes == nil {
			w.iv.classes = map[string]int64{}
		}
		w.iv.classes[class]++
	}
	if f.op == OpCreate && len(r.out.Ref) > 0 {
		f.ref = append(f.ref[:0], r.out.Ref...)
	}
	f.gone = r.out.Gone
	if f.op != OpBalance {
		if w.settle(f, true) {
			w.drainBacklog(w.now())
			return
		}
		if r.dup != dupNone {
			w.resend(f, r.dup == dupFlagged)
			w.drainBacklog(w.now())
			return
		}
	}
	w.next(f)
	w.drainBacklog(w.now())
}

// retransmitted records the answer to a retransmission or retry: it may
// resolve a request whose earlier attempts got no definitive answer (see
// settle), and must agree with the first answer otherwise.
func (w *worker) retransmitted(f *flow) {
	r := f.r
	r.attempt = 0
	switch {
	case !r.counted:
		if w.settle(f, false) {
			w.drainBacklog(w.now())
			return
		}
	case r.out.Resolved && r.out.HasCharged && r.hasChg0 && r.out.Charged != r.charged0:
		w.retxMismatch++ // charged again, or differently
	}
	if f.op == OpCreate && len(f.ref) == 0 && len(r.out.Ref) > 0 {
		f.ref = append(f.ref[:0], r.out.Ref...)
	}
	f.gone = f.gone || r.out.Gone
	w.next(f)
	w.drainBacklog(w.now())
}

// settle takes the answer to an attempt of f's request whose outcome is
// not counted yet and reports whether another attempt is on its way.
// A definitive answer (a success, or a refusal other than a shed) is
// counted once, whatever attempt brought it. A shed (Nchf 503, Gy 3004)
// or an attempt without a definitive answer is retried, as an SMF does
// (retry); a first attempt without an answer that cannot be is
// retransmitted, flagged, when the scenario retransmits, or its pending
// duplicate sent. Otherwise the request is given up (giveUp).
//
// A shed tells only that this attempt was not admitted: after an attempt
// in doubt it resolves nothing, and a request whose attempts were all
// shed is known not charged. first: the answer is to the first attempt.
func (w *worker) settle(f *flow, first bool) bool {
	r := f.r
	o := &r.out
	if !o.Resolved {
		r.doubt = true
	}
	if o.Resolved && !o.Shed {
		if r.tries > 0 {
			w.retryResolved++
		}
		w.account(f)
		return false
	}
	if w.retry(f) {
		return true
	}
	switch {
	case first && !o.Resolved && w.retransmit > 0:
		// no answer: send it again, flagged, as an NF would
		w.resend(f, true)
		return true
	case first && r.dup != dupNone:
		// the duplicate the scenario asked for is the last attempt
		flagged := r.dup == dupFlagged
		r.dup = dupNone
		w.resend(f, flagged)
		return true
	}
	w.giveUp(f)
	return false
}

// giveUp ends f's request without a delivery: in doubt when an attempt got
// no definitive answer (unresolved), refused when every attempt was shed
// (counted as that refusal: nothing charged). Its usage is lost.
func (w *worker) giveUp(f *flow) {
	r := f.r
	kind := lostRefused
	if r.doubt {
		w.unresolved++
		kind = lostInDoubt
	} else {
		w.account(f)
	}
	w.lose(r, kind, r.sent)
}

// account adds the resolved outcome of f's logical request to the ledger
// (once, whatever retransmissions it took).
func (w *worker) account(f *flow) {
	r := f.r
	r.counted = true
	o := &r.out
	if o.HasCharged {
		w.ledger.Add(f.sub, o.Charged)
	} else if o.Class == "" || o.RatingGroupRefused {
		w.missingCharged++ // answered as a success without the charge
	}
	if o.Class == "" && w.timed != nil {
		want, alt, ambiguous := w.timed.RateAt(&r.charge, w.start.Add(time.Duration(r.sent)))
		if ambiguous && o.HasCharged && o.Charged == alt {
			want = alt // rated on the other tariff while the CHF reloaded
		}
		w.ledger.AddExpected(f.sub, want)
	} else if o.Class == "" && w.cfg.Rater != nil {
		w.ledger.AddExpected(f.sub, w.cfg.Rater.Rate(&r.charge))
	}
}

// next moves f to its following request or ends it.
func (w *worker) next(f *flow) {
	var g driver.Grant // what advance needs of the answer
	if f.r != nil {
		g = f.r.out.Grant
	}
	w.putReq(f)
	f.first = false
	if f.answering != noticeNone && w.afterNotice(f) {
		return
	}
	switch f.op {
	case OpCreate:
		if len(f.ref) == 0 {
			w.putFlow(f)
			return
		}
		if w.live != nil {
			w.live[f.id] = f
			if w.cfg.Operator != nil && w.sc.Notifications.Enabled() {
				w.armTrigger(f)
			}
		}
	case OpUpdate:
		if f.gone {
			w.putFlow(f)
			return
		}
	default: // release, event, balance end the flow
		w.putFlow(f)
		return
	}
	s := w.session(f)
	f.step++
	f.seq++
	w.advance(f, s, &g)
	last := int(f.step) > s.Updates
	if s.Length != nil {
		last = f.due >= f.end
		f.due = min(f.due, f.end) // the release at the session's length
	}
	if last || f.due >= w.stopAt {
		f.op = OpRelease
	} else {
		f.op = OpUpdate
	}
	w.resume(f)
}

// advance sets when f's next request is due: a think time after the
// last one was due, or for a threshold-driven session when its last
// grant's threshold, validity or quota is reached at the session's rate
// (then f.used is what it consumed by then). A grant-driven request that
// would fall after the stop is due at the stop, with the usage up to it.
func (w *worker) advance(f *flow, s *scenario.Session, g *driver.Grant) {
	f.grantDriven = false
	if !s.ThresholdDriven() || !g.Has {
		f.due += int64(s.ThinkTime)
		return
	}
	base := g.Granted.TotalVolume
	if s.Requested.TotalVolume == 0 {
		base = uint64(g.Granted.Time)
	}
	d, use, ok := s.GrantInterval(base, g.Threshold, g.Validity)
	if !ok {
		f.due += int64(s.ThinkTime)
		return
	}
	lim := w.stopAt
	if s.Length != nil {
		lim = min(lim, f.end) // the release at the session's length
	}
	if left := lim - f.due; int64(d) > left {
		left = max(left, 0)
		use = uint64(float64(use) * float64(left) / float64(d))
		d = time.Duration(left)
	}
	f.due += int64(d)
	f.grantDriven, f.used = true, use
}

// fillCharge fills f.charge, the protocol-neutral form of f's current
// request.
func (w *worker) fillCharge(f *flow) {
	r := f.r
	r.supi = w.first.Append(r.supi[:0], int(f.sub))
	c := &r.charge
	*c = driver.Charge{Target: int(f.target), Flow: f.id, SUPI: r.supi, Seq: f.seq, Invoked: time.Now()}
	switch f.op {
	case OpBalance:
		c.Op = driver.ChargeBalance
		return
	case OpEvent:
		c.Op, c.RatingGroup = driver.ChargeEvent, w.sc.SMS.RatingGroup
		c.Request, c.Requested = true, chfUnits(w.sc.SMS.Units)
		return
	}
	s := w.session(f)
	c.RatingGroup = s.RatingGroup
	c.Offline = f.offline
	used := chfUnits(s.Used)
	if f.grantDriven {
		if s.Requested.TotalVolume != 0 {
			used = chf.Units{TotalVolume: f.used}
		} else {
			used = chf.Units{Time: uint32(f.used)}
		}
	}
	switch f.op {
	case OpCreate:
		c.Op = driver.ChargeCreate
		c.Request, c.Requested = true, chfUnits(s.Requested)
		c.WantGrant = s.ThresholdDriven()
	case OpUpdate:
		c.Op, c.Session = driver.ChargeUpdate, f.ref
		c.Request, c.Requested = true, chfUnits(s.Requested)
		c.WantGrant = s.ThresholdDriven()
		if f.answering != noticeReauth {
			c.Used = used // a re-authorisation's update reports none
		} else {
			c.Reauthorized = true
		}
	case OpRelease:
		c.Op, c.Session = driver.ChargeRelease, f.ref
		if f.step > 0 {
			c.Used = used
		}
	}
	if f.offline {
		// Offline charging has no quota: a session holding an online
		// grant would have its usage charged by the grant's method.
		c.Request, c.Requested, c.WantGrant = false, chf.Units{}, false
	}
}

// chfUnits converts the scenario's units, the one place it happens.
func chfUnits(u scenario.Units) chf.Units {
	return chf.Units{TotalVolume: u.TotalVolume, Time: u.Time, ServiceSpecific: u.ServiceSpecificUnits}
}
