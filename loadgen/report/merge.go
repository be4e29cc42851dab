package report

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// ErrMerge is returned when results cannot be merged.
var ErrMerge = errors.New("report: cannot merge")

// DefaultStartTolerance is how far apart shards' start times may be by
// default.
const DefaultStartTolerance = 5 * time.Second

// MergeOptions tune what Merge accepts.
type MergeOptions struct {
	// StartTolerance is the largest spread of the shards' start times
	// (they must have run at the same time); 0 = DefaultStartTolerance.
	StartTolerance time.Duration
}

// checkShards refuses inputs that are not the shards of one run: a
// result without a shard, different shard counts, a shard twice,
// different scenarios, or start times further apart than the tolerance.
// It returns notes on what the merge lacks (missing shards, inputs
// without a scenario hash).
func checkShards(o MergeOptions, in []*Result) ([]string, error) {
	tol := o.StartTolerance
	if tol <= 0 {
		tol = DefaultStartTolerance
	}
	var notes []string
	n := 0
	seen := map[int]int{}
	hash, hashFrom := "", 0
	lo, hi := in[0].Started, in[0].Started
	for k, r := range in {
		i, rn, err := scenario.ParseShard(r.Shard)
		if err != nil {
			return nil, fmt.Errorf("%w: input %d is not a shard result (shard %q; run each part with --shard i/n)", ErrMerge, k, r.Shard)
		}
		if k == 0 {
			n = rn
		} else if rn != n {
			return nil, fmt.Errorf("%w: input %d is shard %s but input 0 is one of %d shards", ErrMerge, k, r.Shard, n)
		}
		if prev, dup := seen[i]; dup {
			return nil, fmt.Errorf("%w: inputs %d and %d are both shard %s", ErrMerge, prev, k, r.Shard)
		}
		seen[i] = k
		switch h := r.Provenance.ScenarioHash; {
		case h == "":
			notes = append(notes, fmt.Sprintf("input %d (shard %s) has no scenario hash: its scenario was not checked", k, r.Shard))
		case hash == "":
			hash, hashFrom = h, k
		case h != hash:
			return nil, fmt.Errorf("%w: input %d ran scenario %s but input %d ran %s (different scenarios)", ErrMerge, k, h, hashFrom, hash)
		}
		if r.Started.Before(lo) {
			lo = r.Started
		}
		if r.Started.After(hi) {
			hi = r.Started
		}
	}
	if spread := hi.Sub(lo); spread > tol {
		return nil, fmt.Errorf("%w: shards started %s apart, more than the tolerance %s (they must run at the same time; see --start-tolerance)", ErrMerge, spread.Round(time.Millisecond), tol)
	}
	if len(seen) < n {
		var missing []string
		for i := range n {
			if _, ok := seen[i]; !ok {
				missing = append(missing, fmt.Sprintf("%d/%d", i, n))
			}
		}
		notes = append(notes, fmt.Sprintf("merged %d of %d shards; missing %s", len(seen), n, strings.Join(missing, ", ")))
	}
	return notes, nil
}

// StartAtFlag is the run flag of the shards' common start time; its
// effective value is in Provenance.Flags.
const StartAtFlag = "start-at"

// checkStartAt checks that the shards waited for the same --start-at: an
// error when they were given different times, a note when some or all had
// none (they were then lined up by their own start, not a common one): a
// warning of the merged result.
func checkStartAt(in []*Result) (string, error) {
	at, from := "", 0
	var without []string
	for k, r := range in {
		v := r.Provenance.Flags[StartAtFlag]
		switch {
		case v == "":
			without = append(without, r.Shard)
		case at == "":
			at, from = v, k
		case v != at:
			return "", fmt.Errorf("%w: input %d (shard %s) started at --start-at %s but input %d at %s (no common start)", ErrMerge, k, r.Shard, v, from, at)
		}
	}
	if len(without) > 0 {
		return fmt.Sprintf("shards %s ran without --start-at: no common start barrier, the series are aligned by each shard's own start", strings.Join(without, ", ")), nil
	}
	return "", nil
}

