package audit

import (
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
)

// Change is a tariff change during a run (`loadgen local
// --tariff-change`): the OCP reloads its tariff file some time after the
// file is replaced (at most a second, ocp/README.md), and rates every
// request it rates after that on the new tariff, whole, including usage
// consumed before (no time-of-use split). So the audit rates a request
// sent before At-Before on Old, one sent after At+After on New, and
// accepts either for one sent between (in flight while the OCP
// reloaded); anything else is a mismatch as without a change. Mark sets
// At; until then every request is rated on Old. Safe for concurrent use.
type Change struct {
	Old, New      *Tariff
	Before, After time.Duration
	at            atomic.Int64 // unix ns; 0 = not yet
}

// Mark records that the tariff file is being replaced now (t).
func (c *Change) Mark(t time.Time) { c.at.Store(t.UnixNano()) }

// At returns when Mark was called (zero: not yet).
func (c *Change) At() time.Time {
	if at := c.at.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// Rate rates ch on the tariff in force now: Old until Mark, then New.
func (c *Change) Rate(ch *driver.Charge) int64 {
	if c.at.Load() == 0 {
		return c.Old.Rate(ch)
	}
	return c.New.Rate(ch)
}

// RateAt returns the charge expected for ch sent at sent and, when sent
// falls in the change's window and the two tariffs rate it differently
// (ambiguous), the other acceptable charge (Old's). It implements the
// load engine's TimedRater. Allocation-free.
func (c *Change) RateAt(ch *driver.Charge, sent time.Time) (want, alt int64, ambiguous bool) {
	at := c.at.Load()
	s := sent.UnixNano()
	if at == 0 || s < at-int64(c.Before) {
		return c.Old.Rate(ch), 0, false
	}
	n := c.New.Rate(ch)
	if s > at+int64(c.After) {
		return n, 0, false
	}
	o := c.Old.Rate(ch)
	return n, o, o != n
}
