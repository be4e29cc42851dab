// Package report turns a run into its results and writes them: a summary
// table for the terminal, JSON (versioned, with the merged HDR histograms
// encoded so results can be combined later), a CSV time series, Markdown
// and a self-contained HTML page with SVG charts (gonum/plot).
//
// Result is the one report type; every loadgen command (run, local, and the
// sweep, compare, gate and merge commands) reads and writes it.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/freeze"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// SchemaVersion is the version of the JSON layout.
const SchemaVersion = 1

// LoadgenComponent is the CPU component name of the load generator itself;
// every other component counts as the system under test.
const LoadgenComponent = "loadgen"

// ErrSchema is returned for a JSON result of another schema version.
var ErrSchema = errors.New("report: unsupported schema_version")

// Latency is the latency summary in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func latencyOf(s histogram.Summary) Latency {
	return Latency{P50: s.P50, P90: s.P90, P99: s.P99, P999: s.P999, Max: s.Max, Mean: s.Mean}
}

// Op is the result of one operation.
type Op struct {
	Count     int64   `json:"count"`
	Errors    int64   `json:"errors"`
	Late      int64   `json:"late"`
	Dropped   int64   `json:"dropped"`
	TPS       float64 `json:"tps"`
	LatencyMs Latency `json:"latency_ms"`
	ServiceMs Latency `json:"service_ms"`
	JitterCV  float64 `json:"jitter_cv"`
	Shed      int64   `json:"shed,omitempty"` // refused for overload (Nchf 503, Gy 3004)
}

// Hist holds the encoded histograms of one operation.
type Hist struct {
	Latency string `json:"latency"`
	Service string `json:"service"`
	// Admitted is the latency of the requests not shed (absent in
	// results of older versions).
	Admitted string `json:"admitted,omitempty"`
}

// Point is one second of the time series.
type Point struct {
	engine.Tick
	CPU map[string]float64 `json:"cpu_percent,omitempty"`
	// HostBusy and HostSteal are the machine's busy and stolen CPU in the
	// second (100 = one core; see HostCPU), where the host is read.
	HostBusy  float64 `json:"host_busy_percent,omitempty"`
	HostSteal float64 `json:"host_steal_percent,omitempty"`
	// HostFreezeMs is the second's longest host freeze on any CPU: the
	// lateness of the probe's latest wake-up if it was 2 ms or more, else 0
	// (see HostFreezes); nil where the probe did not run.
	HostFreezeMs *float64 `json:"host_freeze_ms,omitempty"`
}

