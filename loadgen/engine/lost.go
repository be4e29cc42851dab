package engine

import (
	"math"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// UsageLost is the usage a run could not deliver to the CHF: the charging
// requests carrying usage (an update's or release's used units, an
// event's units) that no attempt delivered, retries included. A create
// carries none (its session's usage goes with its later requests) and is
// never counted here; a create given up stays in Stats.Unresolved when in
// doubt. Every unit the run reports is either charged, refused by the
// CHF (an error class), or counted here.
type UsageLost struct {
	// Requests is Refused + InDoubt + Abandoned.
	Requests int64 `json:"requests"`
	// Refused: every attempt was shed (Nchf 503), the retries allowed
	// or the run's bounds exhausted; known not charged.
	Refused int64 `json:"refused"`
	// InDoubt: an attempt got no definitive answer (timeout, lost
	// connection, 5xx, Gy 3004) and no later one resolved it: charged
	// or not, the run cannot tell (also in Stats.Unresolved).
	InDoubt int64 `json:"in_doubt"`
	// Abandoned: in flight, waiting for a retry, or not yet sent when
	// the run ended (interrupted, or its drain bound reached).
	Abandoned int64 `json:"abandoned"`
	// The units they reported, summed (saturating).
	TotalVolume          uint64 `json:"total_volume"`
	Time                 uint64 `json:"time"`
	ServiceSpecificUnits uint64 `json:"service_specific_units"`
	// ExpectedMinorUnits is what Config.Rater rates them at; Rated is
	// set when the run had a Rater (without one it is 0).
	ExpectedMinorUnits int64 `json:"expected_minor_units"`
	Rated              bool  `json:"rated"`
}

// Add adds o into l (shards, workers).
func (l *UsageLost) Add(o UsageLost) {
	l.Requests += o.Requests
	l.Refused += o.Refused
	l.InDoubt += o.InDoubt
	l.Abandoned += o.Abandoned
	l.TotalVolume = satAdd(l.TotalVolume, o.TotalVolume)
	l.Time = satAdd(l.Time, o.Time)
	l.ServiceSpecificUnits = satAdd(l.ServiceSpecificUnits, o.ServiceSpecificUnits)
	l.ExpectedMinorUnits = satAddInt(l.ExpectedMinorUnits, o.ExpectedMinorUnits)
	l.Rated = l.Rated || o.Rated
}

// Why a request's usage was lost.
const (
	lostRefused = iota
	lostInDoubt
	lostAbandoned
)

// carriesUsage reports whether c reports usage: an event's units, or an
// update's or release's used units.
func carriesUsage(c *driver.Charge) bool {
	return c.Op == driver.ChargeEvent || c.Op != driver.ChargeBalance && !c.Used.IsZero()
}

// lose counts r's usage as lost (when it carries any); sent is when it
// was sent (ns since start), for a TimedRater.
func (w *worker) lose(r *request, why int, sent int64) {
	c := &r.charge
	if !carriesUsage(c) {
		return
	}
	l := &w.lost
	l.Requests++
	switch why {
	case lostRefused:
		l.Refused++
	case lostInDoubt:
		l.InDoubt++
	default:
		l.Abandoned++
	}
	u := c.Used
	if c.Op == driver.ChargeEvent {
		u = c.Requested
	}
	l.addUnits(u)
	switch {
	case w.timed != nil:
		want, _, _ := w.timed.RateAt(c, w.start.Add(time.Duration(sent)))
		l.ExpectedMinorUnits, l.Rated = satAddInt(l.ExpectedMinorUnits, want), true
	case w.cfg.Rater != nil:
		l.ExpectedMinorUnits, l.Rated = satAddInt(l.ExpectedMinorUnits, w.cfg.Rater.Rate(c)), true
	}
}

// losePending counts as abandoned the usage of the request f waits to
// send (in the heap or the backlog, f.r nil or not yet filled), built
// as it would have been sent at now.
func (w *worker) losePending(f *flow, now int64) {
	saved := f.r
	var r request
	r.supi = w.lostSUPI[:0]
	r.f, f.r = f, &r
	w.fillCharge(f)
	w.lostSUPI = r.supi
	w.lose(&r, lostAbandoned, now)
	f.r = saved
}

func (l *UsageLost) addUnits(u chf.Units) {
	l.TotalVolume = satAdd(l.TotalVolume, u.TotalVolume)
	l.Time = satAdd(l.Time, uint64(u.Time))
	l.ServiceSpecificUnits = satAdd(l.ServiceSpecificUnits, u.ServiceSpecific)
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func satAddInt(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
