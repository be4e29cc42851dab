package engine

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// notifyDriver answers every charge at once (in Poll) and records each
// flow's requests; it delivers notices (driver.Notifiable) that its
// Operator makes, as a CHF would after an operator call.
type notifyDriver struct {
	mu    sync.Mutex
	flows map[uint64][]driver.Charge
	sink  driver.NoticeSink
	supi  map[string]uint64 // the open session of each subscriber
	trig  map[uint64]bool   // flows notified: abort or not
	grant driver.Grant      // answered to charges that want one
}

func (d *notifyDriver) NewWorker() (driver.Worker, error) {
	return &notifyWorker{d: d, wake: make(chan struct{}, 1)}, nil
}
func (d *notifyDriver) Targets() int { return 1 }
func (d *notifyDriver) Close()       {}
func (d *notifyDriver) SetNoticeSink(s driver.NoticeSink) bool {
	d.mu.Lock()
	d.sink = s
	d.mu.Unlock()
	return true
}

// Trigger implements Operator: the notice goes to the subscriber's
// open session, from another goroutine, like the CHF's.
func (d *notifyDriver) Trigger(supi []byte, abort bool) bool {
	d.mu.Lock()
	flow, ok := d.supi[string(supi)]
	sink := d.sink
	d.mu.Unlock()
	if ok {
		d.mu.Lock()
		d.trig[flow] = abort
		d.mu.Unlock()
		go sink(driver.Notice{Flow: flow, Abort: abort, Received: time.Now()})
	}
	return true
}

// Barred implements Operator: the fake CHF bars nothing.
func (d *notifyDriver) Barred([]byte, time.Time, time.Time) bool { return false }

type notifyCall struct {
	c    driver.Charge
	o    *driver.Outcome
	done func(error)
}

type notifyWorker struct {
	d       *notifyDriver
	pending []notifyCall
	wake    chan struct{}
}

func (w *notifyWorker) Queue(c *driver.Charge, o *driver.Outcome, done func(error)) error {
	cc := *c
	cc.SUPI = append([]byte(nil), c.SUPI...)
	cc.Session = append([]byte(nil), c.Session...)
	w.pending = append(w.pending, notifyCall{cc, o, done})
	return nil
}
func (w *notifyWorker) Flush() {}
func (w *notifyWorker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
func (w *notifyWorker) Poll(wait time.Duration) error {
	if len(w.pending) == 0 && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.wake:
		}
		t.Stop()
	}
	calls := w.pending
	w.pending = nil
	for _, k := range calls {
		k.o.Reset()
		k.o.Resolved, k.o.HasCharged, k.o.Received = true, true, time.Now()
		if k.c.WantGrant {
			k.o.Grant = w.d.grant
		}
		w.d.mu.Lock()
		w.d.flows[k.c.Flow] = append(w.d.flows[k.c.Flow], k.c)
		switch k.c.Op {
		case driver.ChargeCreate:
			k.o.Ref = append(k.o.Ref, "ref-"+strconv.FormatUint(k.c.Flow, 10)...)
			w.d.supi[string(k.c.SUPI)] = k.c.Flow
		case driver.ChargeRelease:
			delete(w.d.supi, string(k.c.SUPI))
		}
		w.d.mu.Unlock()
		k.done(nil)
	}
	return nil
}
func (w *notifyWorker) Close() {}

