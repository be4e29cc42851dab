package moneycheck

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/chf-testbed/testbed/loadgen/audit"
)

// The model is the checker's own account of what the CHF must do, written
// from the spec's rules and the decisions of issue 47 (IEC refused when
// not covered, PEC debited with overage, retransmissions answered with
// the first answer and charged once, grants shrunk to the available
// balance, maxGrant), with prices from the audit's independent rater
// (audit.Tariff). It shares no code with the OCP or the ABM.
//
// A state is one possible account. Because an answer may be lost (a
// process killed, a timeout) and requests may be in flight together, the
// checker keeps a set of candidate states: every operation is applied to
// every candidate in every order its concurrency allows, and only the
// candidates whose predicted answers equal the observed ones survive. An
// empty set is a mismatch.

// Services, as the balance inquiry names them.
const (
	svcData = iota
	svcVoice
	svcSMS
	nsvc
)

var svcNames = [nsvc]string{"data", "voice", "sms"}

func serviceIndex(name string) int {
	for i, n := range svcNames {
		if n == name {
			return i
		}
	}
	return -1
}

// maxRecent is how many create and event answers an account answers
// retransmissions from (abm/README.md, Retransmissions: the last 8).
const maxRecent = 8

// Result codes and causes as the Nchf front answers them.
const (
	resSuccess = "SUCCESS"
	resQuota   = "QUOTA_LIMIT_REACHED"

	causeQuota      = "QUOTA_LIMIT_REACHED"
	causeDenied     = "END_USER_REQUEST_DENIED"
	causeNoContext  = "RESOURCE_CONTEXT_NOT_FOUND"
	causeCharging   = "CHARGING_FAILED"
	statusOK        = 200
	statusCreated   = 201
	statusNoContent = 204
	statusBad       = 400
	statusForbidden = 403
	statusNotFound  = 404
)

type reservation struct {
	rg     uint32
	svc    int
	amount int64  // money held
	units  uint64 // units granted
	bunits uint64 // of which bucket units
}

type session struct {
	id            int    // the checker's local number
	ref           string // the ChargingDataRef the CHF answered
	closed        bool
	aborted       bool
	lastSeq       uint32
	lastKind      Kind
	lastDigest    string
	last          Answer // the answer a retransmission of the last request gets
	reservations  []reservation
	createdByOpID int
}

type recentAnswer struct {
	key    string
	kind   Kind
	digest string
	answer Answer
	sess   int // the session a create opened (-1 for an event)
}

// state is one candidate account.
type state struct {
	balance, reserved, debited, overage, offline, credited, limit int64
	barred                                                        bool
	buckets                                                       [nsvc]uint64
	sessions                                                      []session
	recent                                                        []recentAnswer
	topUps                                                        []int // the last maxRecent top-ups credited, by Op.ID (their Idempotency-Key)
}

func (s *state) clone() *state {
	c := *s
	c.sessions = make([]session, len(s.sessions))
	for i, ss := range s.sessions {
		ss.reservations = slices.Clone(ss.reservations)
		ss.last = ss.last.clone()
		c.sessions[i] = ss
	}
	c.topUps = slices.Clone(s.topUps)
	c.recent = make([]recentAnswer, len(s.recent))
	for i, r := range s.recent {
		r.answer = r.answer.clone()
		c.recent[i] = r
	}
	return &c
}

// key is a canonical text of the state, to drop duplicate candidates.
func (s *state) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%d/%d/%d/%d/%d/%v/%v|", s.balance, s.reserved, s.debited, s.overage, s.offline, s.credited, s.limit, s.barred, s.buckets)
	for _, ss := range s.sessions {
		fmt.Fprintf(&b, "s%d:%s:%v:%v:%d:%d:%s:%s:%v;", ss.id, ss.ref, ss.closed, ss.aborted, ss.lastSeq, ss.lastKind, ss.lastDigest, ss.last.String(), ss.reservations)
	}
	for _, r := range s.recent {
		fmt.Fprintf(&b, "r%s:%d:%s:%s:%d;", r.key, r.kind, r.digest, r.answer.String(), r.sess)
	}
	fmt.Fprintf(&b, "t%v", s.topUps)
	return b.String()
}

// available is what grants and debits may use: the balance not held by
// reservations plus a postpaid account's credit limit.
func (s *state) available() int64 { return s.balance + s.limit - s.reserved }

func (s *state) session(id int) *session {
	for i := range s.sessions {
		if s.sessions[i].id == id {
			return &s.sessions[i]
		}
	}
	return nil
}

func (s *state) openSessions() int {
	n := 0
	for i := range s.sessions {
		if !s.sessions[i].closed {
			n++
		}
	}
	return n
}