// Result is a whole run.
type Result struct {
	SchemaVersion int                `json:"schema_version"`
	Label         string             `json:"label,omitempty"`
	Started       time.Time          `json:"started"`
	DurationS     float64            `json:"duration_s"` // measured window
	Targets       []string           `json:"targets"`
	Proto         string             `json:"proto"`
	Shard         string             `json:"shard,omitempty"`
	Scenario      scenario.Scenario  `json:"scenario"`
	OfferedTPS    float64            `json:"offered_tps"`
	TPS           float64            `json:"tps"` // successful transactions per second
	Transactions  int64              `json:"transactions"`
	Errors        int64              `json:"errors"`
	ErrorRate     float64            `json:"error_rate"`
	ErrorClasses  map[string]int64   `json:"error_classes"`
	Offered       int64              `json:"offered"`
	Late          int64              `json:"late"`
	Dropped       int64              `json:"dropped"`
	LatencyMs     Latency            `json:"latency_ms"`
	ServiceMs     Latency            `json:"service_ms"`
	SchedLagMs    *Latency           `json:"sched_lag_ms,omitempty"` // actual − scheduled send (the scheduler's lateness)
	JitterCV      float64            `json:"jitter_cv"`
	Ops           map[string]Op      `json:"ops"`
	CPUPercent    map[string]float64 `json:"cpu_percent"`
	CPUSeconds    map[string]float64 `json:"cpu_seconds"`
	SUTCPUUsTxn   float64            `json:"sut_cpu_us_per_txn"`
	LoadgenUsTxn  float64            `json:"loadgen_cpu_us_per_txn"`
	Audit         audit.Result       `json:"audit"`
	// Interrupted says the run was cut short (a signal); InterruptedBy
	// names the signal. Its figures cover only what ran.
	Interrupted   bool   `json:"interrupted"`
	InterruptedBy string `json:"interrupted_by,omitempty"`
	// Abandoned counts requests given up without an outcome (in flight
	// or queued when the run was interrupted or its drain ended).
	Abandoned int64 `json:"abandoned"`
	// Retransmits counts the duplicates the scenario's retransmit share
	// sent (same identity as a request already sent).
	Retransmits int64 `json:"retransmits"`
	// Retried counts the retries sent for requests shed (after
	// Retry-After) or without a definitive answer (--retry-errors: same
	// identity); RetryResolved the requests a retry resolved (the audit
	// counts that answer; the rest are in audit.unresolved_requests when
	// in doubt); RetriesDropped the retries not made because the retry
	// queue was full or the run's drain bound too near.
	Retried        int64 `json:"retried"`
	RetryResolved  int64 `json:"retry_resolved"`
	RetriesDropped int64 `json:"retries_dropped"`
	// UsageLost is the reported usage no attempt delivered (refused on
	// every attempt, in doubt after the retries, or abandoned at the
	// end): the audit fails when it is not zero.
	UsageLost engine.UsageLost `json:"usage_lost"`
	// Incomplete lists what the result lacks (a CPU source lost, a shard
	// missing from a merge); empty when nothing is.
	Incomplete []string `json:"incomplete,omitempty"`
	// UnknownSubscriber counts answers saying the subscriber is unknown
	// (http_404, gy_5030); Warnings holds what a reader must not miss.
	UnknownSubscriber int64    `json:"unknown_subscriber"`
	Warnings          []string `json:"warnings,omitempty"`
	// Thresholds are the verdicts of the run's pass/fail criteria;
	// ThresholdsOK is false when any failed.
	Thresholds   []Verdict       `json:"thresholds,omitempty"`
	ThresholdsOK bool            `json:"thresholds_ok"`
	Provenance   Provenance      `json:"provenance"`
	Series       []Point         `json:"series"`
	Histograms   map[string]Hist `json:"histograms"`

	// Faults are the faults injected during the run (loadgen local --fault).
	Faults []Fault `json:"faults,omitempty"`
	// StoreFaults are the faults on nodes of a started Aerospike
	// cluster, with the store's side of them (migrations).
	StoreFaults []StoreFault `json:"store_faults,omitempty"`
	// Notifications are the CHF-initiated notifications and operator
	// calls of the run (notify.go); absent when it had none.
	Notifications *Notifications `json:"notifications,omitempty"`

	// Shed counts the requests the CHF refused for overload (Nchf 503,
	// Gy 3004), ShedShare their share of all transactions, and
	// AdmittedLatencyMs the latency (from the scheduled send) of the
	// others: the p99 that admission control bounds.
	Shed              int64    `json:"shed"`
	ShedShare         float64  `json:"shed_share"`
	AdmittedLatencyMs *Latency `json:"admitted_latency_ms,omitempty"`

	// Memory is each component's resident memory (every CPU source that
	// has one: local processes, scraped /metrics, loadgen) at the end of
	// the measured window, with its peak.
	Memory map[string]cpu.Memory `json:"memory,omitempty"`
	// Sessions are the open sessions and what they cost the loadgen.
	Sessions *Sessions `json:"sessions,omitempty"`
	// Hops is the window's latency of each hop inside the CHF, from the
	// services' own histograms (package hops); empty where no service's
	// /metrics was scraped (loadgen run without a --cpu NAME=http://…
	// /metrics source, loadgen local with TLS).
	Hops []Hop `json:"hops,omitempty"`
	// HopsNote says why Hops is missing or incomplete.
	HopsNote string `json:"hops_note,omitempty"`
	// Host is the CPU of the machine the load generator ran on over the
	// measured window (absent where /proc/stat is not readable, and in a
	// merge of shards, which ran on machines of their own).
	Host *HostCPU `json:"host_cpu,omitempty"`
	// HostFreezes is how long the host froze this machine's CPUs over the
	// measured window, seen by a SCHED_FIFO thread on each CPU that wakes
	// every 5 ms (package freeze): time the kernel's steal figure does not
	// show on a VM like this one. Absent where the probe did not run
	// (HostFreezesNote says why) and in a merge of shards.
	HostFreezes     *freeze.Summary `json:"host_freezes,omitempty"`
	HostFreezesNote string          `json:"host_freezes_note,omitempty"`
}

