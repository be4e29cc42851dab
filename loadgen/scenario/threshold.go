package scenario

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrThreshold wraps every threshold parse error.
var ErrThreshold = errors.New("scenario: bad threshold")

// Threshold is one pass/fail criterion on a run's result, written as
// METRIC OP VALUE (k6-style):
//
//	p50 p90 p99 p99.9 max mean   latency from the scheduled send: a Go
//	                             duration ("10ms", "500us") or a bare number of ms
//	errors late dropped          errors / transactions, late / offered,
//	                             dropped / offered: "0.1%" or a fraction ("0.001")
//	tps                          achieved transactions per second: a number or
//	                             "F*offered" (F times the offered TPS)
//	jitter                       coefficient of variation of latency (a number)
//
// OP is <, <=, > or >=. The threshold passes when the expression holds.
type Threshold struct {
	Expr   string  `json:"threshold"`
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Value  float64 `json:"value"` // ms for latency, a fraction for rates
	// OfferedFactor: Value multiplies the offered TPS.
	OfferedFactor bool `json:"offered_factor,omitempty"`
}

// Metric kinds of thresholds.
var (
	latencyMetrics = map[string]bool{"p50": true, "p90": true, "p99": true, "p99.9": true, "p999": true, "max": true, "mean": true}
	rateMetrics    = map[string]bool{"errors": true, "late": true, "dropped": true}
)

// DefaultThresholds apply unless a threshold on the same metric replaces
// them (or the command is told not to use them): a run with no completed
// transaction, or with more than 1% errors, fails.
var DefaultThresholds = []string{"tps>0", "errors<=1%"}

// ParseThreshold reads one threshold expression.
func ParseThreshold(expr string) (Threshold, error) {
	s := strings.TrimSpace(expr)
	i := strings.IndexAny(s, "<>")
	if i <= 0 {
		return Threshold{}, fmt.Errorf("%w %q: want METRIC OP VALUE, e.g. p99<10ms, errors<0.1%%, tps>=0.99*offered", ErrThreshold, expr)
	}
	t := Threshold{Expr: s, Metric: strings.ToLower(strings.TrimSpace(s[:i])), Op: s[i : i+1]}
	rest := s[i+1:]
	if strings.HasPrefix(rest, "=") {
		t.Op += "="
		rest = rest[1:]
	}
	v := strings.TrimSpace(rest)
	if v == "" {
		return Threshold{}, fmt.Errorf("%w %q: no value after %s", ErrThreshold, expr, t.Op)
	}
	var err error
	switch {
	case latencyMetrics[t.Metric]:
		if t.Metric == "p999" {
			t.Metric = "p99.9"
		}
		t.Value, err = parseMs(v)
	case rateMetrics[t.Metric]:
		t.Value, err = parseRate(v)
	case t.Metric == "tps":
		if f, ok := strings.CutSuffix(v, "*offered"); ok {
			t.OfferedFactor = true
			v = strings.TrimSpace(f)
		}
		t.Value, err = parseNumber(v)
	case t.Metric == "jitter":
		t.Value, err = parseNumber(v)
	default:
		return Threshold{}, fmt.Errorf("%w %q: unknown metric %q (want p50, p90, p99, p99.9, max, mean, errors, late, dropped, tps or jitter)", ErrThreshold, expr, t.Metric)
	}
	if err != nil {
		return Threshold{}, fmt.Errorf("%w %q: %v", ErrThreshold, expr, err)
	}
	return t, nil
}

func parseNumber(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("cannot parse %q as a number >= 0", s)
	}
	return v, nil
}

func parseMs(s string) (float64, error) {
	if d, err := time.ParseDuration(strings.ReplaceAll(s, "µ", "u")); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("duration %q is negative", s)
		}
		return float64(d) / 1e6, nil
	}
	v, err := parseNumber(s)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q as a duration (10ms) or a number of ms", s)
	}
	return v, nil
}

func parseRate(s string) (float64, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := parseNumber(strings.TrimSpace(p))
		if err != nil {
			return 0, err
		}
		return v / 100, nil
	}
	return parseNumber(s)
}

// Holds reports whether value passes the threshold, given the run's
// offered TPS (used by "F*offered").
func (t Threshold) Holds(value, offeredTPS float64) bool {
	limit := t.Limit(offeredTPS)
	switch t.Op {
	case "<":
		return value < limit
	case "<=":
		return value <= limit
	case ">":
		return value > limit
	case ">=":
		return value >= limit
	}
	return false
}

// Limit returns the value compared against.
func (t Threshold) Limit(offeredTPS float64) float64 {
	if t.OfferedFactor {
		return t.Value * offeredTPS
	}
	return t.Value
}

// EffectiveThresholds returns the scenario's thresholds and, unless
// noDefaults, the DefaultThresholds on metrics none of them names. The
// scenario must be valid.
func (s *Scenario) EffectiveThresholds(noDefaults bool) []Threshold {
	var out []Threshold
	named := map[string]bool{}
	for _, e := range s.Thresholds {
		t, err := ParseThreshold(e)
		if err != nil {
			panic("BUG: EffectiveThresholds on an unvalidated scenario: " + err.Error())
		}
		named[t.Metric] = true
		out = append(out, t)
	}
	if noDefaults {
		return out
	}
	var defs []Threshold
	for _, e := range DefaultThresholds {
		t, _ := ParseThreshold(e)
		if !named[t.Metric] {
			defs = append(defs, t)
		}
	}
	return append(defs, out...)
}