// bucketAvail is the units of svc the buckets hold beyond what
// reservations hold of them.
func (s *state) bucketAvail(svc int) uint64 {
	held := s.bucketHeld(svc)
	if held >= s.buckets[svc] {
		return 0
	}
	return s.buckets[svc] - held
}

func (s *state) bucketHeld(svc int) uint64 {
	var held uint64
	for i := range s.sessions {
		for _, r := range s.sessions[i].reservations {
			if r.svc == svc {
				held += r.bunits
			}
		}
	}
	return held
}

// debit takes cost from the available money as far as it goes; the rest
// is overage. It returns what it took.
func (s *state) debit(cost int64) int64 {
	if cost <= 0 {
		return 0
	}
	took := min(cost, max(s.available(), 0))
	s.balance -= took
	s.debited += took
	s.overage = satAdd(s.overage, cost-took)
	return took
}

func (s *state) release(ss *session, rg uint32) {
	for i, r := range ss.reservations {
		if r.rg == rg {
			s.reserved -= r.amount
			ss.reservations = slices.Delete(ss.reservations, i, i+1)
			return
		}
	}
}

func (s *state) releaseAll(ss *session) {
	for _, r := range ss.reservations {
		s.reserved -= r.amount
	}
	ss.reservations = nil
}

func (s *state) holds(ss *session, rg uint32) bool {
	for _, r := range ss.reservations {
		if r.rg == rg {
			return true
		}
	}
	return false
}

// view is the balance inquiry the state predicts.
func (s *state) view() AccountView {
	v := AccountView{Balance: s.balance, Reserved: s.reserved, Available: s.balance - s.reserved, Debited: s.debited,
		Overage: s.overage, Offline: s.offline, Credited: s.credited, CreditLimit: s.limit, Barred: s.barred}
	for i := range nsvc {
		if s.buckets[i] > 0 {
			v.Buckets[i] = BucketView{Units: s.buckets[i], Held: min(s.buckets[i], s.bucketHeld(i))}
		}
	}
	return v
}

// Model applies operations to states. It is immutable and safe for
// concurrent use.
type Model struct {
	tariff *audit.Tariff
}

// NewModel returns a model rating on t.
func NewModel(t *audit.Tariff) *Model { return &Model{tariff: t} }

// covered is the base units amount minor units pay for: floor(amount ×
// unit / price).
func covered(amount int64, r audit.Rating) uint64 {
	if r.Price <= 0 {
		return math.MaxUint64
	}
	if amount <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(amount), r.Unit)
	if hi >= uint64(r.Price) {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, uint64(r.Price))
	return q
}

