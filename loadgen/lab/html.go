package lab

import (
	"fmt"
	"html"
	"strings"
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
	fmt.Fprintf(&b, "; %.0f s per run; %d trial(s); MTU %d; wall time %.0f s.</li><li>Pinning: %s</li><li>GOMAXPROCS: %s</li>"+
		"<li>Cells: median over trials (min–max); a difference inside the ranges is \"no measurable difference\".</li></ul>\n",
		r.DurationS, r.Trials, r.MTU, r.WallS, html.EscapeString(r.PinNote), html.EscapeString(r.GOMAXPROCSNote))
	if r.Kind == "lab" {
		head, rows := r.table()
		htmlTable(&b, head, rows)
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
