// Package compare puts load results side by side (the network model table
// of the reference deployment): TPS, latency percentiles, jitter, CPU per
// component and SUT CPU per transaction, each with its ratio to a baseline
// run, as Markdown and as an HTML page with grouped bar charts. Sweeps
// compare by their knee (the step at the knee is the row) and their
// curves.
package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"

	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/sweep"
)

// ErrInput is returned for inputs that cannot be compared.
var ErrInput = errors.New("compare: bad input")

// Run is one column of the comparison.
type Run struct {
	Label  string
	Result *report.Result // the run, or the sweep's knee step
	Sweep  *sweep.Result  // set for sweeps
}

// Load reads a run or sweep result file.
func Load(path, label string) (Run, error) {
	b, err := readfile.Read(path, report.MaxFileBytes)
	if err != nil {
		return Run{}, fmt.Errorf("cannot read %s: %w", path, err)
	}
	var probe struct {
		SchemaVersion int    `json:"schema_version"`
		Kind          string `json:"kind"`
		Label         string `json:"label"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return Run{}, fmt.Errorf("cannot decode %s: %w", path, err)
	}
	if probe.SchemaVersion != report.SchemaVersion {
		return Run{}, fmt.Errorf("%w %d in %s", report.ErrSchema, probe.SchemaVersion, path)
	}
	if label == "" {
		label = probe.Label
	}
	if label == "" {
		label = path
	}
	if probe.Kind == sweep.Kind {
		var s sweep.Result
		if err := json.Unmarshal(b, &s); err != nil {
			return Run{}, fmt.Errorf("cannot decode sweep %s: %w", path, err)
		}
		k := s.Knee()
		if k == nil {
			return Run{}, fmt.Errorf("%w: sweep %s has no step that met its SLO", ErrInput, path)
		}
		return Run{Label: label, Result: k.Result, Sweep: &s}, nil
	}
	var r report.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Run{}, fmt.Errorf("cannot decode %s: %w", path, err)
	}
	return Run{Label: label, Result: &r}, nil
}

// Table is the comparison.
type Table struct {
	Runs     []Run
	Baseline int
}

// New checks the baseline index.
func New(runs []Run, baseline int) (*Table, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("%w: nothing to compare", ErrInput)
	}
	if baseline < 0 || baseline >= len(runs) {
		return nil, fmt.Errorf("%w: baseline %d out of range 0..%d", ErrInput, baseline, len(runs)-1)
	}
	return &Table{Runs: runs, Baseline: baseline}, nil
}

// FindBaseline resolves a --baseline value: a run's label (exactly),
// else a 0-based index.
func FindBaseline(runs []Run, sel string) (int, error) {
	if sel == "" {
		return 0, nil
	}
	var labels []string
	for i, r := range runs {
		if r.Label == sel {
			return i, nil
		}
		labels = append(labels, fmt.Sprintf("%d=%q", i, r.Label))
	}
	if i, err := strconv.Atoi(sel); err == nil && i >= 0 && i < len(runs) {
		return i, nil
	}
	return 0, fmt.Errorf("%w: baseline %q is neither a label nor an index (0-based) of the runs: %s", ErrInput, sel, strings.Join(labels, ", "))
}

// components returns every CPU component of every run.
func (t *Table) components() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range t.Runs {
		for _, c := range r.Result.Components() {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i] == report.LoadgenComponent) != (out[j] == report.LoadgenComponent) {
			return out[j] == report.LoadgenComponent
		}
		return out[i] < out[j]
	})
	return out
}

// Figure is one value of a run, or none (the run did not measure it).
type Figure struct {
	V  float64
	OK bool
}

// Figures a comparison reads: each says whether the run measured it.
func offered(r *report.Result) Figure { return Figure{r.OfferedTPS, r.OfferedTPS > 0} }
func tps(r *report.Result) Figure     { return Figure{r.TPS, r.DurationS > 0} }
func answered(r *report.Result) bool  { return r.Transactions > r.Errors }
func p50(r *report.Result) Figure     { return Figure{r.LatencyMs.P50, answered(r)} }
func p99(r *report.Result) Figure     { return Figure{r.LatencyMs.P99, answered(r)} }
func p999(r *report.Result) Figure    { return Figure{r.LatencyMs.P999, answered(r)} }
func jitter(r *report.Result) Figure  { return Figure{r.JitterCV, answered(r)} }
func sutUs(r *report.Result) Figure {
	for k := range r.CPUSeconds {
		if k != report.LoadgenComponent {
			return Figure{r.SUTCPUUsTxn, r.Transactions > 0}
		}
	}
	for k := range r.CPUPercent {
		if k != report.LoadgenComponent {
			return Figure{r.SUTCPUUsTxn, r.Transactions > 0}
		}
	}
	return Figure{}
}
func cpuOf(r *report.Result, c string) Figure {
	v, ok := r.CPUPercent[c]
	return Figure{v, ok}
}

// Ratio returns v/base, and false when either is missing or base is 0:
// no ratio is computed against a figure that was not measured.
func Ratio(v, base Figure) (float64, bool) {
	if !v.OK || !base.OK || base.V == 0 {
		return 0, false
	}
	return v.V / base.V, true
}

// format writes a figure with format, or n/a.
func (f Figure) format(format string) string {
	if !f.OK {
		return "n/a"
	}
	return fmt.Sprintf(format, f.V)
}

func ratio(v, base Figure) string {
	x, ok := Ratio(v, base)
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", x)
}

// WriteMarkdown writes the side-by-side table: the same columns as the
// lab's (label, offered, achieved TPS, p50, p99, jitter CV, SUT µs/txn,
// per-component CPU) with ratios to the baseline. A figure a run did not
// measure is n/a, and so is every ratio against it.
func (t *Table) WriteMarkdown(w io.Writer) {
	b := t.Runs[t.Baseline].Result
	fmt.Fprintf(w, "# loadgen comparison\n\nBaseline: %s. Ratios are run / baseline; n/a: not measured.\n\n", t.Runs[t.Baseline].Label)
	if note := t.offeredNote(); note != "" {
		fmt.Fprintf(w, "**WARNING**: %s\n\n", note)
	}
	if note := t.hostNote(); note != "" {
		fmt.Fprintf(w, "Host check: %s\n\n", note)
	}
	comps := t.components()
	fmt.Fprintf(w, "| run | offered TPS | TPS | ×TPS | p50 ms | p99 ms | ×p99 | p99.9 ms | jitter CV | ×jitter | SUT µs/txn | ×µs/txn |")
	for _, c := range comps {
		fmt.Fprintf(w, " CPU %% %s |", c)
	}
	fmt.Fprintf(w, "\n|---|")
	for i := 0; i < 11+len(comps); i++ {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintln(w)
	defer t.writeProvenance(w)
	for _, run := range t.Runs {
		r := run.Result
		label := run.Label
		if run.Sweep != nil {
			label += fmt.Sprintf(" (knee %.0f TPS)", run.Sweep.KneeTPS)
		}
		if r.Interrupted {
			label += " (interrupted)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", label,
			offered(r).format("%.0f"), tps(r).format("%.0f"), ratio(tps(r), tps(b)),
			p50(r).format("%.3f"), p99(r).format("%.3f"), ratio(p99(r), p99(b)), p999(r).format("%.3f"),
			jitter(r).format("%.3f"), ratio(jitter(r), jitter(b)),
			sutUs(r).format("%.1f"), ratio(sutUs(r), sutUs(b)))
		for _, c := range comps {
			fmt.Fprintf(w, " %s |", cpuOf(r, c).format("%.1f"))
		}
		fmt.Fprintln(w)
	}
}

// writeProvenance writes where each run comes from, after the table.
func (t *Table) writeProvenance(w io.Writer) {
	fmt.Fprintf(w, "\n| run | loadgen | chf | scenario | host | CPU | started |\n|---|---|---|---|---|---|---|\n")
	na := func(s string) string {
		if s == "" {
			return "n/a"
		}
		return s
	}
	for _, run := range t.Runs {
		r, p := run.Result, run.Result.Provenance
		chf := na(p.CHFVersion)
		if p.RuntimeProfile != "" {
			chf += ", runtime profile " + p.RuntimeProfile
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s (%s) | %s | %s x%d | %s |\n", run.Label, na(p.LoadgenVersion), chf, r.Scenario.Name,
			na(p.ScenarioHash), na(p.Host), na(p.CPUModel), p.CPUs, r.Started.UTC().Format("2006-01-02 15:04:05Z"))
	}
}

// offeredNote says when the runs were offered different loads (more than
// 5%% apart): their latencies and CPU then do not compare like for like.
func (t *Table) offeredNote() string {
	lo, hi := 0.0, 0.0
	var parts []string
	for _, run := range t.Runs {
		o := offered(run.Result)
		if !o.OK {
			continue
		}
		if lo == 0 || o.V < lo {
			lo = o.V
		}
		hi = max(hi, o.V)
		parts = append(parts, fmt.Sprintf("%s %.0f", run.Label, o.V))
	}
	if lo == 0 || hi <= 1.05*lo {
		return ""
	}
	return fmt.Sprintf("the runs had different offered loads (%s TPS): latency, CPU and ratios compare unlike loads", strings.Join(parts, ", "))
}

// hostNote compares the loadgen's own CPU per transaction across runs that
// gave it the same work (the same loadgen build, scenario and protocol,
// offered loads within 5%): a shared host's speed moves it, as it moves
// the SUT's, so it hints whether SUT CPU differs by the build or by the
// hour: two builds whose raw SUT CPU differs while their SUT ÷ loadgen
// ratios agree likely differ by the host, not the code (an example in
// docs/measurements/2026-12-01-knee-small-machine.md). It is a hint, not a
// correction: the loadgen's CPU also falls when the SUT answers more
// slowly (answers coalesce into fewer reads; the gate's sut_cpu_adj).
// Empty when the runs do not qualify.
func (t *Table) hostNote() string {
	if len(t.Runs) < 2 || t.offeredNote() != "" {
		return ""
	}
	first := t.Runs[0].Result
	lo, hi := math.Inf(1), 0.0
	var own, rel []string
	for _, run := range t.Runs {
		r := run.Result
		sut := sutUs(r)
		if r.LoadgenUsTxn <= 0 || !sut.OK || sut.V <= 0 || r.Provenance.LoadgenVersion == "" ||
			r.Provenance.LoadgenVersion != first.Provenance.LoadgenVersion ||
			r.Provenance.ScenarioHash != first.Provenance.ScenarioHash || r.Proto != first.Proto {
			return ""
		}
		lo, hi = min(lo, r.LoadgenUsTxn), max(hi, r.LoadgenUsTxn)
		own = append(own, fmt.Sprintf("%.1f (%s)", r.LoadgenUsTxn, run.Label))
		rel = append(rel, fmt.Sprintf("%.2f (%s)", sut.V/r.LoadgenUsTxn, run.Label))
	}
	spread := (hi - lo) / lo * 100
	verdict := fmt.Sprintf("%.0f%% apart: the host may have run at different speeds, and SUT CPU moves with it (the loadgen's cost also moves with the SUT's latency and with its own network path)", spread)
	if spread <= 3 {
		verdict = fmt.Sprintf("within %.1f%%: by this measure the host ran at the same speed", spread)
	}
	return fmt.Sprintf("the loadgen's own CPU per transaction, the same work in every run (build %s, scenario %s, %s), was %s µs: %s. SUT µs/txn ÷ loadgen µs/txn: %s.",
		first.Provenance.LoadgenVersion, first.Provenance.ScenarioHash, first.Proto, strings.Join(own, ", "), verdict, strings.Join(rel, ", "))
}

// Charts returns grouped bar charts (and, for sweeps, the overlaid
// curves) as inline SVG charts.
func (t *Table) Charts() ([]string, error) {
	var out []string
	groups := []struct {
		title, unit string
		names       []string
		value       func(r *report.Result, i int) (float64, bool)
	}{
		{"Throughput: offered and achieved", "TPS", []string{"offered", "achieved"}, func(r *report.Result, i int) (float64, bool) {
			f := [...]Figure{offered(r), tps(r)}[i]
			return f.V, f.OK
		}},
		{"Latency percentiles", "ms", []string{"p50", "p99", "p99.9"}, func(r *report.Result, i int) (float64, bool) {
			f := [...]Figure{p50(r), p99(r), p999(r)}[i]
			return f.V, f.OK
		}},
		{"SUT CPU per transaction", "µs / transaction", []string{"SUT µs/txn"}, func(r *report.Result, _ int) (float64, bool) {
			f := sutUs(r)
			return f.V, f.OK
		}},
	}
	comps := t.components()
	groups = append(groups, struct {
		title, unit string
		names       []string
		value       func(r *report.Result, i int) (float64, bool)
	}{"CPU per component", "% of one core", comps, func(r *report.Result, i int) (float64, bool) {
		f := cpuOf(r, comps[i])
		return f.V, f.OK
	}})
	for _, g := range groups {
		if len(g.names) == 0 {
			continue
		}
		svg, err := t.bars(g.unit, g.names, g.value)
		if err != nil {
			return nil, err
		}
		out = append(out, report.Figure(g.title, svg))
	}
	var curves []report.Chart
	for _, run := range t.Runs {
		if run.Sweep == nil {
			continue
		}
		for i, c := range run.Sweep.Charts() {
			if i >= len(curves) {
				curves = append(curves, report.Chart{Title: c.Title, X: c.X, Y: c.Y, LogY: c.LogY})
			}
			for _, l := range c.Lines {
				curves[i].Lines = append(curves[i].Lines, report.Series{Name: run.Label + " " + l.Name, XY: l.XY})
			}
		}
	}
	for _, c := range curves {
		svg, err := c.SVG()
		if errors.Is(err, report.ErrNoData) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, report.Figure(c.Title+" (sweeps)", svg))
	}
	return out, nil
}

// bars draws one grouped bar chart: a group per name, a bar per run, each
// bar labelled with its value (n/a where the run lacks the figure).
func (t *Table) bars(unit string, names []string, value func(*report.Result, int) (float64, bool)) (string, error) {
	p := report.NewPlot("", "", unit)
	w := vg.Points(float64(72) / float64(len(t.Runs)))
	for ri, run := range t.Runs {
		vals := make(plotter.Values, len(names))
		var lab plotter.XYLabels
		for i := range names {
			v, ok := value(run.Result, i)
			if ok {
				vals[i] = v
			}
			lab.XYs = append(lab.XYs, plotter.XY{X: float64(i), Y: vals[i]})
			lab.Labels = append(lab.Labels, valueLabel(v, ok))
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return "", fmt.Errorf("cannot chart %s: %w", unit, err)
		}
		b.Color = plotutil.Color(ri)
		b.LineStyle.Color = color.Black
		b.Offset = w * vg.Length(float64(ri)-float64(len(t.Runs)-1)/2)
		p.Add(b)
		p.Legend.Add(run.Label, b)
		l, err := plotter.NewLabels(lab)
		if err != nil {
			return "", fmt.Errorf("cannot label %s: %w", unit, err)
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Font = p.Legend.TextStyle.Font
			l.TextStyle[i].Font.Size = 8
			l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = text.XCenter, text.YBottom
		}
		l.Offset = vg.Point{X: b.Offset, Y: 2}
		p.Add(l)
	}
	p.Y.Min = 0
	p.Y.Max *= 1.12 // room for the value labels
	p.NominalX(names...)
	return report.RenderSVG(p, true)
}

// valueLabel formats a bar's value with 3 significant digits, or n/a.
func valueLabel(v float64, ok bool) string {
	if !ok {
		return "n/a"
	}
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// WriteHTML writes the comparison page.
func (t *Table) WriteHTML(w io.Writer) error {
	svgs, err := t.Charts()
	if err != nil {
		return err
	}
	return report.WriteSVGPage(w, "loadgen comparison", func(md io.Writer) { t.WriteMarkdown(md) }, svgs)
}
