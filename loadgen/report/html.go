package report

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/chf-testbed/testbed/loadgen/histogram"
)

// Series is one named line of a chart.
type Series struct {
	Name string
	XY   plotter.XYs
	// Dashed draws a reference line (offered load, an SLO) dashed, so a
	// line under it stays visible; Points puts a marker on every point.
	Dashed, Points bool
}

// Span is a named range of x, shaded (a phase of a run).
type Span struct {
	From, To float64
	Name     string
}

// Mark is a named vertical line (the knee of a sweep).
type Mark struct {
	X    float64
	Name string
}

// Chart describes one line chart.
type Chart struct {
	Title, X, Y string
	LogX, LogY  bool
	Lines       []Series
	Spans       []Span
	Marks       []Mark
	// XTicks, when set, replaces the x axis ticks (the percentile
	// spectrum's axis).
	XTicks plot.Ticker
}

// sansFont is the charts' font; the page asks for the same family (the
// SVG names it, with web-safe fallbacks).
var sansFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// fontFamily is the CSS font stack of the pages and their charts.
const fontFamily = `'Liberation Sans',Arial,Helvetica,sans-serif`

// chart size; the legend sits in a strip on the right, outside the data.
const (
	chartW = 8.4 * vg.Inch
	chartH = 3.4 * vg.Inch
)

// NewPlot returns a plot in the pages' style: sans text, a grid.
func NewPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Title.TextStyle.Font = font.From(sansFont, 13)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sansFont, 11)
		a.Tick.Label.Font = font.From(sansFont, 10)
	}
	p.Legend.TextStyle.Font = font.From(sansFont, 10)
	p.Legend.Padding = vg.Points(3) // between entries: one line each, readable
	p.Add(plotter.NewGrid())
	return p
}

// RenderSVG draws p, with its legend (when legend is set) in a strip right
// of the plot, never over the data, and returns the inline SVG.
func RenderSVG(p *plot.Plot, legend bool) (string, error) {
	cv := vgsvg.New(chartW, chartH)
	dc := draw.New(cv)
	leg := p.Legend
	p.Legend = plot.NewLegend()
	var lw vg.Length
	if legend {
		// A browser without Liberation Sans falls back to a wider sans
		// font: leave it room.
		r := leg.Rectangle(dc)
		lw = 1.25*(r.Max.X-r.Min.X) + 12
	}
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	if lw > 0 {
		leg.Top, leg.Left = true, true
		leg.YOffs = -6
		leg.Draw(draw.Crop(dc, chartW-lw+6, 0, 0, 0))
	}
	p.Legend = leg
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("cannot render chart %q: %w", p.Title.Text, err)
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:] // drop the XML prolog so the SVG can sit inline
	}
	return strings.ReplaceAll(s, "font-family:Liberation Sans;", "font-family:"+fontFamily+";"), nil
}

// spanColors shade the phases of a run.
var spanColors = map[string]color.Color{
	"ramp-up": color.RGBA{R: 255, G: 236, B: 200, A: 255},
	"warm-up": color.RGBA{R: 255, G: 248, B: 215, A: 255},
	"measure": color.RGBA{R: 228, G: 245, B: 228, A: 255},
	"drain":   color.RGBA{R: 232, G: 232, B: 240, A: 255},
}

