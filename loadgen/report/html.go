package report

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one named line of a chart.
type Series struct {
	Name string
	XY   plotter.XYs
}

// Chart describes one line chart.
type Chart struct {
	Title, X, Y string
	LogX, LogY  bool
	Lines       []Series
}

// SVG renders c as an SVG document.
func (c Chart) SVG() (svg string, err error) {
	defer func() {
		if r := recover(); r != nil { // gonum/plot panics on degenerate axes
			svg, err = "", fmt.Errorf("cannot render chart %q: %v", c.Title, r)
		}
	}()
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.X
	p.Y.Label.Text = c.Y
	p.Add(plotter.NewGrid())
	for i, s := range c.Lines {
		xy := s.XY
		if c.LogX || c.LogY {
			xy = positive(xy, c.LogX, c.LogY)
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return "", fmt.Errorf("cannot plot %s: %w", s.Name, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	// Log axes only over positive data (an empty chart stays linear).
	if c.LogX && p.X.Min > 0 && p.X.Max > p.X.Min {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if c.LogY && p.Y.Min > 0 && p.Y.Max > p.Y.Min {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	wt, err := p.WriterTo(8*vg.Inch, 3.6*vg.Inch, "svg")
	if err != nil {
		return "", fmt.Errorf("cannot render chart: %w", err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("cannot render chart: %w", err)
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:] // drop the XML prolog so the SVG can sit inline
	}
	return s, nil
}

func positive(in plotter.XYs, x, y bool) plotter.XYs {
	out := make(plotter.XYs, 0, len(in))
	for _, p := range in {
		if (x && p.X <= 0) || (y && p.Y <= 0) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Charts returns the charts of a run: throughput and latency percentiles
// over time, CPU per component over time and the latency distribution.
func (r *Result) Charts() ([]Chart, error) {
	var offered, done, errs plotter.XYs
	var p50, p90, p99, p999 plotter.XYs
	cpu := map[string]plotter.XYs{}
	for _, p := range r.Series {
		t := float64(p.Second)
		offered = append(offered, plotter.XY{X: t, Y: float64(p.Offered)})
		done = append(done, plotter.XY{X: t, Y: float64(p.Completed)})
		errs = append(errs, plotter.XY{X: t, Y: float64(p.Errors)})
		p50 = append(p50, plotter.XY{X: t, Y: p.P50})
		p90 = append(p90, plotter.XY{X: t, Y: p.P90})
		p99 = append(p99, plotter.XY{X: t, Y: p.P99})
		p999 = append(p999, plotter.XY{X: t, Y: p.P999})
		for k, v := range p.CPU {
			cpu[k] = append(cpu[k], plotter.XY{X: t, Y: v})
		}
	}
	charts := []Chart{
		{Title: "Throughput", X: "time (s)", Y: "transactions / s", Lines: []Series{{"offered", offered}, {"completed", done}, {"errors", errs}}},
		{Title: "Latency percentiles (from scheduled send)", X: "time (s)", Y: "ms", LogY: true,
			Lines: []Series{{"p50", p50}, {"p90", p90}, {"p99", p99}, {"p99.9", p999}}},
	}
	if len(cpu) > 0 {
		c := Chart{Title: "CPU per component", X: "time (s)", Y: "% of one core"}
		for _, k := range r.Components() {
			if xy, ok := cpu[k]; ok {
				c.Lines = append(c.Lines, Series{k, xy})
			}
		}
		charts = append(charts, c)
	}
	h, err := r.LatencyHistogram()
	if err != nil {
		return nil, err
	}
	var dist plotter.XYs
	for _, b := range h.Distribution(20) {
		dist = append(dist, plotter.XY{X: (b.FromMs + b.ToMs) / 2, Y: float64(b.Count)})
	}
	charts = append(charts, Chart{Title: "Latency distribution (measured window)", X: "latency (ms)", Y: "requests", LogX: true,
		Lines: []Series{{"all operations", dist}}})
	return charts, nil
}

// WriteHTML writes a self-contained HTML page (inline SVG, inline CSS, no
// scripts or external resources).
func (r *Result) WriteHTML(w io.Writer) error {
	charts, err := r.Charts()
	if err != nil {
		return err
	}
	return WritePage(w, "loadgen result", func(md io.Writer) { r.WriteMarkdown(md) }, charts)
}

// WritePage writes a self-contained HTML page: the Markdown that md writes
// (the small subset the reports use), then the charts as inline SVG.
func WritePage(w io.Writer, title string, md func(io.Writer), charts []Chart) error {
	svgs := make([]string, 0, len(charts))
	for _, c := range charts {
		svg, err := c.SVG()
		if err != nil {
			return err
		}
		svgs = append(svgs, fmt.Sprintf("<h2>%s</h2>\n%s", html.EscapeString(c.Title), svg))
	}
	return WriteSVGPage(w, title, md, svgs)
}

// WriteSVGPage writes a self-contained HTML page: the Markdown that md
// writes, then the given inline SVG fragments.
func WriteSVGPage(w io.Writer, title string, md func(io.Writer), svgs []string) error {
	var mdb bytes.Buffer
	md(&mdb)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>%s</title><style>
body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.fail{color:#b00;font-weight:bold}.pass{color:#070;font-weight:bold}
svg{max-width:100%%;height:auto}</style></head><body>`, html.EscapeString(title))
	b.WriteString(markdownToHTML(mdb.String()))
	for _, s := range svgs {
		b.WriteString(s)
		b.WriteString("\n")
	}
	b.WriteString("</body></html>\n")
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("cannot write HTML: %w", err)
	}
	return nil
}

// markdownToHTML converts the small Markdown subset WriteMarkdown emits
// (headings, paragraphs, tables, bullet lists) to HTML.
func markdownToHTML(md string) string {
	var b strings.Builder
	lines := strings.Split(md, "\n")
	inTable, inList, header := false, false, false
	closeAll := func() {
		if inTable {
			b.WriteString("</table>\n")
			inTable = false
		}
		if inList {
			b.WriteString("</ul>\n")
			inList = false
		}
	}
	inline := func(s string) string {
		s = html.EscapeString(s)
		for strings.Count(s, "**") >= 2 {
			s = strings.Replace(s, "**", `<span class="fail">`, 1)
			s = strings.Replace(s, "**", "</span>", 1)
		}
		for strings.Count(s, "`") >= 2 {
			s = strings.Replace(s, "`", "<code>", 1)
			s = strings.Replace(s, "`", "</code>", 1)
		}
		return s
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# "):
			closeAll()
			fmt.Fprintf(&b, "<h1>%s</h1>\n", inline(l[2:]))
		case strings.HasPrefix(l, "|"):
			if !inTable {
				closeAll()
				b.WriteString("<table>\n")
				inTable, header = true, true
			}
			cells := strings.Split(strings.Trim(l, "|"), "|")
			if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
				continue
			}
			tag := "td"
			if header {
				tag, header = "th", false
			}
			b.WriteString("<tr>")
			for _, c := range cells {
				fmt.Fprintf(&b, "<%s>%s</%s>", tag, inline(strings.TrimSpace(c)), tag)
			}
			b.WriteString("</tr>\n")
		case strings.HasPrefix(l, "- "):
			if !inList {
				closeAll()
				b.WriteString("<ul>\n")
				inList = true
			}
			fmt.Fprintf(&b, "<li>%s</li>\n", inline(l[2:]))
		case strings.TrimSpace(l) == "":
			closeAll()
		default:
			closeAll()
			fmt.Fprintf(&b, "<p>%s</p>\n", inline(l))
		}
	}
	closeAll()
	return b.String()
}
