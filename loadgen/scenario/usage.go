package scenario

import "time"

// Threshold-driven updates. By default a session sends its next request
// ThinkTime after the previous one was due, reporting Used. With
// update_on: threshold the CHF's grant decides instead, as it would for
// a real SMF: the session consumes Rate units per second of the grant
// and sends its next update (and at last its release) when the grant's
// remaining quota reaches its QUOTA_THRESHOLD, when the grant's
// VALIDITY_TIME ends, or when the grant is used up, whichever comes
// first, reporting what it consumed until then. A grant without any
// (or no grant) falls back to ThinkTime and Used.
//
//	data: {update_on: threshold, rate: {total_volume: 1048576}}   # 1 MiB/s
//	voice: {update_on: threshold, rate: {time: 1}}                # a call
const (
	UpdateOnThinkTime = "think_time"
	UpdateOnThreshold = "threshold"
)

// ThresholdDriven reports whether the session's updates follow its
// grants.
func (s *Session) ThresholdDriven() bool { return s.UpdateOn == UpdateOnThreshold }

// MaxGrantInterval bounds the time a threshold-driven session waits for
// its next request.
const MaxGrantInterval = time.Hour

// GrantInterval returns when, after a request was due, the next one is
// due for a grant of granted base units with the remaining-quota
// threshold (0 none) and validity (seconds, 0 none), and the units used
// by then; ok is false when the grant decides nothing (no grant, no rate
// in its unit): ThinkTime and Used apply.
func (s *Session) GrantInterval(granted, threshold uint64, validity uint32) (time.Duration, uint64, bool) {
	rate := s.Rate.TotalVolume
	if s.Requested.TotalVolume == 0 {
		rate = uint64(s.Rate.Time)
	}
	if rate == 0 || granted == 0 {
		return 0, 0, false
	}
	use := granted // exhausted
	if threshold > 0 && threshold < granted {
		use = granted - threshold
	}
	secs := float64(use) / float64(rate)
	if v := float64(validity); v > 0 && v < secs {
		secs = v
		use = min(granted, uint64(float64(rate)*secs))
	}
	if secs > MaxGrantInterval.Seconds() {
		secs = MaxGrantInterval.Seconds()
		use = min(granted, uint64(float64(rate)*secs))
	}
	d := time.Duration(secs * float64(time.Second))
	return max(d, time.Millisecond), use, true
}

func (s *Session) validateUsage(field string, bad func(field, format string, a ...any) error) error {
	switch s.UpdateOn {
	case "", UpdateOnThinkTime:
		if !s.Rate.IsZero() {
			return bad(field+".rate", "only with update_on: threshold")
		}
		return nil
	case UpdateOnThreshold:
	default:
		return bad(field+".update_on", "want think_time or threshold, got %q", s.UpdateOn)
	}
	switch {
	case s.Requested.TotalVolume != 0 && s.Rate.TotalVolume == 0:
		return bad(field+".rate.total_volume", "a threshold-driven session requesting volume needs a rate in octets per second")
	case s.Requested.TotalVolume == 0 && s.Requested.Time != 0 && s.Rate.Time == 0:
		return bad(field+".rate.time", "a threshold-driven session requesting time needs a rate in seconds per second")
	case s.Requested.TotalVolume == 0 && s.Requested.Time == 0:
		return bad(field+".requested", "a threshold-driven session requests total_volume or time")
	}
	return nil
}
