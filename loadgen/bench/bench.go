// Package bench turns the measurements of one `loadgen bench` session
// into the ratios the CHF's performance is stated in: ratios
// measured side by side in one session, which hold on any host where
// absolute figures are a property of the hour.
//
// The command (cmd/loadgen bench) measures; this package only computes:
// per round and as medians with their spread, each ratio with the host's
// steal and freeze figures of the runs it comes from, and a verdict
// against its target (pass, fail, unmeasurable with the reason, or info
// for a ratio without a target). Build makes the Report, WriteMarkdown
// its table; the JSON is the Report's encoding (SchemaVersion).
package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// Kind marks a bench result file; SchemaVersion is its format's version.
const (
	Kind          = "bench"
	SchemaVersion = 1
)

// Verdicts of a ratio.
const (
	Pass         = "pass"
	Fail         = "fail"
	Unmeasurable = "unmeasurable"
	Info         = "info" // a ratio without a target: reported, not judged
)

// Names of the ratios, in the report's order.
const (
	CHFOverFloor      = "chf_over_floor"
	BusyAtKnee        = "busy_share_at_knee"
	KneeOverHighest   = "knee_over_highest_goodput"
	OverloadOverKnee  = "goodput_at_2x_knee_over_knee"
	SUTKneeOverLight  = "sut_us_at_knee_over_light"
	LoadgenOverH2load = "loadgen_cpu_over_h2load"
)

// Target is a ratio's target: Op "<=" or ">=" Value; the zero Target is
// none (the ratio is reported with the verdict info).
type Target struct {
	Op    string  `json:"op,omitempty"`
	Value float64 `json:"value,omitempty"`
}

// Targets are the project's performance targets (loadgen/docs/bench.md).
var Targets = map[string]Target{
	CHFOverFloor:     {"<=", 1.3},
	BusyAtKnee:       {">=", 0.80},
	KneeOverHighest:  {">=", 0.75},
	OverloadOverKnee: {">=", 0.90},
}

// String reads "<= 1.3", "" for none.
func (t Target) String() string {
	if t.Op == "" {
		return ""
	}
	return fmt.Sprintf("%s %g", t.Op, t.Value)
}

// Judge returns the verdict of v against t.
func (t Target) Judge(v float64) string {
	switch {
	case t.Op == "":
		return Info
	case t.Op == "<=" && v <= t.Value, t.Op == ">=" && v >= t.Value:
		return Pass
	}
	return Fail
}

// Host is what the host did during one measured window: the hypervisor's
// steal and the freeze probe's figures (nil: not measured).
type Host struct {
	Run string `json:"run"` // which measurement: "round 1 chf", "knee", ...
	// StealPercent is the steal over the window in % of one core.
	StealPercent *float64 `json:"steal_percent"`
	// FreezeWorstMs is the longest host freeze on any CPU,
	// FreezeFrozenPercent the frozen share of the window (host_freezes).
	FreezeWorstMs       *float64 `json:"freeze_worst_ms"`
	FreezeFrozenPercent *float64 `json:"freeze_frozen_percent"`
}

// Run is what the ratios need of one loadgen run (a report.Result).
type Run struct {
	OfferedTPS  float64 `json:"offered_tps"`
	TPS         float64 `json:"tps"` // goodput: successful transactions a second
	ErrorRate   float64 `json:"error_rate"`
	SUTUsTxn    float64 `json:"sut_cpu_us_per_txn"`
	LoadgenUs   float64 `json:"loadgen_cpu_us_per_txn"`
	P99Ms       float64 `json:"p99_ms"`
	Interrupted bool    `json:"interrupted,omitempty"`
	// BusyShare is the machine's busy CPU over its capacity (0..1), nil
	// where host_cpu was not read.
	BusyShare *float64 `json:"busy_share"`
	Host      Host     `json:"host"`
}

// FromResult takes what the ratios need of a run's result; nil for nil.
func FromResult(name string, r *report.Result) *Run {
	if r == nil {
		return nil
	}
	out := &Run{OfferedTPS: r.OfferedTPS, TPS: r.TPS, ErrorRate: r.ErrorRate, SUTUsTxn: r.SUTCPUUsTxn,
		LoadgenUs: r.LoadgenUsTxn, P99Ms: r.LatencyMs.P99, Interrupted: r.Interrupted, Host: Host{Run: name}}
	if h := r.Host; h != nil {
		out.Host.StealPercent = ptr(h.StealPercent)
		if h.Cores > 0 {
			out.BusyShare = ptr(h.BusyPercent / (100 * float64(h.Cores)))
		}
	}
	if f := r.HostFreezes; f != nil {
		out.Host.FreezeWorstMs, out.Host.FreezeFrozenPercent = ptr(f.WorstMs), ptr(f.FrozenPercent)
	}
	return out
}