// HostCPU is the whole machine's CPU over the measured window, in the
// unit of CPUPercent (100 = one core busy), so that a report says whether
// the box was the limit and whether something else ran on it.
type HostCPU struct {
	Cores        int     `json:"cores"`
	BusySeconds  float64 `json:"busy_seconds"`
	StealSeconds float64 `json:"steal_seconds"`
	// Local: every CPU component is a process on this machine, so the busy
	// time they do not account for is other processes' (OtherPercent).
	Local bool `json:"local"`

	BusyPercent  float64 `json:"busy_percent"`
	IdlePercent  float64 `json:"idle_percent"` // of the whole machine (100 = every core idle)
	StealPercent float64 `json:"steal_percent"`
	// OtherPercent is the busy time no component accounts for (kernel
	// threads, interrupts on idle CPUs, other processes on the machine);
	// nil unless Local.
	OtherPercent *float64 `json:"other_percent,omitempty"`
}

// Sessions describes the data and voice sessions a run held open and the
// load generator's memory for them.
type Sessions struct {
	OpenPeak int64 `json:"open_peak"` // most open at once (per-second figures)
	OpenEnd  int64 `json:"open_end"`  // open at the end of the measured window
	// Limited counts sessions not started because max_open_sessions were
	// open (counted dropped).
	Limited         int64 `json:"limited"`
	MaxOpenSessions int   `json:"max_open_sessions"`
	// LoadgenHeapBytes is the loadgen's live heap at the end of the
	// measured window (after the last GC); BytesPerOpenSession that over
	// OpenEnd: an upper bound of the memory per open session (histograms,
	// buffers and the ledger included). FlowBytes is the engine's own
	// fixed part per session.
	LoadgenHeapBytes    int64   `json:"loadgen_heap_bytes"`
	BytesPerOpenSession float64 `json:"loadgen_bytes_per_open_session"`
	FlowBytes           int     `json:"flow_bytes"`
}

// Build makes the Result of a run. cpuSeconds is CPU spent per component
// during the measured window (LoadgenComponent for the load generator).
func Build(st *engine.Stats, sc scenario.Scenario, targets []string, proto string, cpuSeconds map[string]float64, au audit.Result, series []Point) (*Result, error) {
	r := &Result{
		SchemaVersion:  SchemaVersion,
		Started:        st.Started,
		DurationS:      st.MeasureEnd.Sub(st.MeasureStart).Seconds(),
		Targets:        targets,
		Proto:          proto,
		Scenario:       sc,
		Offered:        st.Offered,
		ErrorClasses:   st.Errors,
		Audit:          au,
		Abandoned:      st.Abandoned,
		Retransmits:    st.Retransmits,
		Retried:        st.Retried,
		RetryResolved:  st.RetryResolved,
		RetriesDropped: st.RetriesDropped,
		UsageLost:      st.UsageLost,
		Series:         series,
		CPUSeconds:     cpuSeconds,
		Ops:            map[string]Op{},
		Histograms:     map[string]Hist{},
		Notifications:  BuildNotifications(&st.Notices, nil),
	}
	if r.CPUSeconds == nil {
		r.CPUSeconds = map[string]float64{}
	}
	if lag := st.SchedLag(); lag.Count() > 0 {
		l := latencyOf(lag.Summary())
		r.SchedLagMs = &l
	}
	for i, o := range st.Ops {
		name := engine.Op(i).String()
		lat, err := o.Latency.Encode()
		if err != nil {
			return nil, err
		}
		svc, err := o.Service.Encode()
		if err != nil {
			return nil, err
		}
		adm := ""
		if o.Admitted != nil {
			if adm, err = o.Admitted.Encode(); err != nil {
				return nil, err
			}
		}
		r.Histograms[name] = Hist{Latency: lat, Service: svc, Admitted: adm}
		r.Ops[name] = Op{Count: o.Count, Errors: o.Errors, Late: o.Late, Dropped: o.Dropped, Shed: o.Shed}
	}
	if err := r.Recompute(); err != nil {
		return nil, err
	}
	return r, nil
}

