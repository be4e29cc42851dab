// Package scenario describes a charging load: the traffic mix (data and
// voice sessions, SMS events, balance inquiries), per-flow shapes, the
// subscriber range, the offered load and the run phases. Load reads YAML,
// starting from Default, and validates it; errors name the offending field.
//
// A flow is one unit of work started by the scheduler: a data or voice
// session (create, N updates, release), an SMS event (one create with
// oneTimeEvent) or a balance inquiry (one GET). Mix shares are shares of
// flow starts.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/loadgen/scenarios"
)

// ErrInvalid wraps every validation error.
var ErrInvalid = errors.New("scenario: invalid")

// Kind names a flow type.
type Kind int

// Flow kinds, in the order of Mix.
const (
	KindData Kind = iota
	KindVoice
	KindSMS
	KindBalance
	NumKinds
)

var kindNames = [NumKinds]string{"data", "voice", "sms", "balance"}

func (k Kind) String() string { return kindNames[k] }

// Duration is a time.Duration that reads "1s", "250ms" from YAML.
type Duration time.Duration

// UnmarshalYAML accepts Go duration strings.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("cannot parse duration %q: %w", n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalText writes the Go duration string (JSON reports).
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("cannot parse duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Units are the amounts of one request (or one report of usage).
type Units struct {
	TotalVolume          uint64 `yaml:"total_volume,omitempty" json:"total_volume,omitempty"`                     // octets
	Time                 uint32 `yaml:"time,omitempty" json:"time,omitempty"`                                     // seconds
	ServiceSpecificUnits uint64 `yaml:"service_specific_units,omitempty" json:"service_specific_units,omitempty"` // events
}

// IsZero reports whether no unit is set.
func (u Units) IsZero() bool { return u == Units{} }

// Session is the shape of a data or voice session.
type Session struct {
	RatingGroup uint32   `yaml:"rating_group" json:"rating_group"`
	Updates     int      `yaml:"updates" json:"updates"`
	Requested   Units    `yaml:"requested" json:"requested"` // asked for at create and each update
	Used        Units    `yaml:"used" json:"used"`           // reported at each update and at release
	ThinkTime   Duration `yaml:"think_time" json:"think_time"`
	// UpdateOn and Rate make the session's updates threshold-driven
	// (usage.go).
	UpdateOn string `yaml:"update_on,omitempty" json:"update_on,omitempty"`
	Rate     Units  `yaml:"rate,omitempty" json:"rate,omitzero"`
	// Length, when set, draws each session's length from a distribution
	// (Updates is then ignored): an update every ThinkTime while the session
	// lasts, then the release at its length.
	Length *Length `yaml:"length,omitempty" json:"length,omitempty"`
}

// Length is a distribution of session lengths: uniform in [Min, Max], or
// exponential (Min plus an exponential of mean Mean-Min, cut at Max).
type Length struct {
	Dist string   `yaml:"dist" json:"dist"` // uniform (default) or exponential
	Min  Duration `yaml:"min" json:"min"`
	Max  Duration `yaml:"max" json:"max"`
	Mean Duration `yaml:"mean,omitempty" json:"mean,omitempty"` // exponential only
}

// Quantile returns the length at probability u in [0, 1).
func (l *Length) Quantile(u float64) time.Duration {
	lo, hi := float64(l.Min), float64(l.Max)
	if l.Dist == "exponential" {
		v := lo - (float64(l.Mean)-lo)*math.Log1p(-u)
		return time.Duration(min(v, hi))
	}
	return time.Duration(lo + u*(hi-lo))
}

// lengthGrid is the number of quantiles the means are computed over.
const lengthGrid = 4096

// MeanLength returns the mean session length.
func (s *Session) MeanLength() time.Duration {
	if s.Length == nil {
		return time.Duration(s.Updates+1) * s.ThinkTime.D()
	}
	var sum float64
	for i := range lengthGrid {
		sum += float64(s.Length.Quantile((float64(i) + 0.5) / lengthGrid))
	}
	return time.Duration(sum / lengthGrid)
}

// UpdatesFor returns the number of updates of a session of length l: one
// at every multiple of the think time before l.
func (s *Session) UpdatesFor(l time.Duration) int {
	t := s.ThinkTime.D()
	if t <= 0 || l <= 0 {
		return 0
	}
	return int((l - 1) / t)
}

// MeanUpdates returns the mean number of updates of a session.
func (s *Session) MeanUpdates() float64 {
	if s.Length == nil {
		return float64(s.Updates)
	}
	var sum float64
	for i := range lengthGrid {
		sum += float64(s.UpdatesFor(s.Length.Quantile((float64(i) + 0.5) / lengthGrid)))
	}
	return sum / lengthGrid
}

// Event is the shape of an SMS (immediate event charging).
type Event struct {
	RatingGroup uint32 `yaml:"rating_group" json:"rating_group"`
	Units       Units  `yaml:"units" json:"units"`
}

// Mix holds the shares of flow starts per kind; they need not sum to 1
// (they are normalised) but at least one must be positive.
type Mix struct {
	Data    float64 `yaml:"data" json:"data"`
	Voice   float64 `yaml:"voice" json:"voice"`
	SMS     float64 `yaml:"sms" json:"sms"`
	Balance float64 `yaml:"balance" json:"balance"`
}

// Subscribers is the range of SUPIs flows pick from.
type Subscribers struct {
	First string `yaml:"first" json:"first"` // e.g. imsi-001010000000001
	Count int    `yaml:"count" json:"count"`
	// Popularity is how flows pick a subscriber: uniform (default), or
	// zipf: the subscriber of popularity rank r (1-based) is picked with
	// probability proportional to 1/r^ZipfS; ranks are scattered over the
	// range (see Picker).
	Popularity string  `yaml:"popularity,omitempty" json:"popularity,omitempty"`
	ZipfS      float64 `yaml:"zipf_s,omitempty" json:"zipf_s,omitempty"`
}

// Load is the offered load: exactly one of TPS and SessionsPerSecond.
type Load struct {
	// TPS is transactions per second (each create, update, release, event
	// and inquiry is one).
	TPS float64 `yaml:"tps,omitempty" json:"tps,omitempty"`
	// SessionsPerSecond is flow starts per second.
	SessionsPerSecond float64 `yaml:"sessions_per_second,omitempty" json:"sessions_per_second,omitempty"`
}

// Phases is the time line of a run: ramp-up (rate grows linearly from 0),
// then warm-up at full rate, then the measured duration. Ramp-up and
// warm-up are excluded from results. Live sessions are then released.
type Phases struct {
	RampUp   Duration `yaml:"ramp_up" json:"ramp_up"`
	WarmUp   Duration `yaml:"warm_up" json:"warm_up"`
	Duration Duration `yaml:"duration" json:"duration"`
	// SteadyStart opens, during the ramp-up, the sessions a run at full
	// rate has open (PrefillSessions), each left with the remaining
	// length of a session in progress, so that the measured window sees
	// the open sessions and the update rate of the steady state without
	// waiting for the longest session's length. Needs a ramp-up.
	SteadyStart bool `yaml:"steady_start,omitempty" json:"steady_start,omitempty"`
}

// Scenario is a whole load description.
type Scenario struct {
	Name        string      `yaml:"name" json:"name"`
	Mix         Mix         `yaml:"mix" json:"mix"`
	Data        Session     `yaml:"data" json:"data"`
	Voice       Session     `yaml:"voice" json:"voice"`
	SMS         Event       `yaml:"sms" json:"sms"`
	Subscribers Subscribers `yaml:"subscribers" json:"subscribers"`
	Load        Load        `yaml:"load" json:"load"`
	Phases      Phases      `yaml:"phases" json:"phases"`
	// Thresholds are pass/fail criteria on the result, k6-style
	// ("p99<10ms", "errors<0.1%", "tps>=0.99*offered", "late<1%"); see
	// ParseThreshold. A run that misses one fails (loadgen exits 6).
	Thresholds []string `yaml:"thresholds,omitempty" json:"thresholds,omitempty"`
	// Timeout is the per-request deadline; a request past it is an error of
	// class timeout.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// MaxInFlight bounds requests outstanding at once (all workers); a
	// new flow that cannot be sent within LateDrop of its time is dropped.
	MaxInFlight int `yaml:"max_in_flight" json:"max_in_flight"`
	// LateThreshold: a request sent later than this after its scheduled
	// time is counted late.
	LateThreshold Duration `yaml:"late_threshold" json:"late_threshold"`
	// LateDrop: a new flow whose first request could not leave within this
	// of its scheduled time is dropped and counted.
	LateDrop Duration `yaml:"late_drop" json:"late_drop"`
	Seed     int64    `yaml:"seed" json:"seed"`
	// Retransmit is the share (0..1) of creates, updates, releases and
	// events sent twice with the same identity (half of them with the
	// retransmission flag); with it set, a request that got no answer is
	// sent again, flagged.
	Retransmit float64 `yaml:"retransmit" json:"retransmit"`
	// RetryErrors is how many times, at most, a create, update, release or
	// event that was shed (Nchf 503, Gy 3004) or got no definitive answer
	// (a timeout, a lost connection, another 5xx, Gy's 5012 and the like)
	// is sent again with the same identity (an update or release with the
	// retransmission flag, a create or event exactly as first sent), as
	// an SMF does: a shed after the Retry-After it carried (at most 10 s),
	// otherwise the first retry RetryBackoff after the failure, each next
	// one after twice the previous wait (each wait drawn uniformly from
	// half to one and a half times it, so that what one fault failed is
	// not retried in one burst), while it can be answered within the
	// run's drain bound. The first answer that resolves it is the one the
	// ledger and the audit count; the first attempt's error stays in the
	// error counts. Usage no attempt delivered is counted lost
	// (engine.UsageLost). 0 = never.
	RetryErrors  int      `yaml:"retry_errors" json:"retry_errors"`
	RetryBackoff Duration `yaml:"retry_backoff" json:"retry_backoff"`
	// Notifications are the CHF-initiated notifications the run triggers
	// (see notify.go).
	Notifications Notifications `yaml:"notifications,omitempty" json:"notifications,omitzero"`
	// Accounts are the shares of postpaid and bucket accounts among the
	// subscribers, and of offline sessions (accounts.go).
	Accounts Accounts `yaml:"accounts,omitempty" json:"accounts,omitzero"`
	// MaxOpenSessions bounds the data and voice sessions the loadgen
	// holds open at once (all workers; each costs the loadgen about
	// engine.FlowBytes): a session that would exceed it is not
	// started, counted dropped (session_limit in the result).
	MaxOpenSessions int `yaml:"max_open_sessions" json:"max_open_sessions"`
}

// Default returns the built-in scenario, which mirrors the reference
// deployment's mix (see loadgen/docs/scenario.md).
func Default() Scenario {
	return Scenario{
		Name: "default",
		Mix:  Mix{Data: 0.40, Voice: 0.25, SMS: 0.20, Balance: 0.15},
		Data: Session{
			RatingGroup: 10, Updates: 2,
			Requested: Units{TotalVolume: 10 << 20},
			Used:      Units{TotalVolume: 5 << 20},
			ThinkTime: Duration(500 * time.Millisecond),
		},
		Voice: Session{
			RatingGroup: 20, Updates: 2,
			Requested: Units{Time: 60},
			Used:      Units{Time: 30},
			ThinkTime: Duration(500 * time.Millisecond),
		},
		SMS:         Event{RatingGroup: 30, Units: Units{ServiceSpecificUnits: 1}},
		Subscribers: Subscribers{First: "imsi-001010000000001", Count: 100000},
		Load:        Load{TPS: 1000},
		Phases: Phases{
			RampUp:   Duration(2 * time.Second),
			WarmUp:   Duration(3 * time.Second),
			Duration: Duration(30 * time.Second),
		},
		Timeout:         Duration(2 * time.Second),
		MaxInFlight:     4096,
		LateThreshold:   Duration(2 * time.Millisecond),
		LateDrop:        Duration(time.Second),
		Seed:            1,
		MaxOpenSessions: DefaultMaxOpenSessions,
		RetryErrors:     DefaultRetryErrors,
		RetryBackoff:    Duration(DefaultRetryBackoff),
	}
}

// The defaults of RetryErrors and RetryBackoff: retries about 0.25, 0.75,
// 1.75 and 3.75 s after the first failure (plus the attempts' own time;
// each wait ±50%), which outlast a store or instance restart of a couple
// of seconds.
const (
	DefaultRetryErrors  = 4
	DefaultRetryBackoff = 250 * time.Millisecond
	// MaxRetryErrors bounds RetryErrors (the backoff doubles each time).
	MaxRetryErrors = 8
)

// Open reads the scenario arg names: a built-in one (loadgen/scenarios,
// e.g. "busy-hour": a name without '.', '/' or '\\') or a YAML file.
func Open(arg string) (Scenario, error) {
	if b, ok := scenarios.Lookup(arg); ok {
		return Parse(b)
	}
	if !strings.ContainsAny(arg, "./\\") {
		if _, err := os.Stat(arg); err != nil {
			return Scenario{}, fmt.Errorf("cannot read scenario: no built-in scenario %q (built in: %s) and no such file", arg, strings.Join(scenarios.Names(), ", "))
		}
	}
	return LoadFile(arg)
}

// MaxFileBytes is the largest scenario file LoadFile reads.
const MaxFileBytes = 16 << 20

// LoadFile reads a YAML scenario file over Default and validates it. Unknown
// fields are errors.
func LoadFile(path string) (Scenario, error) {
	b, err := readfile.Read(path, MaxFileBytes)
	if err != nil {
		return Scenario{}, fmt.Errorf("cannot read scenario: %w", err)
	}
	return Parse(b)
}

// Parse reads YAML over Default and validates it.
func Parse(b []byte) (Scenario, error) {
	s := Default()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return Scenario{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := s.Validate(); err != nil {
		return Scenario{}, err
	}
	return s, nil
}

// FieldError is a validation error of one field; it wraps ErrInvalid.
// Field is the YAML path ("load.tps"), so that a command can name the
// flag that set it instead.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return ErrInvalid.Error() + ": " + e.Field + ": " + e.Msg }

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// maxSubscribers bounds a subscriber range.
const maxSubscribers = 100_000_000

// DefaultMaxOpenSessions is the default bound on open sessions;
// maxOpenSessions the largest accepted.
const (
	DefaultMaxOpenSessions = 2_000_000
	maxOpenSessions        = 20_000_000
	maxInFlight            = 1 << 20
)

// Validate checks every field, section by section; the error (a
// *FieldError) names the first offending one.
func (s *Scenario) Validate() error {
	for _, check := range []func() error{
		s.Mix.validate,
		func() error { return s.Data.validate("data", s.Mix.Data) },
		func() error { return s.Voice.validate("voice", s.Mix.Voice) },
		func() error { return s.SMS.validate("sms", s.Mix.SMS) },
		s.validateRetries,
		s.Subscribers.validate,
		s.validateLoad,
		func() error { return s.Phases.validate(s.steadyThinkTime()) },
		s.validateLimits,
		s.validateThresholds,
		func() error { return s.Notifications.validate(invalid) },
		func() error { return s.Accounts.validate(invalid) },
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// invalid is the *FieldError of field.
func invalid(field, format string, a ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// validate checks the shares: finite, not negative, one positive.
func (m Mix) validate() error {
	shares := []struct {
		f string
		v float64
	}{{"mix.data", m.Data}, {"mix.voice", m.Voice}, {"mix.sms", m.SMS}, {"mix.balance", m.Balance}}
	var sum float64
	for _, sh := range shares {
		if sh.v < 0 || !finite(sh.v) {
			return invalid(sh.f, "share must be a finite number >= 0, got %v", sh.v)
		}
		sum += sh.v
	}
	if sum <= 0 {
		return invalid("mix", "at least one share must be positive")
	}
	return nil
}

// validate checks the session section field when the mix uses it
// (share > 0).
func (ss *Session) validate(field string, share float64) error {
	if share == 0 {
		return nil
	}
	if ss.RatingGroup == 0 {
		return invalid(field+".rating_group", "must be set")
	}
	if ss.Updates < 0 || ss.Updates > 10000 {
		return invalid(field+".updates", "must be 0..10000, got %d", ss.Updates)
	}
	if ss.Requested.IsZero() {
		return invalid(field+".requested", "at least one unit must be set")
	}
	if ss.ThinkTime < 0 || ss.ThinkTime.D() > time.Hour {
		return invalid(field+".think_time", "must be 0..1h, got %s", ss.ThinkTime.D())
	}
	if err := ss.validateUsage(field, invalid); err != nil {
		return err
	}
	if ss.Length != nil {
		return ss.Length.validate(field, ss.ThinkTime)
	}
	return nil
}

// validate checks the length of the sessions of section field, whose
// think time is think.
func (l *Length) validate(field string, think Duration) error {
	switch {
	case l.Dist != "" && l.Dist != "uniform" && l.Dist != "exponential":
		return invalid(field+".length.dist", "must be uniform or exponential, got %q", l.Dist)
	case l.Min <= 0 || l.Max.D() > 24*time.Hour || l.Max < l.Min:
		return invalid(field+".length", "want 0 < min <= max <= 24h, got min %s max %s", l.Min.D(), l.Max.D())
	case l.Dist == "exponential" && (l.Mean <= l.Min || l.Mean > l.Max):
		return invalid(field+".length.mean", "must be in (min, max], got %s", l.Mean.D())
	case l.Dist != "exponential" && l.Mean != 0:
		return invalid(field+".length.mean", "only with dist: exponential")
	case think <= 0:
		return invalid(field+".think_time", "must be positive with a length")
	case l.Max.D()/think.D() > 10000:
		return invalid(field+".length.max", "at most 10000 updates per session (think_time %s)", think.D())
	}
	return nil
}

// validate checks the event section field when the mix uses it.
func (e *Event) validate(field string, share float64) error {
	if share <= 0 {
		return nil
	}
	if e.RatingGroup == 0 {
		return invalid(field+".rating_group", "must be set")
	}
	if e.Units.IsZero() {
		return invalid(field+".units", "at least one unit must be set")
	}
	return nil
}

// validateRetries checks retransmit, retry_errors and retry_backoff.
func (s *Scenario) validateRetries() error {
	if s.Retransmit < 0 || s.Retransmit > 1 || math.IsNaN(s.Retransmit) {
		return invalid("retransmit", "must be a share 0..1, got %v", s.Retransmit)
	}
	if s.RetryErrors < 0 || s.RetryErrors > MaxRetryErrors {
		return invalid("retry_errors", "must be 0..%d, got %d", MaxRetryErrors, s.RetryErrors)
	}
	if s.RetryErrors > 0 && (s.RetryBackoff <= 0 || s.RetryBackoff > Duration(10*time.Second)) {
		return invalid("retry_backoff", "must be above 0 and at most 10s with retry_errors set, got %v", time.Duration(s.RetryBackoff))
	}
	return nil
}

// validate checks the range (its first SUPI, its size, that it fits the
// SUPI's digits) and the popularity.
func (sub *Subscribers) validate() error {
	first, err := ParseSUPI(sub.First)
	if err != nil {
		return invalid("subscribers.first", "%v", err)
	}
	if sub.Count <= 0 || sub.Count > maxSubscribers {
		return invalid("subscribers.count", "must be 1..%d, got %d", maxSubscribers, sub.Count)
	}
	if !rangeFits(first, sub.Count) {
		return invalid("subscribers.count", "%d subscribers from %s overflow its %d digits", sub.Count, sub.First, first.Width)
	}
	switch sub.Popularity {
	case "", "uniform":
		if sub.ZipfS != 0 {
			return invalid("subscribers.zipf_s", "only with popularity: zipf")
		}
	case "zipf":
		if !(sub.ZipfS > 0 && sub.ZipfS <= 5) {
			return invalid("subscribers.zipf_s", "must be in (0, 5], got %v", sub.ZipfS)
		}
	default:
		return invalid("subscribers.popularity", "must be uniform or zipf, got %q", sub.Popularity)
	}
	return nil
}

// validateLoad checks max_open_sessions and the offered load (exactly one
// of tps and sessions_per_second).
func (s *Scenario) validateLoad() error {
	if s.MaxOpenSessions <= 0 || s.MaxOpenSessions > maxOpenSessions {
		return invalid("max_open_sessions", "must be 1..%d, got %d", maxOpenSessions, s.MaxOpenSessions)
	}
	switch l := s.Load; {
	case l.TPS < 0 || !finite(l.TPS):
		return invalid("load.tps", "must be a positive number, got %v", l.TPS)
	case l.SessionsPerSecond < 0 || !finite(l.SessionsPerSecond):
		return invalid("load.sessions_per_second", "must be a positive number, got %v", l.SessionsPerSecond)
	case l.TPS > 0 && l.SessionsPerSecond > 0:
		return invalid("load", "set only one of tps and sessions_per_second")
	case l.TPS == 0 && l.SessionsPerSecond == 0:
		return invalid("load.tps", "set tps or sessions_per_second")
	}
	return nil
}

// validate checks the time line; steadyThink is the sessions' think time
// a steady start's ramp-up must cover.
func (p *Phases) validate(steadyThink Duration) error {
	if p.RampUp < 0 {
		return invalid("phases.ramp_up", "must not be negative, got %s", p.RampUp.D())
	}
	if p.SteadyStart && p.RampUp <= 0 {
		return invalid("phases.steady_start", "needs a ramp-up (phases.ramp_up) to open the sessions in")
	}
	// The steady state's sessions are opened over the ramp-up and update
	// one think time after their create: a shorter ramp-up bunches every
	// update into one band per think time, so the window would not see
	// the steady rate (busy-hour with a 5 s ramp-up offered 149 of 1,000
	// TPS in a 10 s window).
	if p.SteadyStart && p.RampUp < steadyThink {
		return invalid("phases.ramp_up", "must be at least the sessions' think time (%s) with phases.steady_start, got %s", steadyThink.D(), p.RampUp.D())
	}
	if p.WarmUp < 0 {
		return invalid("phases.warm_up", "must not be negative, got %s", p.WarmUp.D())
	}
	if p.Duration <= 0 {
		return invalid("phases.duration", "must be positive, got %s", p.Duration.D())
	}
	return nil
}

// validateLimits checks timeout, max_in_flight, late_threshold and
// late_drop.
func (s *Scenario) validateLimits() error {
	if s.Timeout <= 0 {
		return invalid("timeout", "must be positive, got %s", s.Timeout.D())
	}
	if s.MaxInFlight <= 0 || s.MaxInFlight > maxInFlight {
		return invalid("max_in_flight", "must be 1..%d, got %d", maxInFlight, s.MaxInFlight)
	}
	if s.LateThreshold <= 0 {
		return invalid("late_threshold", "must be positive")
	}
	if s.LateDrop < s.LateThreshold {
		return invalid("late_drop", "must be at least late_threshold")
	}
	return nil
}

// validateThresholds checks that every threshold parses.
func (s *Scenario) validateThresholds() error {
	for i, t := range s.Thresholds {
		if _, err := ParseThreshold(t); err != nil {
			return invalid(fmt.Sprintf("thresholds[%d]", i), "%v", err)
		}
	}
	return nil
}

// Shares returns the normalised mix, indexed by Kind.
func (s *Scenario) Shares() [NumKinds]float64 {
	v := [NumKinds]float64{s.Mix.Data, s.Mix.Voice, s.Mix.SMS, s.Mix.Balance}
	sum := v[0] + v[1] + v[2] + v[3]
	for i := range v {
		v[i] /= sum
	}
	return v
}

// TxnsPerFlow returns the mean number of transactions one flow makes.
func (s *Scenario) TxnsPerFlow() float64 {
	sh := s.Shares()
	return sh[KindData]*(2+s.Data.MeanUpdates()) + sh[KindVoice]*(2+s.Voice.MeanUpdates()) +
		sh[KindSMS] + sh[KindBalance]
}

// OpenSessions returns the mean number of data and voice sessions open
// at once at full rate, once the run is older than the longest session
// (Little's law: session starts per second × mean length).
func (s *Scenario) OpenSessions() float64 {
	sh := s.Shares()
	return s.FlowRate() * (sh[KindData]*s.Data.MeanLength().Seconds() + sh[KindVoice]*s.Voice.MeanLength().Seconds())
}

// FlowRate returns flow starts per second at full rate.
func (s *Scenario) FlowRate() float64 {
	if s.Load.SessionsPerSecond > 0 {
		return s.Load.SessionsPerSecond
	}
	return s.Load.TPS / s.TxnsPerFlow()
}

// OfferedTPS returns the offered transactions per second at full rate.
func (s *Scenario) OfferedTPS() float64 {
	if s.Load.TPS > 0 {
		return s.Load.TPS
	}
	return s.Load.SessionsPerSecond * s.TxnsPerFlow()
}

// steadyThinkTime is the longest think time of the session kinds in the
// mix (0 when none thinks).
func (s *Scenario) steadyThinkTime() Duration {
	var t Duration
	if s.Mix.Data > 0 {
		t = max(t, s.Data.ThinkTime)
	}
	if s.Mix.Voice > 0 {
		t = max(t, s.Voice.ThinkTime)
	}
	return t
}

// PrefillSessions returns how many sessions Phases.SteadyStart opens
// during the ramp-up, per kind (data, voice): the steady state's open
// sessions less those the ramp-up's own flows still have open at its end.
func (s *Scenario) PrefillSessions() (data, voice int) {
	if !s.Phases.SteadyStart {
		return 0, 0
	}
	sh := s.Shares()
	r := s.Phases.RampUp.D()
	one := func(ss *Session, share float64) int {
		rate := s.FlowRate() * share // session starts per second at full rate
		steady := rate * ss.MeanLength().Seconds()
		// started at t in [0, r) at rate·t/r, open at r when longer than r-t
		const steps = 256
		var ramp float64
		for i := range steps {
			t := (float64(i) + 0.5) / steps * r.Seconds()
			ramp += rate * t / r.Seconds() * ss.survival(r-time.Duration(t*1e9)) * r.Seconds() / steps
		}
		return int(math.Max(0, math.Round(steady-ramp)))
	}
	return one(&s.Data, sh[KindData]), one(&s.Voice, sh[KindVoice])
}

// survival returns the probability that a session lasts longer than d.
func (ss *Session) survival(d time.Duration) float64 {
	if ss.Length == nil {
		if d < ss.MeanLength() {
			return 1
		}
		return 0
	}
	n := 0
	for i := range lengthGrid {
		if ss.Length.Quantile((float64(i)+0.5)/lengthGrid) > d {
			n++
		}
	}
	return float64(n) / lengthGrid
}

// SUPI is a subscriber identity split into prefix and numeric part
// (chf.SUPI, shared with provisioning).
type SUPI = chf.SUPI

// ParseSUPI splits "imsi-001010000000001".
func ParseSUPI(s string) (SUPI, error) { return chf.ParseSUPI(s) }