// Floor is one round's relay floor (loadgen floor, go relays).
type Floor struct {
	RuntimeProfile string  `json:"runtime_profile"`
	UsPerExchange  float64 `json:"us_per_exchange"` // the chain's CPU per exchange
	Achieved       float64 `json:"achieved_per_s"`
	Host           Host    `json:"host"` // the floor measures steal, not freezes
}

// Round is one alternated round: the floor, then the CHF at the light
// rate. Err says why a side is missing.
type Round struct {
	Floor    *Floor `json:"floor"`
	CHF      *Run   `json:"chf"`
	FloorErr string `json:"floor_error,omitempty"`
	CHFErr   string `json:"chf_error,omitempty"`
}

// Sweep is the session's sweep: its knee, the run at the knee, and the
// run at twice the knee offered.
type Sweep struct {
	KneeTPS float64 `json:"knee_tps"` // 0: no step met the SLO
	Knee    *Run    `json:"knee"`
	// Steps is every attempt's run, for the session's highest goodput.
	Steps    []*Run `json:"steps"`
	Err      string `json:"error,omitempty"`
	Over     *Run   `json:"at_2x_knee"`
	OverErr  string `json:"at_2x_knee_error,omitempty"`
	SLO      string `json:"slo"`
	Duration string `json:"step_duration"`
}

// H2load is the comparison of the loadgen's CPU per request with
// h2load's at the same rate on the same endpoint.
type H2load struct {
	Rate      float64  `json:"rate"`
	LoadgenUs *float64 `json:"loadgen_cpu_us_per_req"`
	H2loadUs  *float64 `json:"h2load_cpu_us_per_req"`
	Note      string   `json:"note,omitempty"` // why a side is missing
}

// Input is everything a session measured.
type Input struct {
	Started   time.Time `json:"started"`
	LightTPS  float64   `json:"light_tps"`
	Rounds    []Round   `json:"rounds"`
	Sweep     Sweep     `json:"sweep"`
	H2load    H2load    `json:"h2load"`
	Interrupt string    `json:"interrupted_by,omitempty"`
}

// Ratio is one ratio of the report.
type Ratio struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// PerRound holds one value per measurement (a round, or the single
	// sweep); nil where it was unmeasurable.
	PerRound []*float64 `json:"per_round"`
	// Median of the measured values and their spread (Max - Min); nil
	// when none was measured.
	Median  *float64 `json:"median"`
	Min     *float64 `json:"min"`
	Max     *float64 `json:"max"`
	Target  Target   `json:"target"`
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason,omitempty"` // why unmeasurable, or a part missing
	// Host is the host's steal and freezes in each run the ratio uses.
	Host []Host `json:"host"`
}

// Report is bench.json.
type Report struct {
	SchemaVersion int     `json:"schema_version"`
	Kind          string  `json:"kind"`
	Input         Input   `json:"input"`
	Ratios        []Ratio `json:"ratios"`
	// HighestGoodput is the session's highest goodput with at most 1%
	// errors (the knee's denominator), and where it was reached.
	HighestGoodput   float64           `json:"highest_goodput_tps"`
	HighestGoodputAt string            `json:"highest_goodput_at,omitempty"`
	Provenance       report.Provenance `json:"provenance"`
}

// MaxErrorRate is the most errors a run may have to count for the
// session's highest goodput.
const MaxErrorRate = 0.01

// Build computes the ratios of in.
func Build(in Input, prov report.Provenance) *Report {
	r := &Report{SchemaVersion: SchemaVersion, Kind: Kind, Input: in, Provenance: prov}
	r.HighestGoodput, r.HighestGoodputAt = highest(in)
	r.Ratios = []Ratio{chfOverFloor(in), busyAtKnee(in), kneeOverHighest(in, r.HighestGoodput, r.HighestGoodputAt),
		overloadOverKnee(in), sutKneeOverLight(in), loadgenOverH2load(in)}
	return r
}