// SVG renders c as an inline SVG document.
func (c Chart) SVG() (svg string, err error) {
	defer func() {
		if r := recover(); r != nil { // gonum/plot panics on degenerate axes
			svg, err = "", fmt.Errorf("cannot render chart %q: %v", c.Title, r)
		}
	}()
	p := NewPlot("", c.X, c.Y) // the page heads each chart with its title
	var lines []plot.Plotter
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i, s := range c.Lines {
		xy := s.XY
		if c.LogX || c.LogY {
			xy = positive(xy, c.LogX, c.LogY)
		}
		if len(xy) == 0 {
			continue
		}
		for _, pt := range xy {
			xmin, xmax, ymin, ymax = math.Min(xmin, pt.X), math.Max(xmax, pt.X), math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return "", fmt.Errorf("cannot plot %s: %w", s.Name, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		thumbs := []plot.Thumbnailer{l}
		if s.Dashed {
			l.Width = vg.Points(2)
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		lines = append(lines, l)
		if s.Points {
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return "", fmt.Errorf("cannot plot %s: %w", s.Name, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: l.Color, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
			lines = append(lines, sc)
			thumbs = append(thumbs, sc)
		}
		p.Legend.Add(s.Name, thumbs...)
	}
	if len(lines) == 0 {
		return "", fmt.Errorf("%w: chart %q", ErrNoData, c.Title)
	}
	if !c.LogY && ymin > 0 {
		ymin = 0 // counts and rates start at zero
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	if !c.LogY {
		ymax += 0.12 * (ymax - ymin) // headroom: the phase names sit above the data
	}
	if xmax <= xmin {
		xmin, xmax = xmin-1, xmax+1
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = xmin, xmax, ymin, ymax
	if c.LogX {
		p.X.Min, p.X.Max = decades(xmin, xmax)
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, LogTicks{}
	}
	if c.LogY {
		p.Y.Min, p.Y.Max = decades(ymin, ymax)
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, LogTicks{}
	}
	if c.XTicks != nil {
		p.X.Tick.Marker = c.XTicks
	}
	if err := c.addSpans(p); err != nil {
		return "", err
	}
	p.Add(lines...)
	if err := c.addMarks(p); err != nil {
		return "", err
	}
	return RenderSVG(p, true)
}

// ErrNoData is returned for a chart with nothing to draw.
var ErrNoData = errors.New("report: chart has no data")

// addSpans shades the phases and names them at the top of the chart.
func (c Chart) addSpans(p *plot.Plot) error {
	if len(c.Spans) == 0 {
		return nil
	}
	var lab plotter.XYLabels
	for _, s := range c.Spans {
		from, to := math.Max(s.From, p.X.Min), math.Min(s.To, p.X.Max)
		if to <= from {
			continue
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: p.Y.Min}, {X: to, Y: p.Y.Min}, {X: to, Y: p.Y.Max}, {X: from, Y: p.Y.Max}})
		if err != nil {
			return fmt.Errorf("cannot shade %s: %w", s.Name, err)
		}
		poly.Color = spanColors[s.Name]
		if poly.Color == nil {
			poly.Color = color.RGBA{R: 240, G: 240, B: 240, A: 255}
		}
		poly.LineStyle.Width = 0
		p.Add(poly)
		lab.XYs = append(lab.XYs, plotter.XY{X: (from + to) / 2, Y: p.Y.Max})
		lab.Labels = append(lab.Labels, s.Name)
	}
	return addLabels(p, lab, text.XCenter, text.YTop, vg.Point{Y: -3})
}

// addMarks draws the vertical marks, named at the top.
func (c Chart) addMarks(p *plot.Plot) error {
	var lab plotter.XYLabels
	for _, m := range c.Marks {
		l, err := plotter.NewLine(plotter.XYs{{X: m.X, Y: p.Y.Min}, {X: m.X, Y: p.Y.Max}})
		if err != nil {
			return fmt.Errorf("cannot mark %s: %w", m.Name, err)
		}
		l.Color = color.RGBA{R: 90, G: 90, B: 90, A: 255}
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		lab.XYs = append(lab.XYs, plotter.XY{X: m.X, Y: p.Y.Max})
		lab.Labels = append(lab.Labels, m.Name)
	}
	return addLabels(p, lab, text.XLeft, text.YTop, vg.Point{X: 3, Y: -16})
}

// addLabels adds text labels in the chart's font.
func addLabels(p *plot.Plot, lab plotter.XYLabels, x text.XAlignment, y text.YAlignment, off vg.Point) error {
	if len(lab.Labels) == 0 {
		return nil
	}
	l, err := plotter.NewLabels(lab)
	if err != nil {
		return fmt.Errorf("cannot label chart: %w", err)
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = font.From(sansFont, 9)
		l.TextStyle[i].Color = color.RGBA{R: 70, G: 70, B: 70, A: 255}
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = x, y
	}
	l.Offset = off
	p.Add(l)
	return nil
}

// decades widens [lo, hi] (positive) to whole decades, so that a log axis
// always has labelled ticks.
func decades(lo, hi float64) (float64, float64) {
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if b <= a {
		b = a + 1
	}
	return math.Pow(10, a), math.Pow(10, b)
}

// LogTicks labels a log axis at each power of ten (0.1, 1, 10, 100, ...)
// and, over at most two decades, at 2 and 5 of each decade too; the other
// integers of a decade are unlabelled minor ticks.
type LogTicks struct{}

// Ticks implements plot.Ticker.
func (LogTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max > min) {
		return nil
	}
	lo, hi := int(math.Floor(math.Log10(min))), int(math.Ceil(math.Log10(max)))
	few := hi-lo <= 2
	var ts []plot.Tick
	for e := lo; e <= hi; e++ {
		base := math.Pow(10, float64(e))
		for m := 1; m <= 9; m++ {
			v := float64(m) * base
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (few && (m == 2 || m == 5)) {
				t.Label = strconv.FormatFloat(v, 'g', 4, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// PercentileTicks labels the percentile spectrum's x axis, which plots
// percentile q at 1/(1−q) on a log scale: 0%, 90%, 99%, … 99.999%.
type PercentileTicks struct{}

// Ticks implements plot.Ticker.
func (PercentileTicks) Ticks(min, max float64) []plot.Tick {
	labels := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"}
	var ts []plot.Tick
	for i, l := range labels {
		v := math.Pow(10, float64(i))
		if v >= min*(1-1e-9) && v <= max*(1+1e-9) {
			ts = append(ts, plot.Tick{Value: v, Label: l})
		}
	}
	if v := 2.0; v >= min && v <= max {
		ts = append(ts, plot.Tick{Value: v, Label: "50%"})
	}
	return ts
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

// Charts returns the charts of a run: throughput (offered and achieved),
// latency percentiles, service time and scheduling lag, throughput per
// operation and errors per class over time with the phases shaded, CPU per
// component over time, and the latency percentile spectrum.
func (r *Result) Charts() ([]Chart, error) {
	var offered, done, errs plotter.XYs
	var p50, p90, p99, p999, svc50, svc99, lag99 plotter.XYs
	cpu := map[string]plotter.XYs{}
	perOp := map[string]plotter.XYs{}
	perClass := map[string]plotter.XYs{}
	var spans []Span
	for _, p := range r.Series {
		t := float64(p.Second)
		if n := len(spans); n == 0 || spans[n-1].Name != p.Phase {
			spans = append(spans, Span{From: t, To: t + 1, Name: p.Phase})
		} else {
			spans[n-1].To = t + 1
		}
		offered = append(offered, plotter.XY{X: t, Y: float64(p.Offered)})
		done = append(done, plotter.XY{X: t, Y: float64(p.Completed)})
		errs = append(errs, plotter.XY{X: t, Y: float64(p.Errors)})
		p50 = append(p50, plotter.XY{X: t, Y: p.P50})
		p90 = append(p90, plotter.XY{X: t, Y: p.P90})
		p99 = append(p99, plotter.XY{X: t, Y: p.P99})
		p999 = append(p999, plotter.XY{X: t, Y: p.P999})
		svc50 = append(svc50, plotter.XY{X: t, Y: p.ServiceP50})
		svc99 = append(svc99, plotter.XY{X: t, Y: p.ServiceP99})
		lag99 = append(lag99, plotter.XY{X: t, Y: p.SchedLagP99})
		for k, v := range p.CPU {
			cpu[k] = append(cpu[k], plotter.XY{X: t, Y: v})
		}
		for _, k := range opOrder(r) {
			perOp[k] = append(perOp[k], plotter.XY{X: t, Y: float64(p.OpCompleted[k] - p.OpErrors[k])})
		}
		for k := range r.ErrorClasses {
			perClass[k] = append(perClass[k], plotter.XY{X: t, Y: float64(p.ErrorClasses[k])})
		}
	}
	const tx = "time since start (s)"
	charts := []Chart{
		{Title: "Throughput: offered and achieved", X: tx, Y: "transactions / s", Spans: spans,
			Lines: []Series{{Name: "completed", XY: done}, {Name: "errors", XY: errs}, {Name: "offered", XY: offered, Dashed: true}}},
		{Title: "Latency percentiles over time (from scheduled send)", X: tx, Y: "ms (log)", LogY: true, Spans: spans,
			Lines: []Series{{Name: "p50", XY: p50}, {Name: "p90", XY: p90}, {Name: "p99", XY: p99}, {Name: "p99.9", XY: p999}}},
		{Title: "Service time and scheduling lag over time", X: tx, Y: "ms (log)", LogY: true, Spans: spans,
			Lines: []Series{{Name: "service p50", XY: svc50}, {Name: "service p99", XY: svc99}, {Name: "sched lag p99", XY: lag99}}},
	}
	if hasCounts(perOp) {
		c := Chart{Title: "Successful transactions per operation", X: tx, Y: "transactions / s", Spans: spans}
		for _, k := range opOrder(r) {
			c.Lines = append(c.Lines, Series{Name: k, XY: perOp[k]})
		}
		charts = append(charts, c)
	}
	if hasCounts(perClass) {
		c := Chart{Title: "Errors per class", X: tx, Y: "errors / s", Spans: spans}
		for _, k := range sortedKeys(perClass) {
			c.Lines = append(c.Lines, Series{Name: k, XY: perClass[k]})
		}
		charts = append(charts, c)
	}
	if len(cpu) > 0 {
		c := Chart{Title: "CPU per component over time", X: tx, Y: "% of one core", Spans: spans}
		for _, k := range r.Components() {
			if xy, ok := cpu[k]; ok {
				c.Lines = append(c.Lines, Series{Name: k, XY: xy})
			}
		}
		charts = append(charts, c)
	}
	spec, err := r.spectrum()
	if err != nil {
		return nil, err
	}
	if len(spec.Lines) > 0 {
		charts = append(charts, spec)
	}
	return charts, nil
}

// hasCounts reports whether any series has a non-zero point.
func hasCounts(m map[string]plotter.XYs) bool {
	for _, xy := range m {
		for _, p := range xy {
			if p.Y != 0 {
				return true
			}
		}
	}
	return false
}

// spectrumPoints are the x values (1/(1−q)) the spectrum samples.
var spectrumPoints = func() []float64 {
	var out []float64
	for x := 1.0; x <= 1e5*(1+1e-9); x *= math.Pow(10, 0.05) {
		out = append(out, x)
	}
	return out
}()

// spectrum is the HDR percentile spectrum of the measured window: latency
// (all operations and each) and service time at percentiles up to 99.999.
func (r *Result) spectrum() (Chart, error) {
	c := Chart{Title: "Latency percentile spectrum (measured window)", X: "percentile", Y: "ms (log)", LogX: true, LogY: true, XTicks: PercentileTicks{}}
	all, allSvc := histogram.New(), histogram.New()
	line := func(h *histogram.Histogram) plotter.XYs {
		if h.Count() == 0 {
			return nil
		}
		xy := make(plotter.XYs, 0, len(spectrumPoints))
		for _, x := range spectrumPoints {
			xy = append(xy, plotter.XY{X: x, Y: h.Quantile(100 * (1 - 1/x))})
		}
		return xy
	}
	var ops []Series
	for _, name := range opOrder(r) {
		if _, ok := r.Histograms[name]; !ok {
			continue
		}
		h, err := r.decode(name)
		if err != nil {
			return c, err
		}
		all.Merge(h[0])
		allSvc.Merge(h[1])
		if xy := line(h[0]); xy != nil {
			ops = append(ops, Series{Name: name, XY: xy})
		}
	}
	if xy := line(all); xy != nil {
		c.Lines = append(c.Lines, Series{Name: "latency, all", XY: xy}, Series{Name: "service, all", XY: line(allSvc), Dashed: true})
		if len(ops) > 1 {
			c.Lines = append(c.Lines, ops...)
		}
	}
	return c, nil
}

// WriteHTML writes a self-contained HTML page (inline SVG, inline CSS, no
// scripts or external resources).
func (r *Result) WriteHTML(w io.Writer) error {
	charts, err := r.Charts()
	if err != nil {
		return err
	}
	return WritePage(w, "loadgen result", func(md io.Writer) {
		r.WriteMarkdown(md)
		if len(r.Series) == 0 {
			fmt.Fprintf(md, "\nNo per-second series (the run lasted less than a second): no charts over time.\n")
		}
	}, charts)
}

// WritePage writes a self-contained HTML page: the Markdown that md writes
// (the small subset the reports use), then the charts as inline SVG.
func WritePage(w io.Writer, title string, md func(io.Writer), charts []Chart) error {
	svgs := make([]string, 0, len(charts))
	for _, c := range charts {
		svg, err := c.SVG()
		if errors.Is(err, ErrNoData) {
			continue
		}
		if err != nil {
			return err
		}
		svgs = append(svgs, Figure(c.Title, svg))
	}
	return WriteSVGPage(w, title, md, svgs)
}

// Figure wraps an inline SVG chart with its heading, as the pages show
// (and the browser test finds) every chart.
func Figure(title, svg string) string {
	return fmt.Sprintf("<figure class=\"chart\"><h2>%s</h2>\n%s</figure>", html.EscapeString(title), svg)
}

// WriteSVGPage writes a self-contained HTML page: the Markdown that md
// writes, then the given inline SVG fragments.
func WriteSVGPage(w io.Writer, title string, md func(io.Writer), svgs []string) error {
	var mdb bytes.Buffer
	md(&mdb)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>%s</title><style>
body{font-family:%s;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.88em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}td.t,th.t{text-align:left}.fail{color:#b00;font-weight:bold}.pass{color:#070;font-weight:bold}
svg{max-width:100%%;height:auto}figure{margin:0}h2{font-size:1.15em;margin:1.4em 0 .3em}</style></head><body>`, html.EscapeString(title), fontFamily)
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
			i := strings.Index(s, "**")
			j := strings.Index(s[i+2:], "**") + i + 2
			cls := "" // bold; red for what failed, green for a pass
			if w := s[i+2 : j]; strings.HasPrefix(w, "pass") {
				cls = ` class="pass"`
			}
			if w := s[i+2 : j]; strings.Contains(w, "FAIL") || strings.Contains(w, "INTERRUPTED") || strings.Contains(w, "INCOMPLETE") ||
				strings.Contains(w, "WARNING") || strings.HasPrefix(w, "missed") {
				cls = ` class="fail"`
			}
			s = s[:i] + "<strong" + cls + ">" + s[i+2:j] + "</strong>" + s[j+2:]
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
				c = strings.TrimSpace(c)
				cls := ""
				if c == "pass" || c == "met" || strings.HasPrefix(c, "pass (") {
					cls = ` class="pass"`
				}
				fmt.Fprintf(&b, "<%s%s>%s</%s>", tag, cls, inline(c), tag)
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
