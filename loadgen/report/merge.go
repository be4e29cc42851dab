package report

import (
	"errors"
	"fmt"
	"strings"

	"github.com/chf-testbed/testbed/loadgen/histogram"
)

// ErrMerge is returned when results cannot be merged.
var ErrMerge = errors.New("report: cannot merge")

// Merge combines the results of shards that ran at the same time against
// the same system into one result. Counts add up and histograms merge
// exactly, so the percentiles are those of the union of all samples. The
// measured duration is the longest shard's. CPU: the load generators'
// CPU adds up; every other component is the same system observed by each
// shard, so its largest figure is kept. Per-second series add counts; their
// per-second percentiles are the worst shard's (an upper bound).
func Merge(in ...*Result) (*Result, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: no results", ErrMerge)
	}
	out := &Result{
		SchemaVersion: SchemaVersion,
		Label:         in[0].Label,
		Started:       in[0].Started,
		Proto:         in[0].Proto,
		Scenario:      in[0].Scenario,
		Shard:         fmt.Sprintf("merged %d", len(in)),
		ErrorClasses:  map[string]int64{},
		Ops:           map[string]Op{},
		Histograms:    map[string]Hist{},
		CPUSeconds:    map[string]float64{},
	}
	out.Scenario.Subscribers.Count = 0
	out.Scenario.Load.TPS, out.Scenario.Load.SessionsPerSecond = 0, 0
	lat := map[string][2]*histogram.Histogram{}
	targets := map[string]bool{}
	series := map[int]*Point{}
	out.Audit.OK, out.Audit.Skipped = true, true
	var reasons []string
	for i, r := range in {
		if r.SchemaVersion != SchemaVersion {
			return nil, fmt.Errorf("%w: input %d has schema_version %d", ErrSchema, i, r.SchemaVersion)
		}
		if r.Started.Before(out.Started) {
			out.Started = r.Started
		}
		if r.DurationS > out.DurationS {
			out.DurationS = r.DurationS
		}
		for _, t := range r.Targets {
			if !targets[t] {
				targets[t] = true
				out.Targets = append(out.Targets, t)
			}
		}
		out.Scenario.Subscribers.Count += r.Scenario.Subscribers.Count
		out.Scenario.Load.TPS += r.Scenario.Load.TPS
		out.Scenario.Load.SessionsPerSecond += r.Scenario.Load.SessionsPerSecond
		out.Offered += r.Offered
		for k, v := range r.ErrorClasses {
			out.ErrorClasses[k] += v
		}
		for name, o := range r.Ops {
			m := out.Ops[name]
			m.Count += o.Count
			m.Errors += o.Errors
			m.Late += o.Late
			m.Dropped += o.Dropped
			out.Ops[name] = m
			h, err := r.decode(name)
			if err != nil {
				return nil, err
			}
			acc, ok := lat[name]
			if !ok {
				acc = [2]*histogram.Histogram{histogram.New(), histogram.New()}
				lat[name] = acc
			}
			acc[0].Merge(h[0])
			acc[1].Merge(h[1])
		}
		for k, v := range r.CPUSeconds {
			if k == LoadgenComponent {
				out.CPUSeconds[k] += v
			} else if v > out.CPUSeconds[k] {
				out.CPUSeconds[k] = v
			}
		}
		for _, p := range r.Series {
			m := series[p.Second]
			if m == nil {
				m = &Point{CPU: map[string]float64{}}
				m.Second, m.Phase = p.Second, p.Phase
				series[p.Second] = m
			}
			m.Offered += p.Offered
			m.Completed += p.Completed
			m.Errors += p.Errors
			m.Late += p.Late
			m.Dropped += p.Dropped
			m.InFlight += p.InFlight
			m.P50, m.P90, m.P99, m.P999, m.Max = max(m.P50, p.P50), max(m.P90, p.P90), max(m.P99, p.P99), max(m.P999, p.P999), max(m.Max, p.Max)
			for k, v := range p.CPU {
				if k == LoadgenComponent {
					m.CPU[k] += v
				} else {
					m.CPU[k] = max(m.CPU[k], v)
				}
			}
		}
		a := r.Audit
		if !a.Skipped {
			out.Audit.Skipped = false
			out.Audit.OK = out.Audit.OK && a.OK
		}
		out.Audit.Touched += a.Touched
		out.Audit.Checked += a.Checked
		out.Audit.Charged += a.Charged
		out.Audit.Debited += a.Debited
		out.Audit.Mismatches += a.Mismatches
		out.Audit.Negative += a.Negative
		out.Audit.Reserved += a.Reserved
		out.Audit.Unreadable += a.Unreadable
		out.Audit.Unresolved += a.Unresolved
		out.Audit.NoHeader += a.NoHeader
		for _, e := range a.Examples {
			if len(out.Audit.Examples) < 10 {
				out.Audit.Examples = append(out.Audit.Examples, e)
			}
		}
		if a.Reason != "" {
			reasons = append(reasons, fmt.Sprintf("shard %s: %s", r.Shard, a.Reason))
		}
	}
	if out.Audit.Skipped {
		out.Audit.OK = false
	}
	out.Audit.Reason = strings.Join(reasons, "; ")
	for name, h := range lat {
		l, err := h[0].Encode()
		if err != nil {
			return nil, err
		}
		s, err := h[1].Encode()
		if err != nil {
			return nil, err
		}
		out.Histograms[name] = Hist{Latency: l, Service: s}
	}
	for sec := 0; len(series) > 0; sec++ {
		if p, ok := series[sec]; ok {
			out.Series = append(out.Series, *p)
			delete(series, sec)
		}
	}
	if err := out.Recompute(); err != nil {
		return nil, err
	}
	return out, nil
}
