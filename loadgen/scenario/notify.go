package scenario

import "math"

// Notifications asks the run to make the CHF notify a share of its
// sessions through the operator API (POST /chf/v1/accounts/{supi}/
// reauthorize or /abort), as an operator action or a tariff change
// would: the loadgen answers each notification as an SMF (an update for
// REAUTHORIZATION, a release for ABORT_CHARGING; on Gy after a RAR or
// ASR) and reports them. Each session picks at its create, with these
// probabilities, whether it is re-authorised, aborted or neither; the
// call is made At of the think time after the create was due.
type Notifications struct {
	// Reauthorize is the share (0..1) of sessions re-authorised.
	Reauthorize float64 `yaml:"reauthorize,omitempty" json:"reauthorize,omitempty"`
	// Abort is the share (0..1) of sessions aborted.
	Abort float64 `yaml:"abort,omitempty" json:"abort,omitempty"`
	// At is when the call is made, as a fraction (0..1) of the session's
	// think time after its create was due; 0 = 0.5.
	At float64 `yaml:"at,omitempty" json:"at,omitempty"`
}

// Enabled reports whether any notification is triggered.
func (n *Notifications) Enabled() bool { return n.Reauthorize > 0 || n.Abort > 0 }

// AtOrDefault returns At, or its default.
func (n *Notifications) AtOrDefault() float64 {
	if n.At == 0 {
		return 0.5
	}
	return n.At
}

func share(v float64) bool { return v >= 0 && v <= 1 && !math.IsNaN(v) }

func (n *Notifications) validate(bad func(field, format string, a ...any) error) error {
	switch {
	case !share(n.Reauthorize):
		return bad("notifications.reauthorize", "must be a share 0..1, got %v", n.Reauthorize)
	case !share(n.Abort):
		return bad("notifications.abort", "must be a share 0..1, got %v", n.Abort)
	case n.Reauthorize+n.Abort > 1:
		return bad("notifications", "reauthorize + abort must be at most 1, got %v", n.Reauthorize+n.Abort)
	case !share(n.At):
		return bad("notifications.at", "must be a fraction 0..1 of the think time, got %v", n.At)
	}
	return nil
}
