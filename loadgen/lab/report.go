package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// Report is lab.json.
type Report struct {
	SchemaVersion int       `json:"schema_version"`
	Kind          string    `json:"kind"` // "lab" or "lab-shaping"
	Started       time.Time `json:"started"`
	WallS         float64   `json:"wall_s"`
	Machine       Machine   `json:"machine"`
	// PinNote says what pinned means on this machine.
	PinNote string `json:"pin_note"`
	// Store is the store's program in the "aslite" role: "aslite" or
	// "asd (Aerospike server PATH)".
	Store string `json:"store,omitempty"`
	// RuntimeProfile is the CHF services' runtime profile (Options).
	RuntimeProfile string `json:"runtime_profile"`
	// GOMAXPROCSNote says what Go sized GOMAXPROCS from and what the lab did.
	GOMAXPROCSNote string `json:"gomaxprocs_note"`
	// GoDefaultGOMAXPROCS is what an unpinned Go process picks itself.
	GoDefaultGOMAXPROCS int     `json:"go_default_gomaxprocs,omitempty"`
	RateTPS             float64 `json:"rate_tps"`
	// HostKneeTPS is the knee of the short host sweep the rate came from.
	HostKneeTPS float64 `json:"host_knee_tps,omitempty"`
	// KneeRetries is how many more times the knee sweeps ran a step that
	// missed the SLO before declaring the knee; HostKneeRetried says,
	// per step of the host sweep that needed them, what the attempts did.
	KneeRetries     int      `json:"knee_retries"`
	HostKneeRetried []string `json:"host_knee_retried,omitempty"`
	// KneeStealRetries is the knee sweeps' --steal-retries: how many
	// attempts missed under the hypervisor's steal a sweep may void.
	KneeStealRetries int     `json:"knee_steal_retries"`
	DurationS        float64 `json:"duration_s"`
	Trials           int     `json:"trials"`
	MTU              int     `json:"mtu"`
	Baseline         string  `json:"baseline"`
	Rows             []*Row  `json:"rows"`
	// Reference is the published ordering, Measured this machine's, and
	// Verdicts a sentence per step of the ordering.
	Reference []string     `json:"reference_ordering,omitempty"`
	Measured  []string     `json:"measured_ordering,omitempty"`
	Verdicts  []string     `json:"verdicts,omitempty"`
	Shaping   []ShapingRow `json:"shaping,omitempty"`
	Shaper    string       `json:"shaper,omitempty"`
	Notes     []string     `json:"notes,omitempty"`
}

// Machine describes where the lab ran.
type Machine struct {
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
}

// Row is one model × pinning: the medians over trials, each trial, and the
// ratio to the baseline.
type Row struct {
	Model string `json:"model"`
	// Datapath is emulated (the lab's namespaces) or cni (a real cluster's
	// pods, CNI plugins and kubelets: loadgen lab --cluster); ClusterModel
	// is the cluster's model of a cni row (cluster e2e --models).
	Datapath     string `json:"datapath"`
	ClusterModel string `json:"cluster_model,omitempty"`
	Emulation    string `json:"emulation"`
	Pinned       bool   `json:"pinned"`
	Unavailable  string `json:"unavailable,omitempty"`
	// CPUs is each role's CPU list ("" = all CPUs).
	CPUs       map[string]string `json:"cpus"`
	GOMAXPROCS map[string]int    `json:"gomaxprocs"`
	// Result is the loadgen result (as `loadgen run --json` writes it) of
	// the trial with the median latency p50.
	Result  json.RawMessage `json:"result,omitempty"`
	Network Network         `json:"network"`
	// Stats are the median and spread over trials of each figure.
	Stats map[string]Stat `json:"stats,omitempty"`
	// Ratio is each median figure over the baseline's.
	Ratio   map[string]float64 `json:"ratio_to_baseline,omitempty"`
	Versus  map[string]string  `json:"versus_baseline,omitempty"`
	KneeTPS *float64           `json:"knee_tps,omitempty"`
	// KneeRetried: the knee sweep's steps that needed retries (see
	// Report.KneeRetries).
	KneeRetried []string `json:"knee_retried,omitempty"`
	Trials      []Trial  `json:"trials"`
	Failures    []string `json:"failures,omitempty"`
}