// Recompute derives every summary figure (totals, rates, percentiles,
// jitter, CPU per transaction) from the per-operation counts, the encoded
// histograms, CPUSeconds and DurationS. Merging results uses it too.
func (r *Result) Recompute() error {
	all, allSvc, admitted := histogram.New(), histogram.New(), histogram.New()
	hasAdmitted := false
	r.Transactions, r.Errors, r.Late, r.Dropped, r.Shed = 0, 0, 0, 0, 0
	for name, o := range r.Ops {
		if enc := r.Histograms[name].Admitted; enc != "" {
			h, err := histogram.Decode(enc)
			if err != nil {
				return fmt.Errorf("cannot decode admitted latency histogram of %s: %w", name, err)
			}
			admitted.Merge(h)
			hasAdmitted = true
		}
		r.Shed += o.Shed
		h, err := r.decode(name)
		if err != nil {
			return err
		}
		sum, svc := h[0].Summary(), h[1].Summary()
		o.LatencyMs, o.ServiceMs, o.JitterCV = latencyOf(sum), latencyOf(svc), sum.CV
		if r.DurationS > 0 {
			o.TPS = float64(o.Count-o.Errors) / r.DurationS
		}
		r.Ops[name] = o
		all.Merge(h[0])
		allSvc.Merge(h[1])
		r.Transactions += o.Count
		r.Errors += o.Errors
		r.Late += o.Late
		r.Dropped += o.Dropped
	}
	s := all.Summary()
	r.LatencyMs, r.ServiceMs, r.JitterCV = latencyOf(s), latencyOf(allSvc.Summary()), s.CV
	r.AdmittedLatencyMs, r.ShedShare = nil, 0
	if hasAdmitted {
		l := latencyOf(admitted.Summary())
		r.AdmittedLatencyMs = &l
	}
	if r.Transactions > 0 {
		r.ShedShare = float64(r.Shed) / float64(r.Transactions)
	}
	r.TPS, r.OfferedTPS, r.ErrorRate = 0, 0, 0
	if r.DurationS > 0 {
		r.TPS = float64(r.Transactions-r.Errors) / r.DurationS
		r.OfferedTPS = float64(r.Offered) / r.DurationS
		r.CPUPercent = map[string]float64{}
		for k, v := range r.CPUSeconds {
			r.CPUPercent[k] = 100 * v / r.DurationS
		}
		if h := r.Host; h != nil && h.Cores > 0 {
			h.BusyPercent, h.StealPercent = 100*h.BusySeconds/r.DurationS, 100*h.StealSeconds/r.DurationS
			h.IdlePercent = max(0, 100-(h.BusyPercent+h.StealPercent)/float64(h.Cores))
			h.OtherPercent = nil
			if h.Local {
				other := h.BusyPercent
				for _, v := range r.CPUPercent {
					other -= v
				}
				// The two clocks differ by a few tenths of a percent: no
				// negative share.
				other = max(0, other)
				h.OtherPercent = &other
			}
		}
		if f := r.HostFreezes; f != nil && len(f.CPUs) > 0 {
			f.FrozenPercent = 100 * f.FrozenMs / (1000 * r.DurationS * float64(len(f.CPUs)))
		}
	}
	r.UnknownSubscriber = 0
	for _, c := range UnknownSubscriberClasses {
		r.UnknownSubscriber += r.ErrorClasses[c]
	}
	r.Warnings = r.Warnings[:0:0]
	if w := r.unknownSubscriberWarning(); w != "" {
		r.Warnings = append(r.Warnings, w)
	}
	if s := r.Sessions; s != nil && s.Limited > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d sessions were not started (counted dropped): %d were open, the scenario's max_open_sessions", s.Limited, s.MaxOpenSessions))
	}
	if r.UsageLost.Requests > 0 && r.Audit.Skipped {
		r.Warnings = append(r.Warnings, audit.LostReason(r.UsageLost)+": the audit, which fails on it, was skipped")
	}
	if r.Transactions > 0 {
		r.ErrorRate = float64(r.Errors) / float64(r.Transactions)
		var sut float64
		for k, v := range r.CPUSeconds {
			if k != LoadgenComponent {
				sut += v
			}
		}
		r.SUTCPUUsTxn = sut * 1e6 / float64(r.Transactions)
		r.LoadgenUsTxn = r.CPUSeconds[LoadgenComponent] * 1e6 / float64(r.Transactions)
	}
	return nil
}

