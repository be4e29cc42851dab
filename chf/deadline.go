package chf

import (
	"context"
	"time"
)

// Deadline is a context.Context that carries a deadline over a parent
// without a timer or a goroutine: Deadline and Err report it, Done is the
// parent's (it does not close when the deadline passes). It is what the
// fronts hand the charging core for a caller's remaining time: the core's
// hops read the deadline (chassis calls and database timeouts are bounded
// by it), so nothing needs Done to fire. Embed one in per-request state
// and Reset it per request: passing &d as a context allocates nothing.
// Not safe for concurrent Reset; safe for concurrent reads between Resets.
type Deadline struct {
	parent context.Context
	at     time.Time
}

// Reset makes d the parent's context with deadline at (the parent's own
// deadline when that is earlier).
func (d *Deadline) Reset(parent context.Context, at time.Time) {
	if pd, ok := parent.Deadline(); ok && pd.Before(at) {
		at = pd
	}
	d.parent, d.at = parent, at
}

// Deadline implements context.Context.
func (d *Deadline) Deadline() (time.Time, bool) { return d.at, true }

// Done implements context.Context: the parent's Done.
func (d *Deadline) Done() <-chan struct{} { return d.parent.Done() }

// Err implements context.Context: the parent's error, else
// context.DeadlineExceeded once the deadline has passed.
func (d *Deadline) Err() error {
	if err := d.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(d.at) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context (the parent's values, so trace context
// passes through).
func (d *Deadline) Value(key any) any { return d.parent.Value(key) }