// highest is the session's highest goodput among runs with at most
// MaxErrorRate errors.
func highest(in Input) (float64, string) {
	best, at := 0.0, ""
	consider := func(name string, r *Run) {
		if r != nil && !r.Interrupted && r.ErrorRate <= MaxErrorRate && r.TPS > best {
			best, at = r.TPS, name
		}
	}
	for i, rd := range in.Rounds {
		consider(fmt.Sprintf("round %d chf", i+1), rd.CHF)
	}
	for _, s := range in.Sweep.Steps {
		if s != nil {
			consider(fmt.Sprintf("sweep step %.0f TPS", s.OfferedTPS), s)
		}
	}
	consider("2x knee", in.Sweep.Over)
	return best, at
}

// finish sets the median, spread and verdict of x from its PerRound.
func finish(x Ratio) Ratio {
	x.Target = Targets[x.Name]
	var vs []float64
	for _, v := range x.PerRound {
		if v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0) {
			vs = append(vs, *v)
		}
	}
	if len(vs) == 0 {
		x.Verdict = Unmeasurable
		if x.Reason == "" {
			x.Reason = "nothing measured"
		}
		return x
	}
	slices.Sort(vs)
	m := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	x.Median, x.Min, x.Max = &m, &vs[0], &vs[len(vs)-1]
	x.Verdict = x.Target.Judge(m)
	return x
}

// div returns a/b, or nil and why when it cannot be taken.
func div(a, b float64, what string) (*float64, string) {
	switch {
	case !(b > 0):
		return nil, what + " is zero"
	case math.IsNaN(a) || a < 0:
		return nil, what + ": numerator not measured"
	}
	return ptr(a / b), ""
}

func chfOverFloor(in Input) Ratio {
	x := Ratio{Name: CHFOverFloor, Description: fmt.Sprintf("CHF SUT CPU µs/txn at %.0f TPS / relay floor µs per exchange (go relays, same runtime profile)", in.LightTPS)}
	var why []string
	for i, rd := range in.Rounds {
		var v *float64
		reason := ""
		switch {
		case rd.Floor == nil:
			reason = "no floor: " + orUnknown(rd.FloorErr)
		case rd.CHF == nil:
			reason = "no CHF run: " + orUnknown(rd.CHFErr)
		case rd.CHF.Interrupted:
			reason = "the CHF run was interrupted"
		case rd.CHF.SUTUsTxn <= 0:
			reason = "the CHF run has no SUT CPU"
		default:
			v, reason = div(rd.CHF.SUTUsTxn, rd.Floor.UsPerExchange, "the floor")
		}
		if reason != "" {
			why = append(why, fmt.Sprintf("round %d: %s", i+1, reason))
		}
		x.PerRound = append(x.PerRound, v)
		if rd.Floor != nil {
			h := rd.Floor.Host
			h.Run = fmt.Sprintf("round %d floor", i+1)
			x.Host = append(x.Host, h)
		}
		if rd.CHF != nil {
			x.Host = append(x.Host, rd.CHF.Host)
		}
	}
	if len(in.Rounds) == 0 {
		why = append(why, "no round ran")
	}
	x.Reason = strings.Join(why, "; ")
	return finish(x)
}

// knee returns the knee's run or why there is none.
func knee(in Input) (*Run, string) {
	switch {
	case in.Sweep.Err != "" && in.Sweep.Knee == nil:
		return nil, "the sweep failed: " + in.Sweep.Err
	case in.Sweep.KneeTPS <= 0:
		return nil, "no sweep step met the SLO: no knee"
	case in.Sweep.Knee == nil:
		return nil, "the knee's run is missing"
	}
	return in.Sweep.Knee, ""
}

func single(x Ratio, v *float64, reason string, hosts ...*Run) Ratio {
	x.PerRound, x.Reason = []*float64{v}, reason
	for _, h := range hosts {
		if h != nil {
			x.Host = append(x.Host, h.Host)
		}
	}
	return finish(x)
}

func busyAtKnee(in Input) Ratio {
	x := Ratio{Name: BusyAtKnee, Description: "the machine's busy CPU share at the knee (host_cpu busy / cores)"}
	k, why := knee(in)
	if k == nil {
		return single(x, nil, why)
	}
	if k.BusyShare == nil {
		return single(x, nil, "the knee's run has no host_cpu (/proc/stat not read)", k)
	}
	return single(x, k.BusyShare, "", k)
}

func kneeOverHighest(in Input, best float64, at string) Ratio {
	x := Ratio{Name: KneeOverHighest, Description: "goodput at the knee / the session's highest goodput (runs with at most 1% errors)"}
	k, why := knee(in)
	if k == nil {
		return single(x, nil, why)
	}
	v, why := div(k.TPS, best, "the session's highest goodput")
	if v != nil {
		why = "highest at " + at
	}
	return single(x, v, why, k)
}

