package lab

import (
	"bytes"
	"fmt"
	"html"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// HTML renders the report as one offline page (no script, no network).
func (r *Report) HTML() string {
	var b strings.Builder
	title := "Lab: network models compared (emulations on one box)"
	if r.Kind == "lab-shaping" {
		title = "Lab: shaping vs policing, cubic vs bbr (emulation)"
	}
	fmt.Fprintf(&b, "<!doctype html><html><head><meta charset=\"utf-8\"><title>%s</title><style>"+
		"body{font-family:sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;margin:1em 0}"+
		"td,th{border:1px solid #bbb;padding:.3em .6em;text-align:right}td:first-child,th{text-align:left}"+
		"th{background:#eee}.note{color:#444}</style></head><body>\n<h1>%s</h1>\n", html.EscapeString(title), html.EscapeString(title))
	fmt.Fprintf(&b, "<p class=\"note\">Every model is an emulation in network namespaces on one machine (%d CPUs, kernel %s, %s), not a cluster: compare ratios measured side by side. This machine is shared and busy: figures are noisy.</p>\n",
		r.Machine.CPUs, html.EscapeString(r.Machine.Kernel), html.EscapeString(r.Machine.Go))
	fmt.Fprintf(&b, "<ul><li>Fixed rate %.0f TPS", r.RateTPS)
	if r.HostKneeTPS > 0 {
		fmt.Fprintf(&b, " (50%% of the host model's knee, %.0f TPS)", r.HostKneeTPS)
	}
	if k := r.kneeNote(); k != "" {
		fmt.Fprintf(&b, ". %s", html.EscapeString(k))
	}
	fmt.Fprintf(&b, "; %.0f s per run; %d trial(s); MTU %d; wall time %.0f s.</li><li>Pinning: %s</li><li>GOMAXPROCS: %s</li><li>CHF runtime profile: %s</li>"+
		"<li>Cells: median over trials (min–max); a difference inside the ranges is \"no measurable difference\".</li></ul>\n",
		r.DurationS, r.Trials, r.MTU, r.WallS, html.EscapeString(r.PinNote), html.EscapeString(r.GOMAXPROCSNote), html.EscapeString(orNA(r.RuntimeProfile)))
	if r.Kind == "lab" {
		head, rows := r.table()
		htmlTable(&b, head, rows)
		b.WriteString("<p class=\"note\">Bars: median over trials; whiskers: the range of the trials. P = pinned.</p>\n")
		for _, c := range []struct{ title, figure, unit string }{
			{"Latency p50 (from scheduled send)", "p50_ms", "ms"},
			{"Latency p99", "p99_ms", "ms"},
			{"SUT CPU per transaction", "sut_cpu_us_per_txn", "µs"},
			{"Probe RTT (median)", "rtt_us_median", "µs"},
			{"iperf3, one stream", "iperf3_gbps_single", "Gbit/s"},
		} {
			b.WriteString(r.barChart(c.title, c.figure, c.unit))
		}
		if len(r.Reference) > 0 {
			fmt.Fprintf(&b, "<h2>Ordering</h2><ul><li>Reference deployment (published): %s</li>", html.EscapeString(r.Reference[0]))
			for _, m := range r.Measured {
				fmt.Fprintf(&b, "<li>This machine: %s</li>", html.EscapeString(m))
			}
			for _, v := range r.Verdicts {
				fmt.Fprintf(&b, "<li>%s</li>", html.EscapeString(v))
			}
			b.WriteString("</ul>\n")
		}
	}
	if len(r.Shaping) > 0 {
		fmt.Fprintf(&b, "<h2>Shaping experiment</h2><p>%s</p>\n", html.EscapeString(r.Shaper))
		head, rows := shapingTable(r.Shaping)
		htmlTable(&b, head, rows)
	}
	b.WriteString("<h2>Models</h2><ul>")
	seen := map[string]bool{}
	for _, row := range r.Rows {
		if !seen[row.Model] {
			seen[row.Model] = true
			fmt.Fprintf(&b, "<li><code>%s</code>: %s</li>", html.EscapeString(row.Model), html.EscapeString(row.Emulation))
		}
	}
	if r.Kind == "lab-shaping" {
		fmt.Fprintf(&b, "<li><code>baremetal</code>: %s</li>", html.EscapeString(Describe["baremetal"]))
	}
	b.WriteString("</ul>\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "<p class=\"note\">Note: %s</p>\n", html.EscapeString(n))
	}
	for _, row := range r.Rows {
		for _, f := range row.Failures {
			fmt.Fprintf(&b, "<p class=\"note\">Failure: %s %s: %s</p>\n", html.EscapeString(row.Model), pinName(row.Pinned), html.EscapeString(f))
		}
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

func htmlTable(b *strings.Builder, head []string, rows [][]string) {
	b.WriteString("<table><tr>")
	for _, h := range head {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(h))
	}
	b.WriteString("</tr>\n")
	for _, r := range rows {
		b.WriteString("<tr>")
		for _, c := range r {
			fmt.Fprintf(b, "<td>%s</td>", html.EscapeString(c))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
}

// barChart renders one figure of every measured row as bars of the median
// with the trial range as error bars, inline SVG (empty when nothing to
// plot or gonum/plot refuses the data).
func (r *Report) barChart(title, figure, unit string) (svg string) {
	defer func() {
		if recover() != nil { // gonum/plot panics on degenerate axes
			svg = ""
		}
	}()
	var vals plotter.Values
	var errs []plotter.XY
	var names []string
	for _, row := range r.Rows {
		s, ok := row.Stats[figure]
		if !ok {
			continue
		}
		vals = append(vals, s.Median)
		errs = append(errs, plotter.XY{X: float64(len(names)), Y: s.Median})
		names = append(names, row.Model+map[bool]string{true: " P", false: ""}[row.Pinned])
	}
	if len(vals) == 0 {
		return ""
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	bars, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return ""
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars)
	var ranges plotter.YErrors
	for _, row := range r.Rows {
		if s, ok := row.Stats[figure]; ok {
			ranges = append(ranges, struct{ Low, High float64 }{s.Median - s.Min, s.Max - s.Median})
		}
	}
	eb, err := plotter.NewYErrorBars(struct {
		plotter.XYer
		plotter.YErrorer
	}{plotter.XYs(errs), ranges})
	if err == nil {
		p.Add(eb)
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -0.9
	wt, err := p.WriterTo(8*vg.Inch, 3.6*vg.Inch, "svg")
	if err != nil {
		return ""
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return ""
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return s
}

// orNA is s, or "n/a" when empty (a report written before the field).
func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}
