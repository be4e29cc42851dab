package engine

import (
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/histogram"
)

// CHF-initiated notifications (driver.Notice), answered as an SMF would:
// a REAUTHORIZATION by an update of the session at once (zero usage,
// the scenario's requested units; the session's own schedule then
// resumes), an ABORT_CHARGING by its release. A notice reaches the
// worker owning the flow through a bounded channel (Flow modulo the
// workers, as flow indexes are dealt), wakes its Poll (driver.Waker),
// and is handled on the worker's goroutine like a completion. With
// Scenario.Notifications the engine also asks the CHF, through
// Config.Operator, to notify a share of the sessions, and times the
// round trip: operator call → notice → the answer to the update or
// release.

// Operator triggers CHF-initiated notifications for an account through
// the CHF's operator API.
type Operator interface {
	// Trigger asks the CHF to re-authorise (or abort) every open session
	// of supi. It must not block (the call is made elsewhere) and must
	// copy supi; false means it had no room and nothing was sent.
	Trigger(supi []byte, abort bool) bool
	// Barred reports whether a request for supi sent at sent and
	// answered at done may have been refused because an abort this
	// Operator made barred the account (until it unbarred it).
	Barred(supi []byte, sent, done time.Time) bool
}

// Notice kinds, the index of NoticeStats' arrays.
const (
	NoticeReauth = 0 // REAUTHORIZATION, Gy RAR
	NoticeAbort  = 1 // ABORT_CHARGING, Gy ASR
	numNotice    = 2
)

// NoticeNames names the notice kinds by index.
var NoticeNames = [numNotice]string{"reauthorization", "abort_charging"}

// noticeCap bounds the notices waiting for one worker.
const noticeCap = 4096

// NoticeStats count the notifications of the whole run (every phase),
// by kind.
type NoticeStats struct {
	// Received counts notices the engine took; Refused those it had no
	// room for (the driver refused them: Nchf 503, which the CHF
	// retries).
	Received [numNotice]int64
	Refused  int64
	// Stale counts notices for a session that had ended (or a flow the
	// run does not know); Merged notices for a session already answering
	// one (an abort still overrides a re-authorisation).
	Stale  [numNotice]int64
	Merged [numNotice]int64
	// Answered counts notices whose update (or release) got an answer,
	// Failed those whose answer was an error.
	Answered [numNotice]int64
	Failed   [numNotice]int64
	// Latency is from the notice's arrival to the answer of the update or
	// release it caused.
	Latency [numNotice]*histogram.Histogram
	// Triggered counts the operator calls made for sessions
	// (Scenario.Notifications), TriggerRefused those the operator had no
	// room for.
	Triggered      [numNotice]int64
	TriggerRefused int64
	// TriggerLatency is from the operator call to the notice's arrival
	// for the session it was made for; RoundTrip from the call to the
	// answer of the update or release.
	TriggerLatency *histogram.Histogram
	RoundTrip      *histogram.Histogram
	// Barred counts creates, events and updates refused (Nchf 403, Gy
	// 4010) while an abort of the run barred their account
	// (Operator.Barred): not errors.
	Barred int64
}

func newNoticeStats() NoticeStats {
	return NoticeStats{Latency: [numNotice]*histogram.Histogram{histogram.New(), histogram.New()},
		TriggerLatency: histogram.New(), RoundTrip: histogram.New()}
}

// Any reports whether the run saw or triggered any notification.
func (n *NoticeStats) Any() bool {
	var s int64
	for k := range numNotice {
		s += n.Received[k] + n.Triggered[k]
	}
	return s+n.Refused+n.TriggerRefused+n.Barred > 0
}

// refusedByAbort reports whether f's failed request was refused because
// an abort of the run barred its account: a create, event or update
// refused the way a bar refuses (the driver's driver.Outcome.Barred),
// whose span overlaps the account's bar
// window. Off the hot path: only for such failures.
func (w *worker) refusedByAbort(f *flow) bool {
	if w.cfg.Operator == nil || w.sc.Notifications.Abort == 0 || !f.r.out.Barred {
		return false
	}
	if f.op != OpCreate && f.op != OpEvent && f.op != OpUpdate {
		return false
	}
	r := f.r
	w.supi = w.first.Append(w.supi[:0], int(f.sub))
	return w.cfg.Operator.Barred(w.supi, w.start.Add(time.Duration(r.sent)), w.start.Add(time.Duration(r.done)))
}