// Stat is a median with the range over trials.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Trial is one run's figures (File is its full result, relative to the
// report directory).
type Trial struct {
	Trial     int                `json:"trial"`
	File      string             `json:"file"`
	TPS       float64            `json:"tps"`
	P50Ms     float64            `json:"p50_ms"`
	P90Ms     float64            `json:"p90_ms"`
	P99Ms     float64            `json:"p99_ms"`
	P999Ms    float64            `json:"p999_ms"`
	ServP50Ms float64            `json:"service_p50_ms"`
	JitterCV  float64            `json:"jitter_cv"`
	SUTUsTxn  float64            `json:"sut_cpu_us_per_txn"`
	CompUsTxn map[string]float64 `json:"cpu_us_per_txn"`
	Errors    int64              `json:"errors"`
	Late      int64              `json:"late"`
	AuditOK   bool               `json:"audit_ok"`
	// SchedLagMs is the load generator's own pacing lag, when its result
	// reports it.
	SchedLagMs map[string]float64 `json:"sched_lag_ms,omitempty"`
	Network    Network            `json:"network"`
	raw        json.RawMessage
}

// read fills t from a `loadgen run --json` file.
func (t *Trial) read(file string) error {
	b, err := readfile.Read(file, report.MaxFileBytes)
	if err != nil {
		return fmt.Errorf("cannot read the run result: %w", err)
	}
	type lat struct {
		P50  float64 `json:"p50"`
		P90  float64 `json:"p90"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p999"`
	}
	var r struct {
		TPS          float64            `json:"tps"`
		Transactions int64              `json:"transactions"`
		Errors       int64              `json:"errors"`
		Late         int64              `json:"late"`
		Latency      lat                `json:"latency_ms"`
		Service      lat                `json:"service_ms"`
		JitterCV     float64            `json:"jitter_cv"`
		SUT          float64            `json:"sut_cpu_us_per_txn"`
		CPUSeconds   map[string]float64 `json:"cpu_seconds"`
		SchedLag     map[string]float64 `json:"sched_lag_ms"`
		Audit        struct {
			OK bool `json:"ok"`
		} `json:"audit"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("cannot decode the run result %s: %w", file, err)
	}
	t.TPS, t.Errors, t.Late, t.JitterCV, t.SUTUsTxn, t.AuditOK = r.TPS, r.Errors, r.Late, r.JitterCV, r.SUT, r.Audit.OK
	t.P50Ms, t.P90Ms, t.P99Ms, t.P999Ms, t.ServP50Ms = r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.P999, r.Service.P50
	t.SchedLagMs = r.SchedLag
	t.CompUsTxn = map[string]float64{}
	if r.Transactions > 0 {
		for k, s := range r.CPUSeconds {
			t.CompUsTxn[k] = s / float64(r.Transactions) * 1e6
		}
	}
	t.raw = b
	return nil
}

// figures are the per-trial values summarised (name, value, higher is better).
var figures = []struct {
	name   string
	get    func(*Trial) float64
	higher bool
}{
	{"tps", func(t *Trial) float64 { return t.TPS }, true},
	{"p50_ms", func(t *Trial) float64 { return t.P50Ms }, false},
	{"p90_ms", func(t *Trial) float64 { return t.P90Ms }, false},
	{"p99_ms", func(t *Trial) float64 { return t.P99Ms }, false},
	{"p999_ms", func(t *Trial) float64 { return t.P999Ms }, false},
	{"service_p50_ms", func(t *Trial) float64 { return t.ServP50Ms }, false},
	{"jitter_cv", func(t *Trial) float64 { return t.JitterCV }, false},
	{"sut_cpu_us_per_txn", func(t *Trial) float64 { return t.SUTUsTxn }, false},
	{"errors", func(t *Trial) float64 { return float64(t.Errors) }, false},
	{"iperf3_gbps_single", func(t *Trial) float64 { return t.Network.IPerf3Gbps.Single }, true},
	{"iperf3_gbps_streams4", func(t *Trial) float64 { return t.Network.IPerf3Gbps.Multi }, true},
	{"iperf3_retransmits_single", func(t *Trial) float64 { return t.Network.Retransmits.Single }, false},
	{"rtt_us_median", func(t *Trial) float64 { return t.Network.RTTUs.MedianUs }, false},
	{"rtt_us_p99", func(t *Trial) float64 { return t.Network.RTTUs.P99Us }, false},
	{"sched_lag_p50_ms", func(t *Trial) float64 { return t.SchedLagMs["p50"] }, false},
	{"sched_lag_p99_ms", func(t *Trial) float64 { return t.SchedLagMs["p99"] }, false},
}

func (l *Lab) newReport() *Report {
	kind := "lab"
	if l.o.Experiment == "shaping" {
		kind = "lab-shaping"
	}
	return &Report{
		SchemaVersion: 1, Kind: kind, Started: time.Now().UTC(),
		Machine:   Machine{CPUs: len(l.o.CPUs), Kernel: kernel(), Go: runtime.Version()},
		PinNote:   PinNote(l.o.CPUs),
		Store:     l.storeNote(),
		RateTPS:   l.o.Rate,
		DurationS: l.o.Duration.Seconds(), Trials: l.o.Trials, MTU: l.o.MTU,
		Baseline: rowKey(l.o.Baseline, l.o.BaselinePinned), KneeRetries: l.retries(), KneeStealRetries: l.stealRetries(),
		RuntimeProfile: l.o.RuntimeProfile.String(),
	}
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// finish computes medians, spreads, ratios, the ordering and the notes.
func (r *Report) finish(o Options) {
	r.WallS = time.Since(r.Started).Seconds()
	var base *Row
	for _, row := range r.Rows {
		row.summarise()
		if rowKey(row.Model, row.Pinned) == r.Baseline && row.Datapath != DatapathCNI && len(row.Trials) > 0 {
			base = row
		}
	}
	r.GOMAXPROCSNote = gomaxprocsNote(r.Rows, o.MatchGOMAXPROCS, r.GoDefaultGOMAXPROCS)
	if base != nil {
		for _, row := range r.Rows {
			if len(row.Trials) == 0 || row.Datapath == DatapathCNI {
				continue
			}
			row.Ratio, row.Versus = map[string]float64{}, map[string]string{}
			for _, f := range figures {
				a, b := row.Stats[f.name], base.Stats[f.name]
				if b.Median != 0 {
					row.Ratio[f.name] = a.Median / b.Median
				}
				row.Versus[f.name] = versus(a, b, f.higher)
			}
		}
	} else if r.Kind == "lab" {
		r.Notes = append(r.Notes, fmt.Sprintf("the baseline %s has no measured trial: no ratios", r.Baseline))
	}
	for _, row := range r.Rows {
		// a cni row's ratios are to its emulated counterpart
		if em := r.find(row.Model, row.Pinned, DatapathEmulated); row.Datapath == DatapathCNI && em != nil && len(row.Trials) > 0 {
			row.Ratio, row.Versus = map[string]float64{}, map[string]string{}
			for _, f := range figures {
				a, b := row.Stats[f.name], em.Stats[f.name]
				if b.Median != 0 {
					row.Ratio[f.name] = a.Median / b.Median
				}
				row.Versus[f.name] = versus(a, b, f.higher)
			}
		}
	}
	if r.Kind == "lab" {
		r.ordering(DatapathEmulated)
		if r.has(DatapathCNI) {
			r.ordering(DatapathCNI)
			r.cniFindings()
		}
	}
	if o.MTU == 9000 {
		r.Notes = append(r.Notes, "MTU 9000 on the fabric, the node uplinks and the pod interfaces (VXLAN pods 8950, IP-in-IP pods 8980)")
	}
}

func (row *Row) summarise() {
	if len(row.Trials) == 0 {
		return
	}
	row.Stats = map[string]Stat{}
	for _, f := range figures {
		xs := make([]float64, len(row.Trials))
		for i := range row.Trials {
			xs[i] = f.get(&row.Trials[i])
		}
		row.Stats[f.name] = Stat{Median: report.Median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
	}
	for comp := range row.Trials[0].CompUsTxn {
		xs := make([]float64, len(row.Trials))
		for i := range row.Trials {
			xs[i] = row.Trials[i].CompUsTxn[comp]
		}
		row.Stats["cpu_us_per_txn_"+comp] = Stat{Median: report.Median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
	}
	// The result kept is the trial with the median p50.
	idx := make([]int, len(row.Trials))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmpFloat(row.Trials[a].P50Ms, row.Trials[b].P50Ms)
	})
	row.Result = row.Trials[idx[len(idx)/2]].raw
	net := row.Trials[idx[len(idx)/2]].Network
	net.IPerf3Gbps = Pair{row.Stats["iperf3_gbps_single"].Median, row.Stats["iperf3_gbps_streams4"].Median}
	net.RTTUs.MedianUs, net.RTTUs.P99Us = row.Stats["rtt_us_median"].Median, row.Stats["rtt_us_p99"].Median
	row.Network = net
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// versus says how a compares with b: "no measurable difference" when the
// trial ranges overlap, else better or worse by the median ratio.
// versusSpread is versus for a sentence: a difference the trial ranges
// hide is given with the ranges.
func versusSpread(a, b Stat, higherBetter bool) string {
	v := versus(a, b, higherBetter)
	if strings.HasPrefix(v, "no measurable") && (a.Min != a.Max || b.Min != b.Max) {
		v += fmt.Sprintf(" (ranges %.3g–%.3g vs %.3g–%.3g overlap)", a.Min, a.Max, b.Min, b.Max)
	}
	return v
}

func versus(a, b Stat, higherBetter bool) string {
	if a.Max >= b.Min && b.Max >= a.Min {
		return "no measurable difference"
	}
	better := a.Median > b.Median == higherBetter
	pct := 0.0
	if b.Median != 0 {
		pct = (a.Median/b.Median - 1) * 100
	}
	word := "worse"
	if better {
		word = "better"
	}
	return fmt.Sprintf("%s (%+.1f%%)", word, pct)
}

func gomaxprocsNote(rows []*Row, match bool, goDefault int) string {
	var pinned, unpinned map[string]int
	for _, r := range rows {
		if r.GOMAXPROCS == nil {
			continue
		}
		if r.Pinned && pinned == nil {
			pinned = r.GOMAXPROCS
		}
		if !r.Pinned && unpinned == nil {
			unpinned = r.GOMAXPROCS
		}
	}
	f := func(m map[string]int) string {
		if m == nil {
			return "not measured"
		}
		var s []string
		for _, r := range []string{"cgw", "ocp", "abm", "aslite"} {
			s = append(s, fmt.Sprintf("%s %d", r, m[r]))
		}
		return strings.Join(s, ", ")
	}
	note := fmt.Sprintf("Go sizes GOMAXPROCS from the CPU affinity mask at start-up (measured: a Go process started as each service is reports pinned: %s; unpinned: %s", f(pinned), f(unpinned))
	if goDefault > 0 {
		note += fmt.Sprintf("; unpinned without GOMAXPROCS set: %d", goDefault)
	}
	note += ")."
	if match {
		note += " The unpinned runs set GOMAXPROCS of each service to its pinned value, so pinning changes only where the threads may run, not how many run Go code (--match-gomaxprocs=false for Go's default)."
	} else {
		note += " The unpinned runs keep Go's default (one per CPU), so pinning also changes GOMAXPROCS: part of the pinning effect is that."
	}
	return note
}

// ordering compares the reference deployment's published TPS ordering
// with this machine's.
func (r *Report) ordering(datapath string) {
	calico := "calico-noencap"
	find := func(model string, pinned bool) *Row { return r.find(model, pinned, datapath) }
	if find(calico, true) == nil {
		calico = "calico-vxlan"
	}
	if datapath == DatapathCNI {
		calico = "bridge" // the cluster's routed pod network (Calico without encapsulation's datapath)
	}
	tag := func(s string) string {
		if datapath == DatapathCNI {
			return "cni: " + s
		}
		return s
	}
	ref := []struct {
		model  string
		pinned bool
	}{{"sriov", true}, {"baremetal", true}, {calico, true}, {"baremetal", false}}
	r.Reference = append(r.Reference, tag("sriov/pinned > baremetal/pinned > "+calico+"/pinned > baremetal/unpinned on TPS (latency differences small)"))
	var rows []*Row
	for _, e := range ref {
		if row := find(e.model, e.pinned); row != nil {
			rows = append(rows, row)
		}
	}
	if len(rows) < 2 {
		r.Verdicts = append(r.Verdicts, tag("too few of sriov/pinned, baremetal/pinned, "+calico+"/pinned, baremetal/unpinned were measured to compare the ordering"))
		return
	}
	// At a fixed rate below capacity every model carries the offered TPS,
	// so capacity is read from the knee when swept, else from the CPU
	// per transaction (less CPU per transaction = more TPS at the knee).
	metric, label, higher := "sut_cpu_us_per_txn", "SUT CPU µs/txn (lower = more capacity; at a fixed rate below capacity the TPS equals the offered rate)", false
	value := func(row *Row) Stat { return row.Stats[metric] }
	if rows[0].KneeTPS != nil {
		metric, label, higher = "knee_tps", "the knee TPS of each sweep", true
		value = func(row *Row) Stat {
			if row.KneeTPS == nil {
				return Stat{}
			}
			return Stat{*row.KneeTPS, *row.KneeTPS, *row.KneeTPS}
		}
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b *Row) int {
		c := cmpFloat(value(a).Median, value(b).Median)
		if higher {
			return -c
		}
		return c
	})
	var names []string
	for _, row := range sorted {
		names = append(names, fmt.Sprintf("%s (%.4g)", rowKey(row.Model, row.Pinned), value(row).Median))
	}
	r.Measured = append(r.Measured, tag(strings.Join(names, " > ")+" by "+label))
	for i := 0; i+1 < len(rows); i++ {
		a, b := rows[i], rows[i+1]
		va, vb := value(a), value(b)
		ka, kb := rowKey(a.Model, a.Pinned), rowKey(b.Model, b.Pinned)
		switch v := versus(va, vb, higher); {
		case v == "no measurable difference":
			r.Verdicts = append(r.Verdicts, tag(fmt.Sprintf("%s vs %s: no measurable difference on this machine (the trial ranges overlap); the reference puts %s ahead", ka, kb, ka)))
		case strings.HasPrefix(v, "better"):
			r.Verdicts = append(r.Verdicts, tag(fmt.Sprintf("%s ahead of %s: agrees with the reference (%s)", ka, kb, v)))
		default:
			r.Verdicts = append(r.Verdicts, tag(fmt.Sprintf("%s behind %s: disagrees with the reference (%s)", ka, kb, v)))
		}
	}
	// Latency: the reference says small differences.
	var lat []string
	for _, row := range rows {
		lat = append(lat, fmt.Sprintf("%s %.3f", rowKey(row.Model, row.Pinned), row.Stats["p50_ms"].Median))
	}
	r.Verdicts = append(r.Verdicts, tag("latency p50 (ms): "+strings.Join(lat, ", ")+"; the reference reports small latency differences"))
}

// Datapaths of a row.
const (
	DatapathEmulated = "emulated"
	DatapathCNI      = "cni"
)

// find returns the measured row of model and pinning on datapath.
func (r *Report) find(model string, pinned bool, datapath string) *Row {
	for _, row := range r.Rows {
		if row.Model == model && row.Pinned == pinned && row.datapath() == datapath && len(row.Trials) > 0 {
			return row
		}
	}
	return nil
}

// has says whether some row of datapath was measured.
func (r *Report) has(datapath string) bool {
	for _, row := range r.Rows {
		if row.datapath() == datapath && len(row.Trials) > 0 {
			return true
		}
	}
	return false
}

// datapath is the row's datapath (a report written before cni rows
// existed has none: emulated).
func (row *Row) datapath() string {
	if row.Datapath == "" {
		return DatapathEmulated
	}
	return row.Datapath
}

// datapathLabel is the row's datapath as the tables show it: a cni row
// names its cluster model, e.g. "cni (pod-network)".
func (row *Row) datapathLabel() string {
	if row.ClusterModel != "" {
		return row.datapath() + " (" + row.ClusterModel + ")"
	}
	return row.datapath()
}

// cniFindings adds a sentence per seed finding the cluster's rows can
// speak to: each real datapath against its emulation, and no
// encapsulation against the host's network (bare metal). A difference
// inside the trial spread is said to be none, with the spread.
func (r *Report) cniFindings() {
	for _, row := range r.Rows {
		if row.Datapath != DatapathCNI || len(row.Trials) == 0 {
			continue
		}
		em := r.find(row.Model, row.Pinned, DatapathEmulated)
		if em == nil {
			r.Verdicts = append(r.Verdicts, fmt.Sprintf("cni: %s/%s has no emulated counterpart in this run (add %s to --models)", row.Model, pinName(row.Pinned), row.Model))
			continue
		}
		r.Verdicts = append(r.Verdicts, fmt.Sprintf("cni vs emulation, %s/%s: p50 %s vs %s ms (%s), SUT %s vs %s µs/txn (%s), probe RTT p50 %s vs %s µs",
			row.Model, pinName(row.Pinned), cell(row.Stats["p50_ms"], 3), cell(em.Stats["p50_ms"], 3), row.Versus["p50_ms"],
			cell(row.Stats["sut_cpu_us_per_txn"], 0), cell(em.Stats["sut_cpu_us_per_txn"], 0), row.Versus["sut_cpu_us_per_txn"],
			cell(row.Stats["rtt_us_median"], 0), cell(em.Stats["rtt_us_median"], 0)))
	}
	for _, pinned := range []bool{false, true} {
		host := r.find("baremetal", pinned, DatapathCNI)
		if host == nil {
			continue
		}
		for _, e := range []struct{ model, what, ref string }{
			{"bridge", "no encapsulation (routed pod network)", "the reference finds no encapsulation ≈ host"},
			{"calico-vxlan", "the overlay (flannel VXLAN)", "the reference finds the overlay's latency and jitter above the host's and encapsulation costing bandwidth"},
		} {
			pod := r.find(e.model, pinned, DatapathCNI)
			if pod == nil {
				continue
			}
			r.Verdicts = append(r.Verdicts, fmt.Sprintf("cni, %s: %s vs the host's network: p50 %s (%s vs %s ms), jitter CV %s (%s vs %s), probe RTT p50 %s (%s vs %s µs), iperf3 1 stream %s (%s vs %s Gbit/s); %s",
				pinName(pinned), e.what, versusSpread(pod.Stats["p50_ms"], host.Stats["p50_ms"], false), cell(pod.Stats["p50_ms"], 3), cell(host.Stats["p50_ms"], 3),
				versusSpread(pod.Stats["jitter_cv"], host.Stats["jitter_cv"], false), cell(pod.Stats["jitter_cv"], 3), cell(host.Stats["jitter_cv"], 3),
				versusSpread(pod.Stats["rtt_us_median"], host.Stats["rtt_us_median"], false), cell(pod.Stats["rtt_us_median"], 0), cell(host.Stats["rtt_us_median"], 0),
				versusSpread(pod.Stats["iperf3_gbps_single"], host.Stats["iperf3_gbps_single"], true), cell(pod.Stats["iperf3_gbps_single"], 2), cell(host.Stats["iperf3_gbps_single"], 2), e.ref))
		}
	}
	r.Notes = append(r.Notes, "cni rows: SUT µs/txn is the CGW's, OCP's and ABM's CPU (their /metrics) from before the loadgen Job starts to after it ends, its start delay and ramp included, over the run's transactions; at low rates it reads higher than the emulated rows' (measured over the run alone): compare cni rows with each other, and latency and the network across datapaths")
	if r.find("calico-vxlan", false, DatapathCNI) == nil && r.find("calico-vxlan", true, DatapathCNI) == nil {
		r.Notes = append(r.Notes, "cni: no overlay model ran on the cluster, so overlay vs host latency, jitter CV and bandwidth are compared on the emulated rows only")
	}
}

// Write writes lab.json, lab.md and lab.html into dir.
func (r *Report) Write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode lab.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lab.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write lab.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lab.md"), []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("cannot write lab.md: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lab.html"), []byte(r.HTML()), 0o644); err != nil {
		return fmt.Errorf("cannot write lab.html: %w", err)
	}
	return nil
}

// cell formats a stat as "median (min–max)" with prec decimals.
func cell(s Stat, prec int) string {
	if s.Min == s.Max {
		return fmt.Sprintf("%.*f", prec, s.Median)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.Median, prec, s.Min, prec, s.Max)
}

// table returns the header and the rows of the comparison table.
func (r *Report) table() ([]string, [][]string) {
	head := []string{"model", "datapath", "pinning", "TPS", "p50 ms", "p99 ms", "jitter CV", "SUT µs/txn", "iperf3 Gbit/s 1 / 4 streams", "probe RTT µs p50 / p99", "sched lag ms p50 / p99", "errors", "audit", "vs " + r.Baseline + " (p50, SUT; a cni row: vs its emulation)"}
	var rows [][]string
	for _, row := range r.ordered() {
		name, dp := row.Model, row.datapathLabel()
		if row.Unavailable != "" {
			rows = append(rows, []string{name, dp, pinName(row.Pinned), row.Unavailable, "", "", "", "", "", "", "", "", "", ""})
			continue
		}
		if len(row.Trials) == 0 {
			rows = append(rows, []string{name, dp, pinName(row.Pinned), "not measured: " + strings.Join(row.Failures, "; "), "", "", "", "", "", "", "", "", "", ""})
			continue
		}
		s := row.Stats
		audit := "ok"
		for _, t := range row.Trials {
			if !t.AuditOK {
				audit = "FAILED"
			}
		}
		iperf := row.Network.Missing
		if iperf == "" {
			iperf = cell(s["iperf3_gbps_single"], 1) + " / " + cell(s["iperf3_gbps_streams4"], 1)
		}
		lag := "not reported"
		if row.Trials[0].SchedLagMs != nil {
			lag = cell(s["sched_lag_p50_ms"], 3) + " / " + cell(s["sched_lag_p99_ms"], 3)
		}
		vs := ""
		if row.Ratio != nil {
			vs = fmt.Sprintf("%.3f× %s; %.3f× %s", row.Ratio["p50_ms"], row.Versus["p50_ms"], row.Ratio["sut_cpu_us_per_txn"], row.Versus["sut_cpu_us_per_txn"])
		}
		tps := cell(s["tps"], 0)
		if row.KneeTPS != nil {
			tps += fmt.Sprintf(" (knee %.0f)", *row.KneeTPS)
		}
		rows = append(rows, []string{name, dp, pinName(row.Pinned), tps, cell(s["p50_ms"], 3), cell(s["p99_ms"], 3), cell(s["jitter_cv"], 3),
			cell(s["sut_cpu_us_per_txn"], 0), iperf, cell(s["rtt_us_median"], 0) + " / " + cell(s["rtt_us_p99"], 0), lag,
			cell(s["errors"], 0), audit, vs})
	}
	return head, rows
}

// ordered is the rows with each model's cni rows right after its emulated
// ones, so that the two datapaths of a model sit side by side.
func (r *Report) ordered() []*Row {
	var out []*Row
	for _, row := range r.Rows {
		if row.datapath() == DatapathCNI {
			continue
		}
		out = append(out, row)
		for _, c := range r.Rows {
			if c.datapath() == DatapathCNI && c.Model == row.Model && c.Pinned == row.Pinned {
				out = append(out, c)
			}
		}
	}
	for _, c := range r.Rows { // cni rows without an emulated row
		if c.datapath() == DatapathCNI && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// kneeNote says how the knee sweeps treat a step that missed the SLO
// and which steps needed it ("" when no sweep ran).
func (r *Report) kneeNote() string {
	var swept bool
	var notes []string
	if r.HostKneeTPS > 0 || len(r.HostKneeRetried) > 0 {
		swept = true
		for _, n := range r.HostKneeRetried {
			notes = append(notes, "host sweep: "+n)
		}
	}
	for _, row := range r.Rows {
		if row.KneeTPS != nil {
			swept = true
		}
		for _, n := range row.KneeRetried {
			notes = append(notes, fmt.Sprintf("%s %s sweep: %s", row.Model, pinName(row.Pinned), n))
		}
	}
	if !swept {
		return ""
	}
	s := fmt.Sprintf("Knee sweeps run a step that misses the SLO up to %d more times before declaring the knee", r.KneeRetries)
	if r.KneeRetries == 0 {
		s = "Knee sweeps declare the knee at the first step that misses the SLO (no retries: too few accounts for a slice per attempt)"
	}
	if r.KneeStealRetries > 0 {
		s += fmt.Sprintf(" (up to %d attempts a sweep that missed while the hypervisor stole more than loadgen sweep's --max-steal in one second are void and run again)", r.KneeStealRetries)
	}
	if len(notes) == 0 {
		return s + "; no step needed a retry"
	}
	return s + "; retried or void: " + strings.Join(notes, "; ")
}

// Markdown renders the report as lab.md.
func (r *Report) Markdown() string {
	var b strings.Builder
	if r.Kind == "lab-shaping" {
		fmt.Fprintf(&b, "# Lab: shaping vs policing, cubic vs bbr (emulation)\n\n")
	} else {
		fmt.Fprintf(&b, "# Lab: network models compared (emulations on one box)\n\n")
	}
	fmt.Fprintf(&b, "Every model below is an emulation in network namespaces on one machine (%d CPUs, kernel %s, %s), not a cluster: compare ratios measured side by side, not absolute figures. This machine is shared and busy: figures are noisy.\n\n", r.Machine.CPUs, r.Machine.Kernel, r.Machine.Go)
	fmt.Fprintf(&b, "- Fixed rate: %.0f TPS", r.RateTPS)
	if r.HostKneeTPS > 0 {
		fmt.Fprintf(&b, " (50%% of the host model's knee, %.0f TPS, found by a short sweep)", r.HostKneeTPS)
	}
	if k := r.kneeNote(); k != "" {
		fmt.Fprintf(&b, ". %s", k)
	}
	fmt.Fprintf(&b, "; %.0f s measured per run; %d trial(s) per row, interleaved across models; MTU %d; wall time %.0f s.\n", r.DurationS, r.Trials, r.MTU, r.WallS)
	fmt.Fprintf(&b, "- Pinning: %s\n- GOMAXPROCS: %s\n", r.PinNote, r.GOMAXPROCSNote)
	if r.Store != "" {
		fmt.Fprintf(&b, "- Store (the aslite role's process): %s\n", r.Store)
	}
	if r.RuntimeProfile != "" {
		fmt.Fprintf(&b, "- CHF runtime profile: %s\n", r.RuntimeProfile)
	}
	fmt.Fprintf(&b, "- Cells: median over trials, (min–max) when they differ; a difference to the baseline inside the trial ranges is \"no measurable difference\". Network columns: iperf3 TCP client pod → cgw pod, and a 64-byte TCP request/response probe on the same path.\n\n")
	if r.Kind == "lab" {
		head, rows := r.table()
		mdTable(&b, head, rows)
		if len(r.Reference) > 0 {
			fmt.Fprintf(&b, "\n## Ordering\n\n- Reference deployment (published): %s\n", r.Reference[0])
			for _, m := range r.Measured {
				fmt.Fprintf(&b, "- This machine: %s\n", m)
			}
			for _, v := range r.Verdicts {
				fmt.Fprintf(&b, "- %s\n", v)
			}
		}
		fmt.Fprintf(&b, "\n## Per-component CPU (µs/txn, median)\n\n")
		comps := []string{"cgw", "ocp", "abm", "aslite"}
		var crow [][]string
		for _, row := range r.ordered() {
			if len(row.Trials) == 0 {
				continue
			}
			c := []string{row.Model, row.datapathLabel(), pinName(row.Pinned)}
			for _, k := range comps {
				// What a row did not measure is n/a, not 0 (a cni
				// row's store exports no /metrics).
				if st, ok := row.Stats["cpu_us_per_txn_"+k]; ok {
					c = append(c, cell(st, 0))
				} else {
					c = append(c, "n/a")
				}
			}
			gm := []string{}
			for _, k := range comps {
				if g, ok := row.GOMAXPROCS[k]; ok {
					gm = append(gm, fmt.Sprintf("%d", g))
				} else {
					gm = append(gm, "n/a")
				}
			}
			c = append(c, strings.Join(gm, "/"))
			crow = append(crow, c)
		}
		mdTable(&b, append([]string{"model", "datapath", "pinning"}, append(comps, "GOMAXPROCS cgw/ocp/abm/aslite")...), crow)
	}
	if len(r.Shaping) > 0 {
		fmt.Fprintf(&b, "\n## Shaping experiment\n\n%s\n\n", r.Shaper)
		head, rows := shapingTable(r.Shaping)
		mdTable(&b, head, rows)
	}
	fmt.Fprintf(&b, "\n## Models\n\n")
	seen := map[string]bool{}
	for _, row := range r.Rows {
		if !seen[row.Model] {
			seen[row.Model] = true
			fmt.Fprintf(&b, "- `%s`: %s\n", row.Model, row.Emulation)
		}
	}
	if r.Kind == "lab-shaping" {
		fmt.Fprintf(&b, "- `baremetal`: %s\n", Describe["baremetal"])
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNote: %s\n", n)
	}
	for _, row := range r.Rows {
		for _, f := range row.Failures {
			fmt.Fprintf(&b, "\nFailure: %s %s: %s\n", row.Model, pinName(row.Pinned), f)
		}
	}
	return b.String()
}

func mdTable(b *strings.Builder, head []string, rows [][]string) {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	fmt.Fprintf(b, "| %s |\n|", strings.Join(head, " | "))
	for range head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		for i := range r {
			r[i] = esc(r[i])
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
}