// grantUnits is what a request for requested units is granted before the
// balance is looked at: the default grant for 0, capped by maxGrant.
func grantUnits(requested uint64, r audit.Rating) uint64 {
	if requested == 0 {
		return r.DefaultGrant
	}
	if r.MaxGrant != 0 && requested > r.MaxGrant {
		return r.MaxGrant
	}
	return requested
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

func satAddU(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// identity is a create's or event's identity as the checker sends it:
// the same invocationSequenceNumber and timestamp (the rest of the
// identity, consumer and subscriber, is the account's).
func identity(op *Op) string {
	return strconv.FormatUint(uint64(op.Seq), 10) + "@" + strconv.FormatInt(op.Stamp, 10)
}

// digest is the content of a request that a retransmission must repeat.
func digest(op *Op) string {
	var b strings.Builder
	b.WriteString(op.Kind.String())
	b.WriteString(op.EventType)
	for _, l := range op.Lines {
		fmt.Fprintf(&b, "|%d,%v,%d,%d,%v,%v", l.RG, l.Request, l.Requested, l.Used, l.Offline, l.Final)
	}
	return b.String()
}

// apply applies op to s (changing it) and returns the answer the CHF must
// give. obs is the answer observed, from which a new session takes the
// reference the CHF chose.
func (m *Model) apply(s *state, op *Op, obs *Answer) Answer {
	switch op.Kind {
	case KindBalance:
		v := s.view()
		return Answer{Status: statusOK, Account: &v}
	case KindTopUp:
		if slices.Contains(s.topUps, op.ID) {
			// The same Idempotency-Key again: the balance as it
			// stands, nothing credited.
			v := s.view()
			return Answer{Status: statusOK, Account: &v}
		}
		if _, ok := addChecked(s.balance, op.Amount); !ok {
			return Answer{Status: statusBad}
		}
		if _, ok := addChecked(s.credited, op.Amount); !ok {
			return Answer{Status: statusBad}
		}
		s.balance += op.Amount
		s.credited += op.Amount
		if len(s.topUps) >= maxRecent {
			s.topUps = slices.Delete(s.topUps, 0, 1)
		}
		s.topUps = append(s.topUps, op.ID)
		if op.Bucket != nil {
			k := serviceIndex(op.Bucket.Service)
			s.buckets[k] = satAddU(s.buckets[k], op.Bucket.Units)
		}
		v := s.view()
		return Answer{Status: statusOK, Account: &v}
	case KindAbort:
		s.barred = true
		n := 0
		for i := range s.sessions {
			if !s.sessions[i].closed {
				s.sessions[i].aborted = true
				n++
			}
		}
		return Answer{Status: statusOK, Sessions: n, HasSessions: true}
	case KindUnbar:
		s.barred = false
		v := s.view()
		return Answer{Status: statusOK, Account: &v}
	case KindCreate, KindEvent:
		return m.applyCreate(s, op, obs)
	case KindUpdate, KindRelease:
		return m.applySession(s, op)
	}
	panic("BUG: moneycheck: unknown operation kind " + op.Kind.String())
}

func addChecked(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

func (m *Model) applyCreate(s *state, op *Op, obs *Answer) Answer {
	key, dig := identity(op), digest(op)
	for _, r := range s.recent {
		if r.key == key && r.kind == op.Kind {
			if r.digest != dig {
				return Answer{Status: statusBad, Cause: causeCharging, HasCharged: true}
			}
			return r.answer.clone()
		}
	}
	if s.barred && !(op.Kind == KindEvent && afterDelivery(op)) {
		// An operator's abort bars new sessions and events charged before
		// delivery; usage already delivered (PEC) is still charged.
		return Answer{Status: statusForbidden, Cause: causeDenied, HasCharged: true}
	}
	var ans Answer
	sessID := -1
	if op.Kind == KindEvent {
		ans = m.event(s, op)
	} else {
		s.sessions = append(s.sessions, session{id: op.Sess, lastSeq: op.Seq, lastKind: op.Kind, lastDigest: dig})
		ss := &s.sessions[len(s.sessions)-1]
		ans = m.charge(s, ss, op)
		requested, denied := 0, 0
		for i, l := range op.Lines {
			if l.Request && !l.Final && !l.Offline {
				requested++
				if ans.Lines[i].Result != resSuccess {
					denied++
				}
			}
		}
		if requested > 0 && denied == requested {
			ans = Answer{Status: statusForbidden, Cause: causeQuota, HasCharged: true, Charged: ans.Charged}
			s.releaseAll(ss)
			ss.closed = true
		} else {
			ans.Status = statusCreated
			if obs != nil {
				ss.ref = obs.Ref
			}
			ans.Ref = ss.ref
		}
		ss.last = ans.clone()
		sessID = ss.id
	}
	if len(s.recent) >= maxRecent {
		s.recent = slices.Delete(s.recent, 0, 1)
	}
	s.recent = append(s.recent, recentAnswer{key: key, kind: op.Kind, digest: dig, answer: ans.clone(), sess: sessID})
	return ans
}

// linePEC reports whether an event's line is charged after delivery: an
// explicit oneTimeEventType wins; without one, a line reporting used
// units is PEC and one only requesting units is IEC.
func linePEC(op *Op, l *Line) bool {
	switch op.EventType {
	case "PEC":
		return true
	case "IEC":
		return false
	}
	return l.Used > 0
}

// afterDelivery reports whether every line of the event op is PEC.
func afterDelivery(op *Op) bool {
	for i := range op.Lines {
		if !linePEC(op, &op.Lines[i]) {
			return false
		}
	}
	return true
}

// event charges a one-time event: IEC (units requested, nothing used yet)
// is debited in full or refused; PEC (units used, or oneTimeEventType
// PEC) is debited as far as the money goes and the rest is overage.
func (m *Model) event(s *state, op *Op) Answer {
	ans := Answer{HasCharged: true}
	charged, denied := 0, 0
	for _, l := range op.Lines {
		r, ok := m.tariff.Rating(l.RG)
		if !ok {
			panic(fmt.Sprintf("BUG: moneycheck: rating group %d not in the tariff", l.RG))
		}
		svc := serviceIndex(r.Service)
		pec := linePEC(op, &l)
		n := l.Used
		switch {
		case n == 0 && pec && l.Requested != 0:
			n = l.Requested // delivered already: charged in full, not capped by maxGrant
		case n == 0:
			n = grantUnits(l.Requested, r)
		}
		b := min(n, s.bucketAvail(svc))
		cost := r.Cost(n - b)
		if !pec && cost > s.available() {
			ans.Lines = append(ans.Lines, LineAnswer{RG: l.RG, Result: resQuota})
			denied++
			continue
		}
		s.buckets[svc] -= b
		ans.Charged += s.debit(cost)
		ans.Lines = append(ans.Lines, LineAnswer{RG: l.RG, Result: resSuccess, Units: n})
		charged++
	}
	if denied > 0 && charged == 0 {
		return Answer{Status: statusForbidden, Cause: causeQuota, HasCharged: true, Charged: ans.Charged}
	}
	ans.Status = statusCreated
	return ans
}

// charge debits op's usage on session ss and reserves its grants; it
// fills the answer's lines and Charged.
func (m *Model) charge(s *state, ss *session, op *Op) Answer {
	ans := Answer{HasCharged: true}
	for _, l := range op.Lines {
		r, ok := m.tariff.Rating(l.RG)
		if !ok {
			panic(fmt.Sprintf("BUG: moneycheck: rating group %d not in the tariff", l.RG))
		}
		svc := serviceIndex(r.Service)
		la := LineAnswer{RG: l.RG, Result: resSuccess}
		// Usage reported as offline on a rating group the session holds
		// an online grant for is charged by the grant's method (issue 47,
		// decision 2); offline usage without a grant stays offline.
		if l.Offline && !s.holds(ss, l.RG) {
			s.offline = satAdd(s.offline, r.Cost(l.Used))
			ans.Lines = append(ans.Lines, la)
			continue
		}
		s.release(ss, l.RG)
		b := min(l.Used, s.bucketAvail(svc))
		s.buckets[svc] -= b
		ans.Charged += s.debit(r.Cost(l.Used - b))
		if l.Request && !l.Final && !l.Offline && op.Kind != KindRelease {
			la = m.grant(s, ss, l.RG, r, grantUnits(l.Requested, r))
		}
		ans.Lines = append(ans.Lines, la)
	}
	return ans
}

// grant reserves want units of rating group rg on ss: bucket units of the
// service first, money for the rest, shrunk to what the available money
// covers; final when what is left could not cover another full grant.
func (m *Model) grant(s *state, ss *session, rg uint32, r audit.Rating, want uint64) LineAnswer {
	svc := serviceIndex(r.Service)
	bav := s.bucketAvail(svc)
	bu := min(want, bav)
	mu := want - bu
	cost := r.Cost(mu)
	av := max(s.available(), 0)
	final := false
	if cost > av {
		mu = covered(av, r)
		if mu == 0 && bu == 0 {
			return LineAnswer{RG: rg, Result: resQuota}
		}
		cost = r.Cost(mu)
		final = true
	} else if satAddU(bav-bu, covered(av-cost, r)) < want {
		final = true
	}
	if cost > 0 || bu > 0 {
		ss.reservations = append(ss.reservations, reservation{rg: rg, svc: svc, amount: cost, units: bu + mu, bunits: bu})
		s.reserved += cost
	}
	return LineAnswer{RG: rg, Result: resSuccess, Units: bu + mu, Final: final}
}

func (m *Model) applySession(s *state, op *Op) Answer {
	ss := s.session(op.Sess)
	if ss == nil || ss.ref == "" {
		return Answer{Status: statusNotFound, Cause: causeNoContext}
	}
	dig := digest(op)
	same := ss.lastKind == op.Kind && ss.lastDigest == dig
	switch {
	case ss.closed && (op.Seq != ss.lastSeq || !same):
		return Answer{Status: statusNotFound, Cause: causeNoContext, HasCharged: true}
	case op.Seq == ss.lastSeq && ss.lastKind != op.Kind:
		return Answer{Status: statusBad, Cause: causeCharging, HasCharged: true}
	case op.Seq == ss.lastSeq && !same:
		return Answer{Status: statusBad, Cause: causeCharging, HasCharged: true}
	case op.Seq == ss.lastSeq:
		return ss.last.clone()
	case op.Seq < ss.lastSeq:
		return Answer{Status: statusBad, Cause: causeCharging, HasCharged: true}
	}
	if op.Kind == KindUpdate && ss.aborted {
		return Answer{Status: statusForbidden, Cause: causeDenied, HasCharged: true}
	}
	ans := m.charge(s, ss, op)
	if op.Kind == KindRelease {
		s.releaseAll(ss)
		ss.closed = true
		ans = Answer{Status: statusNoContent, HasCharged: true, Charged: ans.Charged}
	} else {
		ans.Status = statusOK
	}
	ss.lastSeq, ss.lastKind, ss.lastDigest = op.Seq, op.Kind, dig
	ss.last = ans.clone()
	return ans
}
