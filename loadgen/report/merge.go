package report

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/engine"
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
	m := newMerger(in[0], len(in), notes)
	for _, r := range in {
		if err := m.add(r); err != nil {
			return nil, err
		}
	}
	out, err := m.result()
	if err != nil {
		return nil, err
	}
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

// merger accumulates the shards' results into one (Merge): out holds
// what adds up as it goes, the rest (histograms, series, hosts, audit
// reasons) waits in the merger until result.
type merger struct {
	out      *Result
	ops      map[string]*engine.OpStats // counts and decoded histograms per operation
	targets  map[string]bool
	series   map[int]*Point
	hosts    map[string]bool
	hostList []string
	reasons  []string // the shards' audit reasons
}

// newMerger starts the merge of n shards from the first shard's identity
// (provenance, label, scenario, protocol).
func newMerger(first *Result, n int, notes []string) *merger {
	out := &Result{
		Provenance:    first.Provenance,
		Incomplete:    notes,
		SchemaVersion: SchemaVersion,
		Label:         first.Label,
		Started:       first.Started,
		Proto:         first.Proto,
		Scenario:      first.Scenario,
		Shard:         fmt.Sprintf("merged %d", n),
		ErrorClasses:  map[string]int64{},
		Ops:           map[string]Op{},
		Histograms:    map[string]Hist{},
		CPUSeconds:    map[string]float64{},
	}
	out.Scenario.Subscribers.Count = 0
	out.Scenario.Load.TPS, out.Scenario.Load.SessionsPerSecond = 0, 0
	out.Audit.OK, out.Audit.Skipped = true, true
	return &merger{out: out, ops: map[string]*engine.OpStats{}, targets: map[string]bool{}, series: map[int]*Point{}, hosts: map[string]bool{}}
}

// add merges one shard's result.
func (m *merger) add(r *Result) error {
	m.addRun(r)
	if err := m.addOps(r); err != nil {
		return err
	}
	m.addResources(r)
	m.addSeries(r)
	m.addAudit(r)
	return nil
}