// Merge combines the results of shards that ran at the same time against
// the same system into one result. Counts add up and histograms merge
// exactly, so the percentiles are those of the union of all samples. The
// measured duration is the longest shard's. CPU: the load generators'
// CPU adds up; every other component is the same system observed by each
// shard, so its largest figure is kept. Per-second series add counts; their
// per-second percentiles are the worst shard's (an upper bound). The
// inputs must be distinct shards of one run (checkShards); the merged
// result is interrupted when any shard was, and is checked against the
// first shard's thresholds.
func Merge(o MergeOptions, in ...*Result) (*Result, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: no results", ErrMerge)
	}
	for i, r := range in {
		if r.SchemaVersion != SchemaVersion {
			return nil, fmt.Errorf("%w: input %d has schema_version %d", ErrSchema, i, r.SchemaVersion)
		}
	}
	notes, err := checkShards(o, in)
	if err != nil {
		return nil, err
	}
	startNote, err := checkStartAt(in)
	if err != nil {
		return nil, err
	}
	out := &Result{
		Provenance:    in[0].Provenance,
		Incomplete:    notes,
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
	adm := map[string]*histogram.Histogram{} // admitted latency, when every shard has it
	targets := map[string]bool{}
	series := map[int]*Point{}
	out.Audit.OK, out.Audit.Skipped = true, true
	var reasons []string
	hosts := map[string]bool{}
	var hostList []string
	for _, r := range in {
		if h := r.Provenance.Host; !hosts[h] {
			hosts[h] = true
			hostList = append(hostList, h)
		}
		if r.Interrupted {
			out.Interrupted = true
			out.InterruptedBy = r.InterruptedBy
		}
		for _, x := range r.Incomplete {
			out.Incomplete = append(out.Incomplete, "shard "+r.Shard+": "+x)
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
			m.Shed += o.Shed
			out.Ops[name] = m
			if enc := r.Histograms[name].Admitted; enc != "" {
				h, err := histogram.Decode(enc)
				if err != nil {
					return nil, fmt.Errorf("cannot decode admitted latency histogram of %s: %w", name, err)
				}
				if adm[name] == nil {
					adm[name] = histogram.New()
				}
				adm[name].Merge(h)
			}
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
		if len(r.Hops) > 0 {
			// Each shard scraped the same services over its own window:
			// their quantiles do not add up.
			out.HopsNote = "not merged: see each shard's result.json"
		}
		for k, v := range r.Memory {
			if out.Memory == nil {
				out.Memory = map[string]cpu.Memory{}
			}
			m := out.Memory[k]
			if k == LoadgenComponent { // one loadgen per shard
				m.RSS, m.Peak = m.RSS+v.RSS, m.Peak+v.Peak
			} else { // every shard saw the same SUT
				m.RSS, m.Peak = max(m.RSS, v.RSS), max(m.Peak, v.Peak)
			}
			out.Memory[k] = m
		}
		if s := r.Sessions; s != nil {
			if out.Sessions == nil {
				out.Sessions = &Sessions{FlowBytes: s.FlowBytes}
			}
			o := out.Sessions
			o.OpenPeak += s.OpenPeak // an upper bound: the shards' peaks need not coincide
			o.OpenEnd += s.OpenEnd
			o.Limited += s.Limited
			o.MaxOpenSessions += s.MaxOpenSessions
			o.LoadgenHeapBytes += s.LoadgenHeapBytes
			if o.OpenEnd > 0 {
				o.BytesPerOpenSession = float64(o.LoadgenHeapBytes) / float64(o.OpenEnd)
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
			m.ServiceP50, m.ServiceP99, m.SchedLagP99 = max(m.ServiceP50, p.ServiceP50), max(m.ServiceP99, p.ServiceP99), max(m.SchedLagP99, p.SchedLagP99)
			m.OpCompleted = addCounts(m.OpCompleted, p.OpCompleted)
			m.OpErrors = addCounts(m.OpErrors, p.OpErrors)
			m.ErrorClasses = addCounts(m.ErrorClasses, p.ErrorClasses)
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
		out.Retried += r.Retried
		out.RetryResolved += r.RetryResolved
		out.RetriesDropped += r.RetriesDropped
		out.UsageLost.Add(r.UsageLost)
		out.Audit.UsageLost += a.UsageLost
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
		a := ""
		if h := adm[name]; h != nil {
			if a, err = h.Encode(); err != nil {
				return nil, err
			}
		}
		out.Histograms[name] = Hist{Latency: l, Service: s, Admitted: a}
	}
	for sec := 0; len(series) > 0; sec++ {
		if p, ok := series[sec]; ok {
			q := *p
			q.HostBusy, q.HostSteal, q.HostFreezeMs = 0, 0, nil // the shards' machines differ (as out.Host)
			out.Series = append(out.Series, q)
			delete(series, sec)
		}
	}
	out.Provenance.Host = strings.Join(hostList, ",")
	nt, ntNotes, err := mergeNotifications(in)
	if err != nil {
		return nil, err
	}
	out.Notifications = nt
	out.Incomplete = append(out.Incomplete, ntNotes...)
	if err := out.Recompute(); err != nil {
		return nil, err
	}
	if startNote != "" {
		out.Warnings = append(out.Warnings, startNote)
	}
	var profileNote string
	out.Provenance.RuntimeProfile, profileNote = mergeRuntimeProfile(in)
	if profileNote != "" {
		out.Warnings = append(out.Warnings, profileNote)
	}
	out.CheckThresholds(in[0].thresholdList())
	return out, nil
}

// mergeRuntimeProfile returns the CHF runtime profile the shards state:
// the one they agree on (shards that state none do not disagree), else
// each one stated, comma-separated, with a warning.
func mergeRuntimeProfile(in []*Result) (profile, warning string) {
	var list []string
	for _, r := range in {
		if p := r.Provenance.RuntimeProfile; p != "" && !slices.Contains(list, p) {
			list = append(list, p)
		}
	}
	profile = strings.Join(list, ",")
	if len(list) > 1 {
		warning = fmt.Sprintf("the shards state different CHF runtime profiles (%s): they measured one CHF, so all but one --runtime-profile are wrong", profile)
	}
	return profile, warning
}

// addCounts adds src into dst (allocated when needed) and returns dst.
func addCounts(dst, src map[string]int64) map[string]int64 {
	if len(src) > 0 && dst == nil {
		dst = map[string]int64{}
	}
	for k, v := range src {
		dst[k] += v
	}
	return dst
}