func overloadOverKnee(in Input) Ratio {
	x := Ratio{Name: OverloadOverKnee, Description: "goodput at 2x the knee offered / goodput at the knee"}
	k, why := knee(in)
	switch {
	case k == nil:
		return single(x, nil, why)
	case in.Sweep.Over == nil:
		return single(x, nil, "no run at 2x the knee: "+orUnknown(in.Sweep.OverErr), k)
	case in.Sweep.Over.Interrupted:
		return single(x, nil, "the run at 2x the knee was interrupted", k, in.Sweep.Over)
	}
	v, why := div(in.Sweep.Over.TPS, k.TPS, "the knee's goodput")
	return single(x, v, why, k, in.Sweep.Over)
}

func sutKneeOverLight(in Input) Ratio {
	x := Ratio{Name: SUTKneeOverLight, Description: fmt.Sprintf("SUT CPU µs/txn at the knee / at %.0f TPS (median of the rounds)", in.LightTPS)}
	k, why := knee(in)
	if k == nil {
		return single(x, nil, why)
	}
	var light []float64
	for _, rd := range in.Rounds {
		if rd.CHF != nil && !rd.CHF.Interrupted && rd.CHF.SUTUsTxn > 0 {
			light = append(light, rd.CHF.SUTUsTxn)
		}
	}
	if len(light) == 0 {
		return single(x, nil, "no CHF run at the light rate has SUT CPU", k)
	}
	slices.Sort(light)
	if k.SUTUsTxn <= 0 {
		return single(x, nil, "the knee's run has no SUT CPU", k)
	}
	v, why := div(k.SUTUsTxn, light[len(light)/2], "the light rate's SUT CPU")
	return single(x, v, why, k)
}

func loadgenOverH2load(in Input) Ratio {
	x := Ratio{Name: LoadgenOverH2load, Description: fmt.Sprintf("loadgen CPU µs per request / h2load's, balance inquiries at %.0f/s on the same CHF", in.H2load.Rate)}
	h := in.H2load
	switch {
	case h.LoadgenUs == nil || h.H2loadUs == nil:
		return single(x, nil, orUnknown(h.Note))
	}
	v, why := div(*h.LoadgenUs, *h.H2loadUs, "h2load's CPU per request")
	if why == "" {
		why = h.Note
	}
	return single(x, v, why)
}

func orUnknown(s string) string {
	if s == "" {
		return "not measured"
	}
	return s
}

func ptr(v float64) *float64 { return &v }

// WriteMarkdown writes the report's short table.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# loadgen bench: %s\n\n", r.Input.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "%d round(s) at %.0f TPS; knee %.0f TPS (%s); highest goodput %.0f TPS", len(r.Input.Rounds), r.Input.LightTPS, r.Input.Sweep.KneeTPS, r.Input.Sweep.SLO, r.HighestGoodput)
	if r.HighestGoodputAt != "" {
		fmt.Fprintf(w, " (%s)", r.HighestGoodputAt)
	}
	fmt.Fprintf(w, "; runtime profile %s\n\n", orUnknown(r.Provenance.RuntimeProfile))
	if r.Input.Interrupt != "" {
		fmt.Fprintf(w, "**Interrupted by %s**: the figures cover what ran.\n\n", r.Input.Interrupt)
	}
	fmt.Fprintln(w, "| ratio | per round | median (min–max) | target | verdict | host: steal % / worst freeze ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, x := range r.Ratios {
		var per []string
		for _, v := range x.PerRound {
			per = append(per, num(v))
		}
		med := num(x.Median)
		if x.Median != nil && len(x.PerRound) > 1 {
			med += fmt.Sprintf(" (%s–%s)", num(x.Min), num(x.Max))
		}
		verdict := x.Verdict
		if x.Reason != "" {
			verdict += ": " + x.Reason
		}
		var hosts []string
		for _, h := range x.Host {
			hosts = append(hosts, fmt.Sprintf("%s %s / %s", h.Run, num1(h.StealPercent), num1(h.FreezeWorstMs)))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", x.Name, strings.Join(per, ", "), med, orDash(x.Target.String()), cell(verdict), cell(strings.Join(hosts, "; ")))
	}
}

func num(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.3f", *v)
}

func num1(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", *v)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// cell keeps a table cell on its row.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