// TestNotificationsAnswered: sessions the operator re-authorises get one
// extra update (no usage, the next sequence number) at once and then
// carry on; sessions it aborts are released and send nothing more; the
// figures count each notice once, with its latency and round trip.
func TestNotificationsAnswered(t *testing.T) {
	sc := scenario.Default()
	sc.Mix = scenario.Mix{Data: 1}
	sc.Data.Updates = 3
	sc.Data.ThinkTime = scenario.Duration(200 * time.Millisecond)
	sc.Subscribers.Count = 1_000_000 // sessions of one subscriber do not overlap (almost surely)
	sc.Load = scenario.Load{SessionsPerSecond: 200}
	sc.Phases = scenario.Phases{Duration: scenario.Duration(time.Second)}
	sc.Notifications = scenario.Notifications{Reauthorize: 0.3, Abort: 0.1}
	d := &notifyDriver{flows: map[uint64][]driver.Charge{}, supi: map[string]uint64{}, trig: map[uint64]bool{}}
	st, err := Run(context.Background(), Config{Scenario: sc, Driver: d, Operator: d, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	n := &st.Notices
	reauth, abort := n.Triggered[NoticeReauth], n.Triggered[NoticeAbort]
	if reauth < 20 || abort < 5 {
		t.Fatalf("triggered %d re-authorisations and %d aborts of ~200 sessions", reauth, abort)
	}
	for k := range numNotice {
		if n.Received[k] != n.Triggered[k] || n.Answered[k] != n.Received[k] || n.Failed[k] != 0 || n.Stale[k] != 0 ||
			n.Latency[k].Count() != n.Answered[k] {
			t.Fatalf("%s: %+v", NoticeNames[k], n)
		}
	}
	if n.TriggerLatency.Count() != reauth+abort || n.RoundTrip.Count() != reauth+abort {
		t.Fatalf("trigger latency %d, round trip %d of %d calls", n.TriggerLatency.Count(), n.RoundTrip.Count(), reauth+abort)
	}
	var extra, aborted int64
	for flow, cs := range d.flows {
		zero := -1
		for i, c := range cs {
			if c.Seq != uint32(i) {
				t.Fatalf("flow %d: request %d has sequence number %d: %+v", flow, i, c.Seq, cs)
			}
			if c.Op == driver.ChargeUpdate && c.Used.IsZero() {
				if zero >= 0 {
					t.Fatalf("flow %d: two updates without usage: %+v", flow, cs)
				}
				zero = i
			}
		}
		if last := cs[len(cs)-1]; last.Op != driver.ChargeRelease {
			t.Fatalf("flow %d ends with %v", flow, last.Op)
		}
		ab, notified := d.trig[flow]
		switch {
		case !notified && zero < 0:
		case notified && !ab && zero == 1: // right after the create, then the session's own
			extra++
		case notified && ab && zero < 0 && len(cs) == 2: // create, then the release at once
			aborted++
		default:
			t.Fatalf("flow %d (notified %v, abort %v): %+v", flow, notified, ab, cs)
		}
	}
	if extra != reauth || aborted != abort {
		t.Fatalf("%d flows with an extra update (want %d), %d released early (want %d)", extra, reauth, aborted, abort)
	}
}

// TestNotificationsNeedADriverThatReceivesThem: a scenario that
// triggers notifications refuses a driver that cannot receive them.
func TestNotificationsNeedADriverThatReceivesThem(t *testing.T) {
	sc := balanceOnly(100, time.Second, 16)
	sc.Notifications.Reauthorize = 0.1
	d := &notifyDriver{flows: map[uint64][]driver.Charge{}, supi: map[string]uint64{}}
	if _, err := Run(context.Background(), Config{Scenario: sc, Driver: nopDriver{}, Operator: d}); err == nil {
		t.Fatal("no error")
	}
}

// A notice reaches the worker that owns its flow, a prefill flow's too
// (its index has the top bit set over an index dealt like the others).
func TestNoticeRouting(t *testing.T) {
	r := &noticeRouter{}
	for range 3 {
		r.workers = append(r.workers, &worker{notices: make(chan driver.Notice, 1)})
	}
	for _, c := range []struct {
		flow uint64
		want int
	}{{7, 1}, {1<<63 | 4, 1}, {1<<63 | 5, 2}, {1 << 63, 0}} {
		if !r.sink(driver.Notice{Flow: c.flow}) {
			t.Fatalf("flow %#x: refused", c.flow)
		}
		for i, w := range r.workers {
			select {
			case <-w.notices:
				if i != c.want {
					t.Errorf("flow %#x went to worker %d, want %d", c.flow, i, c.want)
				}
			default:
			}
		}
	}
}

// A notified session's side state lives only as long as the session: it
// is dropped (and reused) when the flow ends, so w.side is bounded by
// the open sessions.
func TestNoticeSideState(t *testing.T) {
	sc := scenario.Default()
	sc.Subscribers.Count = 100
	cfg := Config{Scenario: sc, Driver: nopDriver{}}
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	start := time.Now()
	agg := newAggregator(nil, start, 0, 0, time.Second)
	w := newWorker(0, 1, &cfg, nopWorker{}, first, start, newSchedule(100, 0), agg, 0, time.Second)
	w.live = map[uint64]*flow{}
	f := w.getFlow()
	f.id = 42
	w.live[f.id] = f
	w.notice(driver.Notice{Flow: 42, Received: start}, 1)
	if !f.side || len(w.side) != 1 || w.nst.Received[NoticeReauth] != 1 {
		t.Fatalf("after a notice: side %v, %d entries, received %v", f.side, len(w.side), w.nst.Received)
	}
	ns := w.side[42]
	w.putFlow(f)
	if f.side || len(w.side) != 0 || f.notice != noticeNone {
		t.Fatalf("after the end: side %v, %d entries, notice %d", f.side, len(w.side), f.notice)
	}
	if w.nst.Stale[NoticeReauth] != 1 {
		t.Fatalf("the pending notice of an ended session is not counted stale: %v", w.nst.Stale)
	}
	g := w.getFlow()
	g.id = 43
	if w.getSide(g) != ns || *ns != (noticeState{}) {
		t.Fatal("the side state was not reset and reused")
	}
}
