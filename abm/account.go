package abm

import (
	"bytes"
	"math"
	"slices"

	"github.com/chf-testbed/testbed/chf"
)

// Limits of what one account record holds.
type limits struct {
	sessionIdle int64 // seconds an open session without reservations is kept
	closedTTL   int64 // seconds a closed session's answer is kept for retries
	defaultHold int64 // seconds a reservation is held when the line names no time
	maxSessions int   // open sessions per account
	maxClosed   int   // closed sessions (answers kept for retries) per account
	maxRecent   int   // create/event identities (answers kept for retries) per account, and as many top-up identities
}

// MaxRecent is how many create and event answers an account remembers by
// identity (each for ClosedTTL): a repeat older than that, or after
// MaxRecent newer creates and events on the account, is charged as new.
// Top-up identities are remembered apart, MaxRecent of them.
const MaxRecent = 8

// expire drops reservations and sessions whose time has passed. It reports
// whether anything changed.
func (a *account) expire(now int64) bool {
	changed := false
	for i := 0; i < len(a.sessions); {
		s := &a.sessions[i]
		n := 0
		for _, r := range s.res {
			if r.expires > now {
				s.res[n] = r
				n++
			} else {
				a.reserved -= r.amount
				changed = true
			}
		}
		if n < len(s.res) {
			s.touch()
		}
		s.res = s.res[:n]
		if s.expires <= now && len(s.res) == 0 {
			a.removeSession(i)
			changed = true
			continue
		}
		i++
	}
	n := 0
	for i := range a.recent {
		if a.recent[i].expires > now {
			a.recent[n], a.recent[i] = a.recent[i], a.recent[n]
			n++
		} else {
			changed = true
		}
	}
	a.recent = a.recent[:n]
	n = 0
	for _, b := range a.buckets {
		if (b.expires == 0 || b.expires > now) && b.units > 0 {
			a.buckets[n] = b
			n++
		} else {
			changed = true
		}
	}
	a.buckets = a.buckets[:n]
	return changed
}

// bucketAvail is the units of service svc the live buckets hold beyond
// what reservations hold of them.
func (a *account) bucketAvail(svc chf.Service) uint64 {
	var total, held uint64
	for _, b := range a.buckets {
		if b.svc == svc {
			total = satAddU(total, b.units)
		}
	}
	if total == 0 {
		return 0
	}
	for i := range a.sessions {
		for _, r := range a.sessions[i].res {
			if r.svc == svc {
				held += r.bunits // at most the buckets' total, which fits (overflow.go)
			}
		}
	}
	if held >= total {
		return 0
	}
	return total - held
}

// consumeBuckets takes n units of service svc from its buckets, the one
// expiring first first (never-expiring last). The caller has checked
// bucketAvail.
func (a *account) consumeBuckets(svc chf.Service, n uint64) {
	for n > 0 {
		k := -1
		for i, b := range a.buckets {
			if b.svc != svc || b.units == 0 {
				continue
			}
			if k < 0 || earlier(b.expires, a.buckets[k].expires) {
				k = i
			}
		}
		if k < 0 {
			return
		}
		t := min(n, a.buckets[k].units)
		a.buckets[k].units -= t
		n -= t
	}
}

// earlier orders bucket expiries: 0 (never) is latest.
func earlier(x, y int64) bool {
	switch {
	case x == 0:
		return false
	case y == 0:
		return true
	}
	return x < y
}