// addRun merges the run's extent, load and outcome counts.
func (m *merger) addRun(r *Result) {
	out := m.out
	if h := r.Provenance.Host; !m.hosts[h] {
		m.hosts[h] = true
		m.hostList = append(m.hostList, h)
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
		if !m.targets[t] {
			m.targets[t] = true
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
	out.Retried += r.Retried
	out.RetryResolved += r.RetryResolved
	out.RetriesDropped += r.RetriesDropped
	out.UsageLost.Add(r.UsageLost)
}

// addOps merges every operation's counts and histograms the way the
// engine merges its workers' (engine.OpStats.Add); the admitted latency
// only where the shard has it.
func (m *merger) addOps(r *Result) error {
	for name, o := range r.Ops {
		shard := engine.OpStats{Count: o.Count, Errors: o.Errors, Late: o.Late, Dropped: o.Dropped, Shed: o.Shed}
		if enc := r.Histograms[name].Admitted; enc != "" {
			h, err := histogram.Decode(enc)
			if err != nil {
				return fmt.Errorf("cannot decode admitted latency histogram of %s: %w", name, err)
			}
			shard.Admitted = h
		}
		h, err := r.decode(name)
		if err != nil {
			return err
		}
		shard.Latency, shard.Service = h[0], h[1]
		acc := m.ops[name]
		if acc == nil {
			acc = &engine.OpStats{Latency: histogram.New(), Service: histogram.New()}
			m.ops[name] = acc
		}
		acc.Add(&shard)
	}
	return nil
}

// addResources merges CPU, memory, sessions and the per-hop note.
func (m *merger) addResources(r *Result) {
	out := m.out
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
		mm := out.Memory[k]
		if k == LoadgenComponent { // one loadgen per shard
			mm.RSS, mm.Peak = mm.RSS+v.RSS, mm.Peak+v.Peak
		} else { // every shard saw the same SUT
			mm.RSS, mm.Peak = max(mm.RSS, v.RSS), max(mm.Peak, v.Peak)
		}
		out.Memory[k] = mm
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
}

// addSeries merges the per-second series: counts add up, percentiles
// take the worst shard's.
func (m *merger) addSeries(r *Result) {
	for _, p := range r.Series {
		s := m.series[p.Second]
		if s == nil {
			s = &Point{CPU: map[string]float64{}}
			s.Second, s.Phase = p.Second, p.Phase
			m.series[p.Second] = s
		}
		s.Offered += p.Offered
		s.Completed += p.Completed
		s.Errors += p.Errors
		s.Late += p.Late
		s.Dropped += p.Dropped
		s.InFlight += p.InFlight
		s.P50, s.P90, s.P99, s.P999, s.Max = max(s.P50, p.P50), max(s.P90, p.P90), max(s.P99, p.P99), max(s.P999, p.P999), max(s.Max, p.Max)
		s.ServiceP50, s.ServiceP99, s.SchedLagP99 = max(s.ServiceP50, p.ServiceP50), max(s.ServiceP99, p.ServiceP99), max(s.SchedLagP99, p.SchedLagP99)
		s.OpCompleted = addCounts(s.OpCompleted, p.OpCompleted)
		s.OpErrors = addCounts(s.OpErrors, p.OpErrors)
		s.ErrorClasses = addCounts(s.ErrorClasses, p.ErrorClasses)
		for k, v := range p.CPU {
			if k == LoadgenComponent {
				s.CPU[k] += v
			} else {
				s.CPU[k] = max(s.CPU[k], v)
			}
		}
	}
}

// addAudit merges the shard's audit: the merged audit is OK when every
// shard's that ran is, skipped when all were.
func (m *merger) addAudit(r *Result) {
	o, a := &m.out.Audit, r.Audit
	if !a.Skipped {
		o.Skipped = false
		o.OK = o.OK && a.OK
	}
	o.Touched += a.Touched
	o.Checked += a.Checked
	o.Charged += a.Charged
	o.Debited += a.Debited
	o.Mismatches += a.Mismatches
	o.Negative += a.Negative
	o.Reserved += a.Reserved
	o.Unreadable += a.Unreadable
	o.Unresolved += a.Unresolved
	o.UsageLost += a.UsageLost
	o.NoHeader += a.NoHeader
	for _, e := range a.Examples {
		if len(o.Examples) < 10 {
			o.Examples = append(o.Examples, e)
		}
	}
	if a.Reason != "" {
		m.reasons = append(m.reasons, fmt.Sprintf("shard %s: %s", r.Shard, a.Reason))
	}
}

// result completes the merged result: the audit's verdict, the
// operations' counts and encoded histograms, the series in order and the
// hosts.
func (m *merger) result() (*Result, error) {
	out := m.out
	if out.Audit.Skipped {
		out.Audit.OK = false
	}
	out.Audit.Reason = strings.Join(m.reasons, "; ")
	for name, s := range m.ops {
		out.Ops[name] = Op{Count: s.Count, Errors: s.Errors, Late: s.Late, Dropped: s.Dropped, Shed: s.Shed}
		l, err := s.Latency.Encode()
		if err != nil {
			return nil, err
		}
		sv, err := s.Service.Encode()
		if err != nil {
			return nil, err
		}
		a := ""
		if s.Admitted != nil {
			if a, err = s.Admitted.Encode(); err != nil {
				return nil, err
			}
		}
		out.Histograms[name] = Hist{Latency: l, Service: sv, Admitted: a}
	}
	for sec := 0; len(m.series) > 0; sec++ {
		if p, ok := m.series[sec]; ok {
			q := *p
			q.HostBusy, q.HostSteal, q.HostFreezeMs = 0, 0, nil // the shards' machines differ (as out.Host)
			out.Series = append(out.Series, q)
			delete(m.series, sec)
		}
	}
	out.Provenance.Host = strings.Join(m.hostList, ",")
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