func (n *NoticeStats) merge(o *NoticeStats) {
	for k := range numNotice {
		n.Received[k] += o.Received[k]
		n.Stale[k] += o.Stale[k]
		n.Merged[k] += o.Merged[k]
		n.Answered[k] += o.Answered[k]
		n.Failed[k] += o.Failed[k]
		n.Triggered[k] += o.Triggered[k]
		n.Latency[k].Merge(o.Latency[k])
	}
	n.TriggerRefused += o.TriggerRefused
	n.Barred += o.Barred
	n.TriggerLatency.Merge(o.TriggerLatency)
	n.RoundTrip.Merge(o.RoundTrip)
}

// noticeRouter hands notices to the workers owning their flows.
type noticeRouter struct {
	workers []*worker
	refused atomic.Int64
}

// sink implements driver.NoticeSink.
func (r *noticeRouter) sink(n driver.Notice) bool {
	// a prefill flow's index has the top bit set (startPrefill) over
	// an index dealt like the others
	w := r.workers[(n.Flow&^(1<<63))%uint64(len(r.workers))]
	select {
	case w.notices <- n:
		if wk, ok := w.dw.(driver.Waker); ok {
			wk.Wake()
		}
		return true
	default:
		r.refused.Add(1)
		return false
	}
}

// trigger is a pending operator call for flow (by id) at due.
type trigger struct {
	due   int64
	flow  uint64
	abort bool
}

// Per-flow notice states (flow.notice, flow.answering).
const (
	noticeNone uint8 = iota
	noticeReauth
	noticeAbort
)

func noticeKind(abort bool) uint8 {
	if abort {
		return noticeAbort
	}
	return noticeReauth
}

// takeNotices handles the notices waiting for w.
func (w *worker) takeNotices(now int64) {
	for {
		select {
		case n := <-w.notices:
			w.notice(n, now)
		default:
			return
		}
	}
}

// notice handles one notice: answered at once when its flow waits for
// its next request, after the request in flight (or in the backlog)
// otherwise.
func (w *worker) notice(n driver.Notice, now int64) {
	kind := noticeKind(n.Abort)
	k := kind - 1
	w.nst.Received[k]++
	rx := min(int64(n.Received.Sub(w.start)), now)
	f := w.live[n.Flow]
	if f == nil {
		w.nst.Stale[k]++
		return
	}
	if f.side {
		if ns := w.side[f.id]; ns.trigAt > 0 {
			w.nst.TriggerLatency.Record(time.Duration(max(rx-ns.trigAt, 0)))
			ns.trigFrom, ns.trigAt = ns.trigAt, 0
		}
	}
	if f.notice != noticeNone || f.answering != noticeNone {
		if kind == noticeAbort && f.notice != noticeAbort && f.answering != noticeAbort {
			f.notice, w.getSide(f).noticeRx = noticeAbort, rx // an abort overrides
			if f.heapIdx >= 0 {
				w.heap.remove(int(f.heapIdx))
				w.answerNotice(f, now)
			}
			return
		}
		w.nst.Merged[k]++
		return
	}
	f.notice, w.getSide(f).noticeRx = kind, rx
	if f.heapIdx >= 0 { // waiting for its next request: answer now
		w.heap.remove(int(f.heapIdx))
		w.answerNotice(f, now)
	}
}

// answerNotice sends the request answering f's pending notice: an
// update (the session's next request saved for after it) or a release.
func (w *worker) answerNotice(f *flow, now int64) {
	kind := f.notice
	f.notice = noticeNone
	ns := w.getSide(f)
	if kind == noticeReauth {
		ns.savedOp, ns.savedDue = f.op, f.due
	}
	f.answering = kind
	ns.ansRx = ns.noticeRx
	if kind == noticeAbort {
		f.op = OpRelease
	} else {
		f.op = OpUpdate
	}
	f.due = min(ns.noticeRx, now)
	w.ready(f, now)
}

// noticeAnswered records the answer to a request that answered a notice.
func (w *worker) noticeAnswered(f *flow) {
	k := f.answering - 1
	r, ns := f.r, w.getSide(f)
	w.nst.Answered[k]++
	if r.out.Class != "" {
		w.nst.Failed[k]++
	}
	w.nst.Latency[k].Record(time.Duration(max(r.done-ns.ansRx, 0)))
	if ns.trigFrom > 0 {
		w.nst.RoundTrip.Record(time.Duration(max(r.done-ns.trigFrom, 0)))
		ns.trigFrom = 0
	}
}

