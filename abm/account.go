package abm

import (
	"bytes"
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
}

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
		s.res = s.res[:n]
		if s.expires <= now && len(s.res) == 0 {
			a.removeSession(i)
			changed = true
			continue
		}
		i++
	}
	return changed
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

// available is the balance not held by reservations.
func (a *account) available() int64 { return a.balance - a.reserved }

// debit takes up to cost minor units from the available balance (never
// more: an account is never overdrawn) and returns what it took.
func (a *account) debit(cost int64) int64 {
	if cost <= 0 {
		return 0
	}
	if av := a.available(); cost > av {
		cost = max(av, 0)
	}
	a.balance -= cost
	a.debited += cost
	return cost
}

// releaseRG frees the reservation of rating group rg in s, if any.
func (a *account) releaseRG(s *session, rg uint32) {
	for i, r := range s.res {
		if r.rg == rg {
			a.reserved -= r.amount
			s.res = slices.Delete(s.res, i, i+1)
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
	cost := chf.Cost(want, l.Price, l.UnitSize)
	av := max(a.available(), 0)
	units := want
	if cost > av {
		units = chf.Covered(av, l.Price, l.UnitSize)
		if units == 0 {
			g.Result = chf.ResultQuotaLimitReached
			return
		}
		cost = chf.Cost(units, l.Price, l.UnitSize)
		g.FinalUnit = true
	} else if av-cost < cost {
		// This grant fits but another full one would not.
		g.FinalUnit = true
	}
	g.Granted = chf.UnitsOf(l.Service, units)
	if cost > 0 {
		s.res = append(s.res, reservation{rg: l.RatingGroup, amount: cost, units: units, expires: now + holdSeconds(l, lim)})
		a.reserved += cost
	}
}

// closeSession marks s closed, frees its reservations and bounds the number
// of closed sessions kept, evicting the oldest.
func (a *account) closeSession(s *session, now int64, lim *limits) {
	a.releaseAll(s)
	s.closed = true
	s.expires = now + lim.closedTTL
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
// resp.Lines is reused.
func (a *account) apply(req *chf.ApplyRequest, now int64, lim *limits, resp *chf.ChargeResponse) (write bool) {
	write = a.expire(now)
	resp.Result, resp.Detail, resp.Charged = chf.ResultSuccess, "", 0
	resp.Lines = resp.Lines[:0]
	defer func() {
		resp.Balance, resp.Reserved, resp.Currency, resp.Debited = a.balance, a.reserved, a.currency, a.debited
	}()
	if req.Op == opExpire {
		return write
	}
	if req.Op == chf.OpBalance {
		// An inquiry never writes: expired reservations are left out of
		// the answer and released by the next charging event or the sweep.
		return false
	}

	si := -1
	if req.Session != "" {
		si = a.find(req.Session)
	}
	if si >= 0 {
		s := &a.sessions[si]
		switch {
		case req.Seq == s.lastSeq:
			// A retry: answer what was answered, charge nothing.
			resp.Result = s.result
			resp.Lines = append(resp.Lines, s.lines...)
			resp.Detail = replayDetail(s.result)
			return write
		case req.Seq < s.lastSeq:
			resp.Result, resp.Detail = chf.ResultStaleSequence, "invocation sequence number older than the last one answered"
			return write
		}
	}

	var s *session
	switch req.Op {
	case chf.OpCreate, chf.OpEvent:
		if si >= 0 {
			resp.Result, resp.Detail = chf.ResultInvalid, "session already exists"
			return write
		}
		if req.Op == chf.OpCreate && a.openSessions() >= lim.maxSessions {
			resp.Result, resp.Detail = chf.ResultEndUserServiceDenied, "too many open sessions on the account"
			return write
		}
		if req.Op == chf.OpCreate || req.Session != "" {
			s = a.newSession(req.Session)
		}
	case chf.OpUpdate, chf.OpRelease:
		if si < 0 || a.sessions[si].closed {
			resp.Result, resp.Detail = chf.ResultSessionUnknown, "no such charging session"
			return write
		}
		s = &a.sessions[si]
	default:
		resp.Result, resp.Detail = chf.ResultInvalid, "unknown operation"
		return write
	}

	if req.Op == chf.OpEvent {
		a.applyEvent(req, resp)
	} else {
		a.applySession(req, s, now, lim, resp)
	}
	if s != nil {
		s.lastSeq = req.Seq
		s.result = resp.Result
		s.lines = append(s.lines[:0], resp.Lines...)
		if req.Op == chf.OpEvent || req.Op == chf.OpRelease || resp.Result != chf.ResultSuccess {
			a.closeSession(s, now, lim)
		} else {
			s.refresh(now, lim)
		}
	}
	return true
}

// applySession debits the usage and reserves the grants of a create,
// update or release.
func (a *account) applySession(req *chf.ApplyRequest, s *session, now int64, lim *limits, resp *chf.ChargeResponse) {
	requested, denied := 0, 0
	for i := range req.Lines {
		l := &req.Lines[i]
		g := chf.GrantLine{RatingGroup: l.RatingGroup, Result: l.Result, ValidityTime: l.ValidityTime, QuotaHoldingTime: l.QuotaHoldingTime}
		if l.Result == chf.ResultSuccess {
			a.releaseRG(s, l.RatingGroup)
			resp.Charged += a.debit(l.UsedCost)
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

// applyEvent debits one-time events: each line is charged in full or
// refused with QUOTA_LIMIT_REACHED.
func (a *account) applyEvent(req *chf.ApplyRequest, resp *chf.ChargeResponse) {
	charged, denied := 0, 0
	for i := range req.Lines {
		l := &req.Lines[i]
		g := chf.GrantLine{RatingGroup: l.RatingGroup, Result: l.Result}
		if l.Result == chf.ResultSuccess {
			if l.UsedCost > a.available() {
				g.Result = chf.ResultQuotaLimitReached
				denied++
			} else {
				resp.Charged += a.debit(l.UsedCost)
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
