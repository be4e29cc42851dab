package engine

import (
	"container/heap"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/nchf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// flow is one session, event or inquiry in progress. It belongs to its
// worker; while a request is in flight it is lent to a sender goroutine
// (the channels order the hand-over).
type flow struct {
	kind    scenario.Kind
	op      Op
	sub     int32
	step    int32 // 0 first request; 1..updates update; updates+1 release
	seq     uint32
	target  int
	due     int64 // ns since start: when the current request is scheduled
	sent    int64
	done    int64
	first   bool // the current request starts the flow (may be dropped)
	charged int64
	hasChg  bool
	status  int
	errKind error  // driver error, nil when a response arrived
	class   string // error class, "" when the request succeeded
	ref     []byte
	supi    []byte
	body    []byte
	path    []byte
	req     driver.Request
	resp    driver.Response
	heapIdx int
	nreq    nchf.Request // body fields of the current request
	used    nchf.Units
	charge  driver.Charge // the current request for Charging drivers (gy)
	// async path
	cb        func(error)
	abandoned atomic.Bool // set by the worker when it gave up on the request
	liveIdx   int
}

type flowHeap []*flow

func (h flowHeap) Len() int           { return len(h) }
func (h flowHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h flowHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *flowHeap) Push(x any) { f := x.(*flow); f.heapIdx = len(*h); *h = append(*h, f) }
func (h *flowHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return f
}

// worker is one scheduler goroutine with its own senders and statistics.
type worker struct {
	id, n    int
	cfg      *Config
	sc       *scenario.Scenario
	first    scenario.SUPI
	start    time.Time
	sched    schedule
	agg      *aggregator
	mStart   int64
	mEnd     int64
	stopAt   int64 // no new flow at or after
	rng      *rand.Rand
	shares   [scenario.NumKinds]float64
	timeout  time.Duration
	lateThr  int64
	lateDrop int64

	heap     flowHeap
	backlog  []*flow // FIFO; head at backlogHead
	bhead    int
	free     []*flow
	inflight int
	cap      int
	senders  int
	dispatch chan *flow
	complete chan *flow
	// async path (driver.Async): no sender goroutines
	async    driver.Async
	loop     driver.Loop    // the worker's own event loop (driver.Looper); also async and batch
	batch    driver.Batcher // async driver that sends queued requests on Flush; nil otherwise
	queued   bool           // requests queued since the last Flush
	charging bool           // the driver takes driver.Charge, not Nchf over HTTP
	pacing   int64
	// Completions of async requests: driver callbacks append to doneQ and
	// poke wake only when wakeOnDone is set (the worker would otherwise
	// sleep longer than the pacing interval, or needs the slot for its
	// backlog); else the worker collects them at its next tick. Latency
	// is stamped in the callback, so collecting later changes no figure.
	doneMu     sync.Mutex
	doneQ      []*flow
	doneSpare  []*flow
	wakeOnDone atomic.Bool
	wake       chan struct{}
	live       []*flow // requests in flight
	immediate  []*flow // completed without a callback (failed to start, expired)
	nextScan   int64
	k          int64 // next global flow index of this worker
	nextAt     int64
	genDone    bool

	// statistics
	ops            [NumOps]OpStats
	errors         map[string]int64
	errorsOutside  int64
	offered        int64
	unresolved     int64
	missingCharged int64
	ledger         *Ledger
	stoppedEarly   bool
	stopTime       time.Time

	// current interval
	sec     int
	iv      interval
	nextSec int64
}

func newWorker(id, n int, cfg *Config, first scenario.SUPI, start time.Time, sched schedule, agg *aggregator, mStart, mEnd time.Duration) *worker {
	sc := &cfg.Scenario
	c := sc.MaxInFlight / n
	if c < 1 {
		c = 1
	}
	w := &worker{
		id: id, n: n, cfg: cfg, sc: sc, first: first, start: start, sched: sched, agg: agg,
		mStart: int64(mStart), mEnd: int64(mEnd), stopAt: int64(mEnd),
		rng:      rand.New(rand.NewPCG(uint64(sc.Seed), uint64(id)+1)),
		shares:   sc.Shares(),
		timeout:  sc.Timeout.D(),
		lateThr:  int64(sc.LateThreshold),
		lateDrop: int64(sc.LateDrop),
		cap:      c,
		dispatch: make(chan *flow, c),
		complete: make(chan *flow, 2*c),
		k:        int64(id),
		errors:   map[string]int64{},
		ledger:   NewLedger(sc.Subscribers.Count),
		nextSec:  int64(time.Second),
		pacing:   int64(cfg.Pacing),
		wake:     make(chan struct{}, 1),
	}
	for i := range w.ops {
		w.ops[i].Latency = histogram.New()
		w.ops[i].Service = histogram.New()
	}
	w.iv.hist = agg.getHist()
	if lp, ok := cfg.Driver.(driver.Looper); ok && !cfg.NoAsync {
		if loop, err := lp.NewLoop(); err == nil {
			w.loop = loop
			w.async, w.batch = loop, loop
		}
	}
	if a, ok := cfg.Driver.(driver.Async); ok && !cfg.NoAsync && w.loop == nil {
		w.async = a
		w.batch, _ = a.(driver.Batcher)
	}
	_, w.charging = cfg.Driver.(driver.Charging)
	w.nextAt = sched.at(w.k)
	return w
}

func (w *worker) now() int64 { return int64(time.Since(w.start)) }

func (w *worker) run(ctx context.Context) {
	defer close(w.dispatch)
	if w.loop != nil {
		defer w.loop.Close()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	done := ctx.Done()
	for {
		w.collect()
		now := w.now()
		for now >= w.nextSec {
			w.flush()
		}
		if w.async != nil && len(w.live) > 0 && now >= w.nextScan {
			w.expire(now)
			w.nextScan = now + int64(expireScan)
		}
		for len(w.immediate) > 0 {
			f := w.immediate[len(w.immediate)-1]
			w.immediate = w.immediate[:len(w.immediate)-1]
			w.completed(f)
		}
		for !w.genDone && w.nextAt <= now {
			if w.nextAt >= w.stopAt {
				w.genDone = true
				break
			}
			w.startFlow(w.nextAt, now)
			w.k += int64(w.n)
			w.nextAt = w.sched.at(w.k)
		}
		if !w.genDone && w.nextAt >= w.stopAt {
			w.genDone = true
		}
		for len(w.heap) > 0 && w.heap[0].due <= now {
			f := heap.Pop(&w.heap).(*flow)
			w.ready(f, now)
		}
		if w.queued {
			w.queued = false
			w.batch.Flush()
		}
		if w.genDone && len(w.heap) == 0 && w.bhead == len(w.backlog) && w.inflight == 0 {
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
		if w.async != nil && len(w.live) > 0 && w.nextScan < next {
			next = w.nextScan
		}
		if len(w.immediate) > 0 {
			next = now
		}
		if p := w.pacing; p > 0 {
			next = (next + p - 1) / p * p // wake on pacing ticks: sends batch
		}
		if w.loop != nil {
			// Event loop: completions are handled inside Poll, on this
			// goroutine; it returns at the next due time or earlier.
			select {
			case <-done:
				done = nil
				w.stopEarly()
				continue
			default:
			}
			wait := time.Duration(next - now)
			if w.pendingDone() {
				wait = 0
			}
			// Paced, the loop sleeps to the next tick and takes the
			// responses then (they carry their arrival time); it wakes
			// for them when it would sleep longer than a tick or a
			// backlog waits for their slots.
			wake := w.pacing <= 0 || next-now > w.pacing || w.bhead < len(w.backlog)
			if err := w.loop.Poll(wait, wake); err != nil {
				time.Sleep(wait) // not expected; avoid spinning
			}
			continue
		}
		if w.async != nil {
			// Completions wake the worker at once unless it wakes within
			// the pacing interval anyway and has no backlog waiting for
			// their slots. Set the flag, then look at the queue: a
			// callback appends, then reads the flag, so one of the two
			// sees the other.
			wakeNow := w.pacing <= 0 || next-now > w.pacing || w.bhead < len(w.backlog)
			w.wakeOnDone.Store(wakeNow)
			if wakeNow && w.pendingDone() {
				continue
			}
		}
		timer.Reset(time.Duration(next - now))
		select {
		case <-w.wake:
		case f := <-w.complete:
			w.receive(f)
			// take every completion already waiting before looking at the clock
			for more := true; more; {
				select {
				case f := <-w.complete:
					w.receive(f)
				default:
					more = false
				}
			}
		case <-timer.C:
		case <-done:
			done = nil
			w.stopEarly()
		}
	}
}

// stopEarly ends the generation of new flows now (the run was cancelled).
func (w *worker) stopEarly() {
	now := w.now()
	if now < w.stopAt {
		w.stopAt = now
		w.stoppedEarly = true
		w.stopTime = w.start.Add(time.Duration(now))
	}
}

// expireScan is how often in-flight async requests are checked against the
// timeout.
const expireScan = 50 * time.Millisecond

// pendingDone reports whether async completions wait in doneQ.
func (w *worker) pendingDone() bool {
	w.doneMu.Lock()
	n := len(w.doneQ)
	w.doneMu.Unlock()
	return n > 0
}

// collect takes the async completions queued by driver callbacks.
func (w *worker) collect() {
	if w.async == nil {
		return
	}
	w.doneMu.Lock()
	q := w.doneQ
	w.doneQ = w.doneSpare[:0]
	w.doneMu.Unlock()
	for i, f := range q {
		q[i] = nil
		w.receive(f)
	}
	w.doneSpare = q[:0]
}

// queueDone hands a completed async request to the worker (driver
// callback goroutine).
func (w *worker) queueDone(f *flow) {
	w.doneMu.Lock()
	w.doneQ = append(w.doneQ, f)
	w.doneMu.Unlock()
	if w.wakeOnDone.Load() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// receive handles a flow back from a sender or a driver callback.
func (w *worker) receive(f *flow) {
	if f.abandoned.Load() {
		return // already completed as a timeout; the object stays with the driver
	}
	w.completed(f)
}

// flush publishes the current one-second interval and starts the next.
func (w *worker) flush() {
	w.iv.sec = w.sec
	w.iv.inflight = int64(w.inflight)
	w.agg.in <- w.iv
	w.sec++
	w.nextSec += int64(time.Second)
	w.iv = interval{hist: w.agg.getHist()}
}

func (w *worker) measured(due int64) bool { return due >= w.mStart && due < w.mEnd }

func (w *worker) getFlow() *flow {
	if n := len(w.free); n > 0 {
		f := w.free[n-1]
		w.free = w.free[:n-1]
		return f
	}
	return &flow{}
}

func (w *worker) putFlow(f *flow) {
	f.ref = f.ref[:0]
	w.free = append(w.free, f)
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
	f.sub = int32(w.rng.IntN(w.sc.Subscribers.Count))
	f.supi = w.first.Append(f.supi[:0], int(f.sub))
	f.step, f.seq, f.due, f.first = 0, 0, due, true
	f.target = int(w.k/int64(w.n)) % w.cfg.Driver.Targets()
	switch f.kind {
	case scenario.KindData, scenario.KindVoice:
		f.op = OpCreate
	case scenario.KindSMS:
		f.op = OpEvent
	default:
		f.op = OpBalance
	}
	w.ready(f, now)
}

// session returns the shape of f's session kind.
func (w *worker) session(f *flow) *scenario.Session {
	if f.kind == scenario.KindVoice {
		return &w.sc.Voice
	}
	return &w.sc.Data
}

// ready sends f's request now, or queues it when the pool is full.
func (w *worker) ready(f *flow, now int64) {
	if f.due >= w.stopAt && f.op == OpUpdate {
		f.op = OpRelease // run ending: release instead of updating further
	}
	if w.measured(f.due) {
		w.offered++
	}
	w.iv.offered++
	if w.inflight < w.cap && w.bhead == len(w.backlog) {
		w.send(f)
		return
	}
	w.backlog = append(w.backlog, f)
}

// send hands f to a sender goroutine, starting one if none is idle.
func (w *worker) send(f *flow) {
	if f.op != OpBalance {
		w.ledger.Touch(f.sub)
	}
	w.inflight++
	if w.async != nil {
		f.sent = w.now()
		w.build(f)
		f.abandoned.Store(false)
		if f.cb == nil {
			f.cb = func(err error) {
				w.finish(f, err)
				if !f.abandoned.Load() {
					w.queueDone(f)
				}
			}
		}
		w.track(f)
		var err error
		if w.batch != nil {
			err = w.batch.Queue(&f.req, &f.resp, f.cb)
			w.queued = true
		} else {
			err = w.async.Start(&f.req, &f.resp, f.cb)
		}
		if err != nil {
			w.untrack(f)
			w.finish(f, err)
			w.immediate = append(w.immediate, f)
		}
		return
	}
	if w.inflight > w.senders {
		w.senders++
		go w.sender()
	}
	w.dispatch <- f
}

// track adds f to the requests in flight on the async path.
func (w *worker) track(f *flow) {
	f.liveIdx = len(w.live)
	w.live = append(w.live, f)
}

// untrack removes f from the requests in flight.
func (w *worker) untrack(f *flow) {
	i := f.liveIdx
	last := len(w.live) - 1
	w.live[i] = w.live[last]
	w.live[i].liveIdx = i
	w.live[last] = nil
	w.live = w.live[:last]
}

// expire gives up on async requests in flight beyond the timeout: each is
// completed as a timeout and its flow object abandoned to the driver (a
// copy carries the session on).
func (w *worker) expire(now int64) {
	for i := 0; i < len(w.live); {
		f := w.live[i]
		if time.Duration(now-f.sent) < w.timeout {
			i++
			continue
		}
		f.abandoned.Store(true)
		w.untrack(f)
		c := w.getFlow()
		c.kind, c.op, c.sub, c.step, c.seq, c.target, c.due, c.sent, c.first = f.kind, f.op, f.sub, f.step, f.seq, f.target, f.due, f.sent, f.first
		if f.op != OpCreate { // a create's callback may be writing f.ref
			c.ref = append(c.ref[:0], f.ref...)
		}
		c.supi = append(c.supi[:0], f.supi...)
		c.class, c.errKind, c.status, c.charged, c.hasChg = classTimeout, driver.ErrTimeout, 0, 0, false
		c.done, c.liveIdx = now, -1
		w.immediate = append(w.immediate, c)
	}
}

// drainBacklog sends queued requests while the pool has room, dropping new
// flows that waited beyond LateDrop.
func (w *worker) drainBacklog(now int64) {
	for w.inflight < w.cap && w.bhead < len(w.backlog) {
		f := w.backlog[w.bhead]
		w.backlog[w.bhead] = nil
		w.bhead++
		if f.first && now-f.due > w.lateDrop {
			if w.measured(f.due) {
				w.ops[f.op].Dropped++
			}
			w.iv.drop++
			w.putFlow(f)
			continue
		}
		w.send(f)
	}
	if w.bhead == len(w.backlog) {
		w.backlog = w.backlog[:0]
		w.bhead = 0
	}
}

// completed records f's finished request and schedules what follows.
func (w *worker) completed(f *flow) {
	w.inflight--
	if w.async != nil && f.liveIdx >= 0 && f.liveIdx < len(w.live) && w.live[f.liveIdx] == f {
		w.untrack(f)
	}
	lat := time.Duration(f.done - f.due)
	svc := time.Duration(f.done - f.sent)
	late := f.sent-f.due > w.lateThr
	failed := f.class != ""
	if w.measured(f.due) {
		o := &w.ops[f.op]
		o.Count++
		o.Latency.Record(lat)
		o.Service.Record(svc)
		if late {
			o.Late++
		}
		if failed {
			o.Errors++
			w.errors[f.class]++
		}
	} else if failed {
		w.errorsOutside++
	}
	w.iv.completed++
	w.iv.hist.Record(lat)
	if late {
		w.iv.late++
	}
	if failed {
		w.iv.errs++
	}
	if f.op != OpBalance {
		if f.errKind != nil || f.status >= 500 {
			// no answer, or a server error: the charge may or may not
			// have been applied
			w.unresolved++
		} else if f.hasChg {
			w.ledger.Add(f.sub, f.charged)
		} else if f.status >= 200 && f.status < 300 {
			w.missingCharged++
		}
	}
	w.next(f)
	w.drainBacklog(w.now())
}

// next moves f to its following request or ends it.
func (w *worker) next(f *flow) {
	f.first = false
	switch f.op {
	case OpCreate:
		if f.errKind != nil || f.status != http.StatusCreated && f.status != http.StatusOK || len(f.ref) == 0 {
			w.putFlow(f)
			return
		}
	case OpUpdate:
		if f.status == http.StatusNotFound {
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
	f.due += int64(s.ThinkTime)
	if int(f.step) > s.Updates || f.due >= w.stopAt {
		f.op = OpRelease
	} else {
		f.op = OpUpdate
	}
	heap.Push(&w.heap, f)
}

// sender performs requests handed over by its worker until the worker
// closes the dispatch channel.
func (w *worker) sender() {
	for f := range w.dispatch {
		w.perform(f)
		w.complete <- f
	}
}

var (
	classTimeout    = "timeout"
	classConnection = "connection"
	classNoLocation = "no_location"
	statusClasses   = func() map[int]string {
		m := map[int]string{}
		for s := 100; s < 600; s++ {
			m[s] = "http_" + strconv.Itoa(s)
		}
		return m
	}()
)

// perform builds and sends f's current request and classifies the answer
// (sender goroutine path).
func (w *worker) perform(f *flow) {
	f.sent = w.now()
	w.build(f)
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	err := w.cfg.Driver.Do(ctx, &f.req, &f.resp)
	cancel()
	w.finish(f, err)
}

// build prepares f's current request in f.req.
func (w *worker) build(f *flow) {
	f.class, f.errKind, f.status, f.charged, f.hasChg = "", nil, 0, 0, false
	r := &f.req
	r.Target = f.target
	r.Body = nil
	if w.charging {
		w.fillCharge(f)
		r.Charge = &f.charge
		return
	}
	r.Method = http.MethodPost
	switch f.op {
	case OpBalance:
		r.Method = http.MethodGet
		f.path = nchf.AppendAccountPath(f.path[:0], f.supi)
	case OpCreate, OpEvent:
		f.path = append(f.path[:0], nchf.PathCreate...)
		f.body = nchf.AppendBody(f.body[:0], w.request(f))
		r.Body = f.body
	case OpUpdate:
		f.path = nchf.AppendUpdatePath(f.path[:0], f.ref)
		f.body = nchf.AppendBody(f.body[:0], w.request(f))
		r.Body = f.body
	case OpRelease:
		f.path = nchf.AppendReleasePath(f.path[:0], f.ref)
		f.body = nchf.AppendBody(f.body[:0], w.request(f))
		r.Body = f.body
	}
	r.Path = f.path
}

// finish classifies the outcome of f's request; err is the driver's.
func (w *worker) finish(f *flow, err error) {
	f.done = w.now()
	if rx := f.resp.Received; err == nil && !rx.IsZero() {
		// When the answer reached the socket (event loop), not when
		// the loop got round to it.
		f.done = min(f.done, max(int64(rx.Sub(w.start)), f.sent))
	}
	if err != nil {
		f.errKind = err
		if errors.Is(err, driver.ErrTimeout) {
			f.class = classTimeout
		} else {
			f.class = classConnection
		}
		return
	}
	f.status = f.resp.Status
	f.charged, f.hasChg = f.resp.Charged, f.resp.HasCharged
	if w.charging {
		// The driver classified the answer; a create's Location is the
		// session reference (Gy Session-Id).
		f.class = f.resp.Class
		if f.op == OpCreate && f.status == http.StatusCreated {
			f.ref = append(f.ref[:0], f.resp.Location...)
			if len(f.ref) == 0 && f.class == "" {
				f.class = classNoLocation
			}
		}
		return
	}
	var ok bool
	switch f.op {
	case OpBalance, OpUpdate:
		ok = f.status == http.StatusOK
	case OpCreate, OpEvent:
		ok = f.status == http.StatusCreated || f.status == http.StatusOK
	case OpRelease:
		ok = f.status == http.StatusNoContent || f.status == http.StatusOK
	}
	if !ok {
		if c, found := statusClasses[f.status]; found {
			f.class = c
		} else {
			f.class = "http_other"
		}
		return
	}
	if f.op == OpCreate {
		f.ref = append(f.ref[:0], nchf.RefFromLocation(f.resp.Location)...)
		if len(f.ref) == 0 {
			f.class = classNoLocation
			return
		}
	}
	if f.op != OpBalance {
		nchf.FailedResultCodes(f.resp.Body, func(code []byte) {
			if f.class == "" {
				f.class = "rg_" + string(code)
			}
		})
	}
}

// request fills the ChargingDataRequest of f's current operation.
func (w *worker) request(f *flow) *nchf.Request {
	r := &f.nreq // kept in the flow: no allocation per request
	*r = nchf.Request{SUPI: f.supi, NFName: w.cfg.NFName, Seq: f.seq, Now: time.Now()}
	if f.op == OpEvent {
		r.OneTime, r.Node = true, "SMSF"
		r.Line = nchf.Line{RatingGroup: w.sc.SMS.RatingGroup, Request: true, Requested: units(w.sc.SMS.Units)}
		return r
	}
	s := w.session(f)
	r.Line.RatingGroup = s.RatingGroup
	switch f.op {
	case OpCreate:
		r.Line.Request, r.Line.Requested = true, units(s.Requested)
	case OpUpdate:
		f.used = units(s.Used)
		r.Line.Request, r.Line.Requested, r.Line.Used = true, units(s.Requested), &f.used
	case OpRelease:
		if f.step > 0 {
			f.used = units(s.Used)
			r.Line.Used = &f.used
		}
	}
	return r
}

// fillCharge fills f.charge, the protocol-neutral form of the request that
// request builds for Nchf, for Charging drivers.
func (w *worker) fillCharge(f *flow) {
	c := &f.charge
	*c = driver.Charge{SUPI: f.supi, Seq: f.seq}
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
	switch f.op {
	case OpCreate:
		c.Op = driver.ChargeCreate
		c.Request, c.Requested = true, chfUnits(s.Requested)
	case OpUpdate:
		c.Op, c.Session = driver.ChargeUpdate, f.ref
		c.Request, c.Requested, c.Used = true, chfUnits(s.Requested), chfUnits(s.Used)
	case OpRelease:
		c.Op, c.Session = driver.ChargeRelease, f.ref
		if f.step > 0 {
			c.Used = chfUnits(s.Used)
		}
	}
}

func chfUnits(u scenario.Units) chf.Units {
	return chf.Units{TotalVolume: u.TotalVolume, Time: u.Time, ServiceSpecific: u.ServiceSpecificUnits}
}

func units(u scenario.Units) nchf.Units {
	return nchf.Units{TotalVolume: u.TotalVolume, Time: u.Time, ServiceSpecificUnits: u.ServiceSpecificUnits}
}