// afterNotice continues a flow whose request answered a notice: after a
// re-authorisation's update the saved request resumes (its sequence
// number one further). It returns false when the flow goes on through
// next as usual (the request was a release, or the run ended it).
func (w *worker) afterNotice(f *flow) bool {
	kind := f.answering
	f.answering = noticeNone
	if kind != noticeReauth || f.op != OpUpdate {
		return false
	}
	if f.gone {
		w.putFlow(f)
		return true
	}
	ns := w.getSide(f)
	f.op, f.due = ns.savedOp, ns.savedDue
	f.seq++
	w.resume(f)
	return true
}

// resume puts f back on the heap for its next request, or answers a
// notice that arrived while its request was in flight.
func (w *worker) resume(f *flow) {
	if f.notice != noticeNone {
		w.answerNotice(f, w.now())
		return
	}
	w.heap.push(f)
}

// armTrigger picks, for a session just created, whether the operator is
// asked to re-authorise or abort it (Scenario.Notifications).
func (w *worker) armTrigger(f *flow) {
	n := &w.sc.Notifications
	x := w.rng.Float64()
	var abort bool
	switch {
	case x < n.Reauthorize:
	case x < n.Reauthorize+n.Abort:
		abort = true
	default:
		return
	}
	i := 0
	if f.kind == 1 { // scenario.KindVoice
		i = 1
	}
	at := f.due + int64(float64(w.session(f).ThinkTime)*n.AtOrDefault())
	w.triggers[i] = append(w.triggers[i], trigger{due: at, flow: f.id, abort: abort})
}

// fireTriggers makes the operator calls due by now (none after the
// stop), for the sessions still open. Each kind's queue is in due order
// up to the spread of create answers.
func (w *worker) fireTriggers(now int64) {
	for i := range w.triggers {
		q := w.triggers[i][w.thead[i]:]
		for len(q) > 0 && q[0].due <= now {
			t := q[0]
			q = q[1:]
			w.thead[i]++
			f := w.live[t.flow]
			if f == nil || now >= w.stopAt {
				continue
			}
			k := noticeKind(t.abort) - 1
			w.supi = w.first.Append(w.supi[:0], int(f.sub)) // Trigger copies it
			if !w.cfg.Operator.Trigger(w.supi, t.abort) {
				w.nst.TriggerRefused++
				continue
			}
			w.nst.Triggered[k]++
			w.getSide(f).trigAt = max(now, 1)
		}
		if w.thead[i] == len(w.triggers[i]) {
			w.triggers[i], w.thead[i] = w.triggers[i][:0], 0
		}
	}
}

// nextTrigger returns the due time of the earliest pending operator
// call, or limit.
func (w *worker) nextTrigger(limit int64) int64 {
	for i := range w.triggers {
		if q := w.triggers[i][w.thead[i]:]; len(q) > 0 && q[0].due < limit {
			limit = q[0].due
		}
	}
	return limit
}

// noticeState is the notification state of a notified session, kept
// beside its flow (w.side, by flow id) so that the many sessions never
// notified do not carry it.
type noticeState struct {
	noticeRx int64 // the pending notice's arrival, ns since start
	ansRx    int64 // the arrival of the notice the current request answers
	savedOp  Op    // a re-authorisation's update interrupts this request
	savedDue int64
	trigAt   int64 // an operator call for this session was made then; 0 none
	trigFrom int64 // the call whose notice arrived, until its answer
}

// getSide returns f's notification state, making it when f has none.
func (w *worker) getSide(f *flow) *noticeState {
	if f.side {
		return w.side[f.id]
	}
	var ns *noticeState
	if n := len(w.sideFree); n > 0 {
		ns = w.sideFree[n-1]
		w.sideFree = w.sideFree[:n-1]
	} else {
		ns = &noticeState{}
	}
	if w.side == nil {
		w.side = map[uint64]*noticeState{}
	}
	w.side[f.id], f.side = ns, true
	return ns
}

// putSide drops f's notification state.
func (w *worker) putSide(f *flow) {
	ns := w.side[f.id]
	delete(w.side, f.id)
	*ns = noticeState{}
	w.sideFree = append(w.sideFree, ns)
	f.side = false
}
