package abm

import (
	"sync/atomic"

	"github.com/chf-testbed/testbed/chf"
)

// CHF-initiated re-authorisation. The reservation sweep finds the open
// sessions that must re-authorise:
//
//   - tariff: the account's tariff epoch (BinEpoch) differs from the
//     newest the OCPs rate with (the Epoch of the last rated request this
//     ABM applied): its open sessions were granted under an older tariff;
//   - bucket: a session's reservations hold units of a service whose live
//     buckets no longer hold that many (a bucket expired under them).
//
// It queues them (a bounded queue: full → dropped and counted) and the
// CGWs take them with chf.OpNotifications through the OCP and send each a
// REAUTHORIZATION (Gy: RAR). See README.md, Notifications.

// Reasons a session is re-authorised, for the counters.
const (
	reasonTariff = iota
	reasonBucket
	nReasons
)

var reasonNames = [nReasons]string{reasonTariff: "tariff", reasonBucket: "bucket"}

// noteEpoch records the tariff epoch of a rated request that was applied:
// an account without other open sessions (or whose epoch is unknown) takes
// it; otherwise the other sessions may still hold grants of an older
// tariff and the epoch stays, for the sweep to re-authorise them.
func (a *account) noteEpoch(req *chf.ApplyRequest) {
	e := req.Epoch
	if e == 0 || a.epoch == e {
		return
	}
	if a.epoch != 0 {
		for i := range a.sessions {
			s := &a.sessions[i]
			if !s.closed && string(s.id) != req.Session {
				return
			}
		}
	}
	a.epoch = e
}

// sweepTargets appends to dst the open sessions of a (decoded and expired
// at now) that must re-authorise with cur the newest tariff epoch (0 =
// unknown), each with a notifyUri, and counts them by reason in n. stale
// is set when the account's epoch is older than cur and it has open
// sessions: once they are queued the sweep records cur on the account.
func (a *account) sweepTargets(cur uint32, dst []chf.NotifyTarget, n *[nReasons]int) (out []chf.NotifyTarget, stale bool) {
	open := false
	for i := range a.sessions {
		if !a.sessions[i].closed {
			open = true
			break
		}
	}
	if !open {
		return dst, false
	}
	stale = cur != 0 && a.epoch != 0 && a.epoch != cur
	var short [chf.ServiceSMS + 1]bool
	if !stale {
		var some bool
		if short, some = a.bucketShort(); !some {
			return dst, false
		}
	}
	for i := range a.sessions {
		s := &a.sessions[i]
		if s.closed || s.aborted || len(s.notify) == 0 {
			continue
		}
		if stale {
			dst = append(dst, chf.NotifyTarget{Session: string(s.id), URI: string(s.notify)})
			n[reasonTariff]++
			continue
		}
		if s.holdsShort(&short) {
			dst = append(dst, chf.NotifyTarget{Session: string(s.id), URI: string(s.notify)})
			n[reasonBucket]++
		}
	}
	return dst, stale
}

// pendingNote is a queued re-authorisation.
type pendingNote struct {
	t  chf.NotifyTarget
	at int64 // unix ns when queued
}

// notifyQueue is the bounded queue of pending re-authorisations between
// the sweep and the CGWs' polls. Safe for concurrent use.
type notifyQueue struct {
	ch  chan pendingNote
	ttl int64 // ns: older entries are dropped when taken

	queued  [nReasons]atomic.Uint64
	dropped atomic.Uint64 // queue full
	stale   atomic.Uint64 // older than ttl when taken
	taken   atomic.Uint64
}

// MaxNotifyQueue bounds --notify-queue: its entries (a session and a
// URI, about 40 bytes each) are allocated at start.
const MaxNotifyQueue = 1 << 20

func newNotifyQueue(size int, ttl int64) *notifyQueue {
	return &notifyQueue{ch: make(chan pendingNote, size), ttl: ttl}
}

// push queues t unless the queue is full (then it is counted dropped).
func (q *notifyQueue) push(t chf.NotifyTarget, reason int, now int64) bool {
	select {
	case q.ch <- pendingNote{t: t, at: now}:
		q.queued[reason].Add(1)
		return true
	default:
		q.dropped.Add(1)
		return false
	}
}

// take appends up to max queued targets to dst, dropping those older than
// the queue's ttl. It never waits.
func (q *notifyQueue) take(dst []chf.NotifyTarget, max int, now int64) []chf.NotifyTarget {
	for n := 0; n < max; {
		select {
		case p := <-q.ch:
			if now-p.at > q.ttl {
				q.stale.Add(1)
				continue
			}
			dst = append(dst, p.t)
			q.taken.Add(1)
			n++
		default:
			return dst
		}
	}
	return dst
}

// bucketShort reports, per service, whether the reservations hold more
// bucket units than the account's live buckets hold (a bucket expired
// under them), and whether any service is short.
func (a *account) bucketShort() (short [chf.ServiceSMS + 1]bool, some bool) {
	var held, live [chf.ServiceSMS + 1]uint64
	for i := range a.sessions {
		for _, r := range a.sessions[i].res {
			if r.bunits > 0 && r.svc <= chf.ServiceSMS {
				held[r.svc] = satAddU(held[r.svc], r.bunits)
			}
		}
	}
	for _, b := range a.buckets {
		if b.svc <= chf.ServiceSMS {
			live[b.svc] = satAddU(live[b.svc], b.units)
		}
	}
	for svc := range held {
		short[svc] = held[svc] > live[svc]
		some = some || short[svc]
	}
	return short, some
}

// holdsShort reports whether s holds bucket units of a service short says
// is short.
func (s *session) holdsShort(short *[chf.ServiceSMS + 1]bool) bool {
	for _, r := range s.res {
		if r.bunits > 0 && r.svc <= chf.ServiceSMS && short[r.svc] {
			return true
		}
	}
	return false
}

// sweepDue is when the sweep next has work on a (BinDue, Unix seconds):
// the earliest time at which account.expire would release a reservation,
// drop a session without reservations, an answer kept for retries or a
// bucket; 0 (due already) when a bucket ran out under an open session that
// a notification can re-authorise (sweepTargets); DueNever when none of
// these will happen. A tariff change is not in it: the sweep's filter
// compares BinEpoch with the newest epoch itself (Service.sweepFilter).
func (a *account) sweepDue() int64 {
	due := int64(DueNever)
	for i := range a.sessions {
		s := &a.sessions[i]
		if len(s.res) == 0 {
			// Dropped at s.expires; with reservations, not before they
			// expire, and the first of them is due sooner.
			due = min(due, s.expires)
			continue
		}
		for _, r := range s.res {
			due = min(due, r.expires)
		}
	}
	for i := range a.recent {
		due = min(due, a.recent[i].expires)
	}
	for _, b := range a.buckets {
		if b.units == 0 {
			return 0
		}
		if b.expires != 0 {
			due = min(due, b.expires)
		}
	}
	if due > 0 {
		if short, some := a.bucketShort(); some {
			for i := range a.sessions {
				s := &a.sessions[i]
				if !s.closed && !s.aborted && len(s.notify) > 0 && s.holdsShort(&short) {
					return 0
				}
			}
		}
	}
	return due
}