func satAddU(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// usedCost consumes line l's usage from the buckets of its service first
// and returns the cost of the rest (the line's UsedCost when no bucket
// paid any of it: the rounding applies to what money pays).
func (a *account) usedCost(l *chf.RatedLine) int64 {
	if len(a.buckets) == 0 || l.UsedUnits == 0 {
		return l.UsedCost
	}
	b := min(l.UsedUnits, a.bucketAvail(l.Service))
	if b == 0 {
		return l.UsedCost
	}
	a.consumeBuckets(l.Service, b)
	return chf.Cost(l.UsedUnits-b, l.Price, l.UnitSize)
}

// findRecent returns the index of the remembered create or event with
// req's operation and exact identity (its Key, which hashes the
// timestamp too), or -1. The caller compares the content digest: the
// same identity with other content is refused, never answered. A
// retransmission flag changes nothing: only the exact identity of the
// original request is matched.
func (a *account) findRecent(req *chf.ApplyRequest) int {
	if req.Key == 0 {
		return -1
	}
	for i := range a.recent {
		// A create and an event are never the same request, whatever
		// their identities.
		if a.recent[i].key == req.Key && a.recent[i].op == req.Op {
			return i
		}
	}
	return -1
}

// remember keeps the answer to a create, event or top-up by its identity,
// after the others (a.recent stays in the order remembered), evicting the
// oldest of its kind (top-ups, or creates and events) past lim.maxRecent.
func (a *account) remember(req *chf.ApplyRequest, session []byte, resp *chf.ChargeResponse, now int64, lim *limits) {
	if req.Key == 0 || lim.maxRecent <= 0 {
		return
	}
	topUp := req.Op == chf.OpTopUp
	n, first := 0, -1
	for i := range a.recent {
		if (a.recent[i].op == chf.OpTopUp) == topUp {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if n >= lim.maxRecent {
		// Entries are in the order remembered: drop the first of the
		// kind, keeping its slot's capacity for the new one.
		e := a.recent[first]
		copy(a.recent[first:], a.recent[first+1:])
		a.recent[len(a.recent)-1] = e
		a.recent = a.recent[:len(a.recent)-1]
	}
	r := a.newRecent()
	r.key, r.digest, r.op = req.Key, req.Digest, req.Op
	r.expires = now + lim.closedTTL
	r.session = append(r.session, session...)
	r.result, r.charged = resp.Result, resp.Charged
	r.lines = append(r.lines, resp.Lines...)
}

// find returns the index of the session with the given id, or -1.
func (a *account) find(id string) int {
	for i := range a.sessions {
		if string(a.sessions[i].id) == id {
			return i
		}
	}
	return -1
}

// available is the balance not held by reservations, plus the credit
// limit of a postpaid account.
// No overflow: balance + creditLimit fits, reserved is within it (overflow.go).
func (a *account) available() int64 { return a.balance + a.creditLimit - a.reserved }

// debit takes up to cost minor units from the available balance (never
// more: an account is never overdrawn beyond its credit limit) and returns
// what it took; the rest is added to the account's overage, never lost.
func (a *account) debit(cost int64) int64 {
	if cost <= 0 {
		return 0
	}
	took := cost
	if av := a.available(); took > av {
		took = max(av, 0)
	}
	a.balance -= took
	a.debited += took
	if over := cost - took; over > 0 {
		a.overage = satAdd(a.overage, over)
		a.overNew = satAdd(a.overNew, over)
	}
	return took
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// releaseRG frees the reservation of rating group rg in s, if any.
func (a *account) releaseRG(s *session, rg uint32) {
	for i, r := range s.res {
		if r.rg == rg {
			a.reserved -= r.amount
			s.res = slices.Delete(s.res, i, i+1)
			s.touch()
			return
		}
	}
}

// releaseAll frees every reservation of s.
func (a *account) releaseAll(s *session) {
	for _, r := range s.res {
		a.reserved -= r.amount
	}
	s.res = s.res[:0]
	s.touch()
}

// holdSeconds is how long a grant on line l is held.
func holdSeconds(l *chf.RatedLine, lim *limits) int64 {
	switch {
	case l.ValidityTime > 0:
		return int64(l.ValidityTime)
	case l.QuotaHoldingTime > 0:
		return int64(l.QuotaHoldingTime)
	}
	return lim.defaultHold
}

// grant reserves quota for line l in session s, shrunk to what the
// available balance covers, and fills g.
func (a *account) grant(s *session, l *chf.RatedLine, g *chf.GrantLine, now int64, lim *limits) {
	want := l.GrantUnits
	if want == 0 {
		return
	}
	// Buckets of the service pay first, money the rest.
	var bu, bav uint64
	if len(a.buckets) > 0 {
		bav = a.bucketAvail(l.Service)
		bu = min(want, bav)
	}
	mu := want - bu
	cost := chf.Cost(mu, l.Price, l.UnitSize)
	av := max(a.available(), 0)
	if cost > av {
		mu = chf.Covered(av, l.Price, l.UnitSize)
		if mu == 0 && bu == 0 {
			g.Result = chf.ResultQuotaLimitReached
			return
		}
		cost = chf.Cost(mu, l.Price, l.UnitSize)
		g.FinalUnit = true
	} else if satAddU(bav-bu, chf.Covered(av-cost, l.Price, l.UnitSize)) < want {
		// This grant fits but another full one would not.
		g.FinalUnit = true
	}
	units := bu + mu
	g.Granted = chf.UnitsOf(l.Service, units)
	if cost > 0 || bu > 0 {
		s.res = append(s.res, reservation{rg: l.RatingGroup, amount: cost, units: units, expires: now + holdSeconds(l, lim), bunits: bu, svc: l.Service})
		s.touch()
		a.reserved += cost // cost <= available: reserved stays within balance + creditLimit
	}
}

// topUp credits an OpTopUp: money onto the balance, and a bucket. When a
// sum would overflow (see overflow.go) it changes nothing and returns the
// field that overflows (chf.ParamAmount, ...); else "".
func (a *account) topUp(t *chf.TopUp, now int64) (overflows string) {
	bal, cred, exp, p := a.topUpSums(t, now)
	if p != "" {
		return p
	}
	a.balance, a.credited = bal, cred
	if b := t.Bucket; b.Units > 0 {
		a.buckets = append(a.buckets, bucket{svc: b.Service, units: b.Units, expires: exp})
	}
	return ""
}

// fillBuckets answers the live buckets with what reservations hold.
func (a *account) fillBuckets(resp *chf.ChargeResponse, now int64) {
	resp.Buckets = resp.Buckets[:0]
	for _, b := range a.buckets {
		if b.expires != 0 && b.expires <= now || b.units == 0 {
			continue
		}
		resp.Buckets = append(resp.Buckets, chf.Bucket{Service: b.svc, Units: b.units, Expires: b.expires})
	}
	for i := range resp.Buckets {
		rb := &resp.Buckets[i]
		// Held units are reported on the first bucket of their service,
		// wherever the others of the service are.
		if firstOf(resp.Buckets[:i], rb.Service) {
			total := uint64(0)
			for j := i; j < len(resp.Buckets); j++ {
				if resp.Buckets[j].Service == rb.Service {
					total += resp.Buckets[j].Units // fits: top-ups check the total (overflow.go)
				}
			}
			rb.Held = total - min(total, a.bucketAvail(rb.Service))
		}
	}
}

// firstOf reports whether no bucket of bs is of service svc.
func firstOf(bs []chf.Bucket, svc chf.Service) bool {
	for i := range bs {
		if bs[i].Service == svc {
			return false
		}
	}
	return true
}

// closeSession marks s closed, frees its reservations and bounds the number
// of closed sessions kept, evicting the oldest.
func (a *account) closeSession(s *session, now int64, lim *limits) {
	a.releaseAll(s)
	s.closed = true
	s.expires = now + lim.closedTTL
	s.touch()
	id := s.id
	closed, oldest := 0, -1
	for i := range a.sessions {
		c := &a.sessions[i]
		if !c.closed || bytes.Equal(c.id, id) {
			if c.closed {
				closed++
			}
			continue
		}
		closed++
		if oldest < 0 || c.expires < a.sessions[oldest].expires {
			oldest = i
		}
	}
	if closed > lim.maxClosed && oldest >= 0 {
		a.removeSession(oldest)
	}
}

// refresh extends an open session's life past its reservations.
func (s *session) refresh(now int64, lim *limits) {
	exp := now + lim.sessionIdle
	for _, r := range s.res {
		exp = max(exp, r.expires)
	}
	s.expires = exp
	s.touch()
}

// openSessions counts the sessions that are not closed.
func (a *account) openSessions() int {
	n := 0
	for i := range a.sessions {
		if !a.sessions[i].closed {
			n++
		}
	}
	return n
}

// apply runs one charging event on the decoded account at time now (unix
// seconds) and fills resp. It reports whether the record must be written.
// resp.Lines is reused. The requests that do not charge (the sweep's
// expiry, an inquiry, the session list, a top-up, an unbar) are answered
// by their own methods; charge runs the rest.
func (a *account) apply(req *chf.ApplyRequest, now int64, lim *limits, resp *chf.ChargeResponse) (write bool) {
	write = a.expire(now)
	resp.Result, resp.Detail, resp.Charged, resp.Replayed = chf.ResultSuccess, "", 0, false
	resp.Lines = resp.Lines[:0]
	resp.Offline = 0
	resp.Buckets = resp.Buckets[:0]
	defer a.fillTotals(resp)
	switch req.Op {
	case opExpire:
		return a.noteSweepEpoch(req) || write
	case chf.OpBalance:
		// An inquiry never writes: expired reservations are left out of
		// the answer and released by the next charging event or the sweep.
		a.fillBuckets(resp, now)
		return false
	case chf.OpSessions, chf.OpAbortSessions:
		return a.listSessions(req, resp)
	case chf.OpTopUp:
		return a.topUpOnce(req, now, lim, resp) || write
	case chf.OpUnbar:
		a.fillBuckets(resp, now)
		return a.unbar() || write
	}
	return a.charge(req, now, lim, resp) || write
}

// fillTotals sets the account's totals in resp (every answer carries them).
func (a *account) fillTotals(resp *chf.ChargeResponse) {
	resp.Balance, resp.Reserved, resp.Currency, resp.Debited, resp.Overage = a.balance, a.reserved, a.currency, a.debited, a.overage
	resp.OfflineTotal, resp.Credited, resp.CreditLimit = a.offline, a.credited, a.creditLimit
	resp.Barred = a.barred
}

// noteSweepEpoch takes the tariff epoch of the sweep's expiry request:
// the sweep queued the re-authorisation of the sessions granted under
// the older tariff. It reports whether the account changed.
func (a *account) noteSweepEpoch(req *chf.ApplyRequest) bool {
	if req.Epoch == 0 || a.epoch == req.Epoch {
		return false
	}
	a.epoch = req.Epoch
	return true
}

// listSessions answers the open sessions' notification targets; an abort
// (OpAbortSessions) also bars the account and marks each session
// aborted. It reports whether it marked anything.
func (a *account) listSessions(req *chf.ApplyRequest, resp *chf.ChargeResponse) (marked bool) {
	resp.Targets = resp.Targets[:0]
	abort := req.Op == chf.OpAbortSessions
	if abort && !a.barred {
		// The account too: no new session or event until OpUnbar.
		a.barred, marked = true, true
	}
	for i := range a.sessions {
		if s := &a.sessions[i]; !s.closed {
			resp.Targets = append(resp.Targets, chf.NotifyTarget{Session: string(s.id), URI: string(s.notify)})
			if abort && !s.aborted {
				s.aborted, marked = true, true
				s.touch()
			}
		}
	}
	return marked
}

// topUpOnce credits a top-up once: the same top-up again (the operator's
// retry with its idempotency key, a retry between the services, or the
// ABM's own after a write in doubt) is answered with the balance now,
// marked as a replay. It reports whether it credited.
func (a *account) topUpOnce(req *chf.ApplyRequest, now int64, lim *limits, resp *chf.ChargeResponse) bool {
	if k := a.findRecent(req); k >= 0 {
		if a.recent[k].digest != req.Digest {
			resp.Result, resp.Detail = chf.ResultReplayMismatch, "a top-up with this idempotency key was answered with another amount or bucket"
			return false
		}
		resp.Replayed = true
		a.fillBuckets(resp, now)
		return false
	}
	p := a.topUp(&req.TopUp, now)
	if p == "" {
		a.remember(req, nil, resp, now, lim)
	}
	a.fillBuckets(resp, now)
	if p != "" {
		resp.Result, resp.Detail, resp.Param = chf.ResultOverflow, topUpOverflowDetail(p), p
		return false
	}
	return true
}

// unbar lifts an abort's bar; it reports whether the account was barred.
func (a *account) unbar() bool {
	if !a.barred {
		return false
	}
	a.barred = false
	return true
}

// charge runs a create, update, release or event: a replay is answered
// as first answered, a request out of sequence or over the account's
// limits is refused, and the rest is charged and remembered. It reports
// whether it charged (the record must be written).
func (a *account) charge(req *chf.ApplyRequest, now int64, lim *limits, resp *chf.ChargeResponse) bool {
	resp.Session = ""
	if (req.Op == chf.OpCreate || req.Op == chf.OpEvent) && a.replayRecent(req, resp) {
		return false
	}
	si := -1
	if req.Session != "" {
		si = a.find(req.Session)
	}
	if si >= 0 && a.sessions[si].answerAgain(req, resp) {
		return false
	}
	if usageOverflows(a, req, resp) {
		return false
	}
	s, ok := a.admit(req, si, lim, resp)
	if !ok {
		return false
	}
	if req.Op == chf.OpEvent {
		a.applyEvent(req, resp)
	} else {
		a.applySession(req, s, now, lim, resp)
	}
	a.record(req, s, now, lim, resp)
	a.noteEpoch(req)
	return true
}

// replayRecent answers a create or event it answered before (a
// retransmission, or a retry after a timeout) with the first answer and
// what it charged, marked as a replay, charged once; other content under
// the same identity is refused. It reports whether it answered.
func (a *account) replayRecent(req *chf.ApplyRequest, resp *chf.ChargeResponse) bool {
	k := a.findRecent(req)
	if k < 0 {
		return false
	}
	r := &a.recent[k]
	if r.digest != req.Digest {
		resp.Result, resp.Detail = chf.ResultReplayMismatch, "a request with this identity was answered with other content"
		return true
	}
	resp.Result, resp.Detail = r.result, replayDetail(r.result)
	resp.Charged, resp.Replayed = r.charged, true
	resp.Lines = append(resp.Lines, r.lines...)
	if req.Op == chf.OpCreate && len(r.session) > 0 {
		resp.Session = string(r.session)
	}
	return true
}

// answerAgain answers a request of the session s that must not be charged:
// one to a released session, a sequence number reused for other content
// or another operation, an older one, or a retry (answered as first
// answered, marked as a replay). It reports whether it answered.
func (s *session) answerAgain(req *chf.ApplyRequest, resp *chf.ChargeResponse) bool {
	same := s.op == 0 || s.op == req.Op && s.digest == req.Digest
	switch {
	case s.closed && (req.Seq != s.lastSeq || !same):
		// Anything but the very request that closed it.
		resp.Result, resp.Detail = chf.ResultSessionUnknown, "charging session already released"
	case req.Seq == s.lastSeq && s.op != 0 && s.op != req.Op:
		resp.Result, resp.Detail = chf.ResultSequenceReused, "invocation sequence number already answered for another operation"
	case req.Seq == s.lastSeq && !same:
		resp.Result, resp.Detail = chf.ResultReplayMismatch, "a request with this sequence number was answered with other content"
	case req.Seq == s.lastSeq:
		// A retry: answer what was answered with what it charged,
		// marked as a replay; charge nothing.
		resp.Result = s.result
		resp.Charged, resp.Replayed = s.charged, true
		resp.Lines = append(resp.Lines, s.lines...)
		resp.Detail = replayDetail(s.result)
	case req.Seq < s.lastSeq:
		resp.Result, resp.Detail = chf.ResultStaleSequence, "invocation sequence number older than the last one answered"
	default:
		return false
	}
	return true
}

// admit returns the session req charges (nil for an event without one),
// opening it for a create (or an event with a session), or refuses req
// (ok false, resp filled): a session that exists already or does not,
// a barred account, too many open sessions, an aborted session, an
// unknown operation. si is req's session's index, -1 when none.
func (a *account) admit(req *chf.ApplyRequest, si int, lim *limits, resp *chf.ChargeResponse) (s *session, ok bool) {
	switch req.Op {
	case chf.OpCreate, chf.OpEvent:
		if si >= 0 {
			resp.Result, resp.Detail = chf.ResultInvalid, "session already exists"
			return nil, false
		}
		if a.barred && !reportsOnly(req) {
			// After the replays: a create or event answered before the
			// abort still gets its answer. An event that only reports
			// delivered usage (PEC, offline) is charged: the service was
			// given before the CHF could refuse it.
			resp.Result, resp.Detail = chf.ResultEndUserServiceDenied, "account barred by the operator (abort): unbar it first"
			return nil, false
		}
		if req.Op == chf.OpCreate && a.openSessions() >= lim.maxSessions {
			resp.Result, resp.Detail = chf.ResultEndUserServiceDenied, "too many open sessions on the account"
			return nil, false
		}
		if req.Op == chf.OpCreate || req.Session != "" {
			s = a.newSession(req.Session)
			s.notify = append(s.notify, req.Notify...)
			s.touch()
		}
		return s, true
	case chf.OpUpdate, chf.OpRelease:
		if si < 0 || a.sessions[si].closed {
			resp.Result, resp.Detail = chf.ResultSessionUnknown, "no such charging session"
			return nil, false
		}
		s = &a.sessions[si]
		if req.Op == chf.OpUpdate && s.aborted {
			resp.Result, resp.Detail = chf.ResultEndUserServiceDenied, "charging session aborted by the operator: release it"
			return nil, false
		}
		return s, true
	}
	resp.Result, resp.Detail = chf.ResultInvalid, "unknown operation"
	return nil, false
}

// record remembers what req was answered: a create's or event's identity
// (replayRecent), and the session's last request and answer
// (answerAgain); an event, a release or a refusal closes the session.
func (a *account) record(req *chf.ApplyRequest, s *session, now int64, lim *limits, resp *chf.ChargeResponse) {
	if req.Op == chf.OpCreate || req.Op == chf.OpEvent {
		var id []byte
		if s != nil && req.Op == chf.OpCreate {
			id = s.id
		}
		a.remember(req, id, resp, now, lim)
	}
	if s == nil {
		return
	}
	s.touch()
	s.lastSeq = req.Seq
	s.op, s.digest = req.Op, req.Digest
	s.result, s.charged = resp.Result, resp.Charged
	s.lines = append(s.lines[:0], resp.Lines...)
	if req.Op == chf.OpEvent || req.Op == chf.OpRelease || resp.Result != chf.ResultSuccess {
		a.closeSession(s, now, lim)
	} else {
		s.refresh(now, lim)
	}
}

// reportsOnly reports whether req is an event whose every line reports
// delivered usage (charged after delivery, or offline): nothing in it
// can be refused before delivery.
func reportsOnly(req *chf.ApplyRequest) bool {
	if req.Op != chf.OpEvent {
		return false
	}
	for i := range req.Lines {
		if l := &req.Lines[i]; !l.AfterDelivery && !l.Offline {
			return false
		}
	}
	return true
}

// holdsRG reports whether s holds a reservation (an online grant) for
// rating group rg.
func (s *session) holdsRG(rg uint32) bool {
	for i := range s.res {
		if s.res[i].rg == rg {
			return true
		}
	}
	return false
}

// applySession debits the usage and reserves the grants of a create,
// update or release. A line reported for offline charging on a rating
// group the session holds an online grant for is charged by the grant's
// method: debited as online usage (overage beyond the balance) and
// granted again if it asks; without a grant it is offline usage.
func (a *account) applySession(req *chf.ApplyRequest, s *session, now int64, lim *limits, resp *chf.ChargeResponse) {
	requested, denied := 0, 0
	for i := range req.Lines {
		l := &req.Lines[i]
		g := chf.GrantLine{RatingGroup: l.RatingGroup, Result: l.Result, ValidityTime: l.ValidityTime, QuotaHoldingTime: l.QuotaHoldingTime}
		if l.Result == chf.ResultSuccess && l.Offline && !s.holdsRG(l.RatingGroup) {
			// Offline charging: rated and recorded, never debited, no
			// quota.
			a.offline = satAdd(a.offline, l.UsedCost)
			resp.Offline = satAdd(resp.Offline, l.UsedCost)
		} else if l.Result == chf.ResultSuccess {
			a.releaseRG(s, l.RatingGroup)
			resp.Charged += a.debit(a.usedCost(l))
			if l.Request && req.Op != chf.OpRelease {
				requested++
				a.grant(s, l, &g, now, lim)
				if g.Result != chf.ResultSuccess {
					denied++
				}
			}
		}
		if g.Result != chf.ResultSuccess || g.Granted.IsZero() {
			g.ValidityTime, g.QuotaHoldingTime = 0, 0
		}
		resp.Lines = append(resp.Lines, g)
	}
	if req.Op == chf.OpCreate && requested > 0 && denied == requested {
		resp.Result, resp.Detail = chf.ResultQuotaLimitReached, "balance exhausted"
	}
}

// applyEvent debits one-time events. A line charged before delivery
// (IEC) is charged in full or refused with QUOTA_LIMIT_REACHED, nothing
// taken; a line charged after delivery (PEC) is debited as far as the
// balance goes and the rest recorded as overage, never refused.
func (a *account) applyEvent(req *chf.ApplyRequest, resp *chf.ChargeResponse) {
	charged, denied := 0, 0
	for i := range req.Lines {
		l := &req.Lines[i]
		g := chf.GrantLine{RatingGroup: l.RatingGroup, Result: l.Result}
		if l.Result == chf.ResultSuccess && l.Offline {
			a.offline = satAdd(a.offline, l.UsedCost)
			resp.Offline = satAdd(resp.Offline, l.UsedCost)
			g.Granted = chf.UnitsOf(l.Service, l.UsedUnits)
			charged++
		} else if l.Result == chf.ResultSuccess && l.AfterDelivery {
			resp.Charged += a.debit(a.usedCost(l))
			g.Granted = chf.UnitsOf(l.Service, l.UsedUnits)
			charged++
		} else if l.Result == chf.ResultSuccess {
			cost := l.UsedCost
			var b uint64
			if len(a.buckets) > 0 {
				if b = min(l.UsedUnits, a.bucketAvail(l.Service)); b > 0 {
					cost = chf.Cost(l.UsedUnits-b, l.Price, l.UnitSize)
				}
			}
			if cost > a.available() {
				g.Result = chf.ResultQuotaLimitReached
				denied++
			} else {
				a.consumeBuckets(l.Service, b)
				resp.Charged += a.debit(cost)
				g.Granted = chf.UnitsOf(l.Service, l.UsedUnits)
				charged++
			}
		}
		resp.Lines = append(resp.Lines, g)
	}
	if denied > 0 && charged == 0 {
		resp.Result, resp.Detail = chf.ResultQuotaLimitReached, "balance exhausted"
	}
}

// replayDetail is the Detail of a replayed failure answer (details are not
// stored in the record).
func replayDetail(r chf.Result) string {
	switch r {
	case chf.ResultSuccess:
		return ""
	case chf.ResultQuotaLimitReached:
		return "balance exhausted"
	}
	return "repeated request"
}

// holds reports whether the account records req as answered (its identity
// is remembered: the create's or event's key, the session's sequence
// number with the same operation and content), which tells whether a write
// that applied req landed. known is false for operations that leave no
// identity (top-ups without a key, expiry, inquiries).
func (a *account) holds(req *chf.ApplyRequest) (present, known bool) {
	switch req.Op {
	case chf.OpCreate, chf.OpEvent, chf.OpTopUp:
		if req.Key == 0 {
			return false, false
		}
		k := a.findRecent(req)
		return k >= 0 && a.recent[k].digest == req.Digest, true
	case chf.OpUpdate, chf.OpRelease:
		si := a.find(req.Session)
		if si < 0 {
			return false, true
		}
		s := &a.sessions[si]
		return s.lastSeq > req.Seq || s.lastSeq == req.Seq && s.op == req.Op && s.digest == req.Digest, true
	}
	return false, false
}