// decode returns the latency and service histograms of op name.
func (r *Result) decode(name string) ([2]*histogram.Histogram, error) {
	var out [2]*histogram.Histogram
	h := r.Histograms[name]
	var err error
	if out[0], err = histogram.Decode(h.Latency); err != nil {
		return out, fmt.Errorf("cannot decode latency histogram of %s: %w", name, err)
	}
	if out[1], err = histogram.Decode(h.Service); err != nil {
		return out, fmt.Errorf("cannot decode service histogram of %s: %w", name, err)
	}
	return out, nil
}

// LatencyHistogram returns the merged latency histogram of all operations.
func (r *Result) LatencyHistogram() (*histogram.Histogram, error) {
	all := histogram.New()
	for name := range r.Histograms {
		h, err := r.decode(name)
		if err != nil {
			return nil, err
		}
		all.Merge(h[0])
	}
	return all, nil
}

// Components returns CPU component names, SUT first (sorted), loadgen last.
func (r *Result) Components() []string {
	var names []string
	for k := range r.CPUPercent {
		if k != LoadgenComponent {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if _, ok := r.CPUPercent[LoadgenComponent]; ok {
		names = append(names, LoadgenComponent)
	}
	return names
}

// WriteJSON writes r to path, indented.
func (r *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode result: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write result: %w", err)
	}
	return nil
}

// MaxFileBytes is the largest result or sweep file loadgen reads (plan,
// compare, merge, gate, the lab): far above what a run writes.
const MaxFileBytes = 256 << 20

// ReadJSON reads a result file and checks its schema version.
func ReadJSON(path string) (*Result, error) {
	b, err := readfile.Read(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("cannot read result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("cannot decode result %s: %w", path, err)
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%w %d in %s (want %d)", ErrSchema, r.SchemaVersion, path, SchemaVersion)
	}
	return &r, nil
}

// Hop is one hop's latency over the measured window, from a service's
// histogram (package hops): Service measured Hop Count times. Quantiles
// are interpolated within the histogram's buckets, except in the first
// and beyond the last finite one, where the value is that bucket's bound
// and its Bound field says which side of it the quantile lies: "below"
// or "above" (empty when interpolated).
type Hop struct {
	Service   string  `json:"service"`
	Hop       string  `json:"hop"`
	Count     int64   `json:"count"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	P999Ms    float64 `json:"p999_ms"`
	P50Bound  string  `json:"p50_bound,omitempty"`
	P99Bound  string  `json:"p99_bound,omitempty"`
	P999Bound string  `json:"p999_bound,omitempty"`
}
