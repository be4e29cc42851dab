package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
)

// WriteSummary writes the terminal summary table.
func (r *Result) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "\n== loadgen result (%s, %s, %.1fs measured) ==\n", r.Proto, strings.Join(r.Targets, ","), r.DurationS)
	p := r.Provenance
	fmt.Fprintf(w, "loadgen %s  chf %s  label %q  scenario %s (%s)  started %s\n", orNA(p.LoadgenVersion), orNA(p.CHFVersion), r.Label,
		r.Scenario.Name, orNA(p.ScenarioHash), r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "host %s  %s  %s x%d\n", orNA(p.Host), orNA(p.Kernel), orNA(p.CPUModel), p.CPUs)
	if p.Store != nil {
		fmt.Fprintf(w, "store %s\n", p.Store)
	}
	if p.RuntimeProfile != "" {
		fmt.Fprintf(w, "chf runtime profile %s\n", p.RuntimeProfile)
	}
	if c := p.Cluster; c != nil {
		pods := make([]string, 0, len(c.Placement))
		for pod, node := range c.Placement {
			pods = append(pods, pod+"@"+node)
		}
		sort.Strings(pods)
		fmt.Fprintf(w, "cluster run: model %s (%s datapath), nodes %s, CPU manager %s; pods %s\n", c.Model, c.Datapath,
			strings.Join(c.Nodes, ","), c.CPUManager, strings.Join(pods, " "))
	}
	if r.Interrupted {
		fmt.Fprintf(w, "INTERRUPTED%s: the run was cut short; the figures cover only what ran\n", by(r.InterruptedBy))
	}
	for _, x := range r.Incomplete {
		fmt.Fprintf(w, "INCOMPLETE: %s\n", x)
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", x)
	}
	fmt.Fprintf(w, "offered %.0f TPS  achieved %.0f TPS  transactions %d  errors %d (%.3f%%)  late %d  dropped %d\n",
		r.OfferedTPS, r.TPS, r.Transactions, r.Errors, 100*r.ErrorRate, r.Late, r.Dropped)
	fmt.Fprintf(w, "latency ms (from scheduled send): p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  mean %.3f  jitter(CV) %.3f\n",
		r.LatencyMs.P50, r.LatencyMs.P90, r.LatencyMs.P99, r.LatencyMs.P999, r.LatencyMs.Max, r.LatencyMs.Mean, r.JitterCV)
	fmt.Fprintf(w, "service ms (from actual send):    p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  mean %.3f\n",
		r.ServiceMs.P50, r.ServiceMs.P90, r.ServiceMs.P99, r.ServiceMs.P999, r.ServiceMs.Max, r.ServiceMs.Mean)
	if l := r.SchedLagMs; l != nil {
		fmt.Fprintf(w, "sched lag ms (actual - scheduled): p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	if l := r.AdmittedLatencyMs; l != nil && r.Shed > 0 {
		fmt.Fprintf(w, "admitted ms (shed excluded):       p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f   shed %d (%.2f%%)\n",
			l.P50, l.P90, l.P99, l.P999, l.Max, r.Shed, 100*r.ShedShare)
	}
	fmt.Fprintf(w, "\n%-8s %10s %8s %6s %7s %9s %9s %9s %9s %9s\n", "op", "count", "errors", "late", "dropped", "tps", "p50 ms", "p99 ms", "p99.9 ms", "max ms")
	for _, name := range opOrder(r) {
		o := r.Ops[name]
		fmt.Fprintf(w, "%-8s %10d %8d %6d %7d %9.0f %9.3f %9.3f %9.3f %9.3f\n", name, o.Count, o.Errors, o.Late, o.Dropped, o.TPS,
			o.LatencyMs.P50, o.LatencyMs.P99, o.LatencyMs.P999, o.LatencyMs.Max)
	}
	if len(r.ErrorClasses) > 0 {
		fmt.Fprintf(w, "\nerrors by class:")
		for _, k := range sortedKeys(r.ErrorClasses) {
			fmt.Fprintf(w, " %s=%d", k, r.ErrorClasses[k])
		}
		fmt.Fprintln(w)
	}
	if len(r.CPUPercent) > 0 {
		fmt.Fprintf(w, "\nCPU %% (100 = one core):")
		for _, k := range r.Components() {
			fmt.Fprintf(w, " %s=%.1f", k, r.CPUPercent[k])
		}
		fmt.Fprintf(w, "\nSUT CPU µs/transaction %s   loadgen CPU µs/transaction %.1f\n", r.sutUs(), r.LoadgenUsTxn)
	}
	if h := r.Host; h != nil {
		fmt.Fprintf(w, "host CPU (this machine, %d cores): %s\n", h.Cores, h.summary())
	}
	if f := r.HostFreezes; f != nil {
		fmt.Fprintf(w, "host freezes (a SCHED_FIFO probe on each of %d CPUs, every %.0f ms): %s\n", len(f.CPUs), f.PeriodMs, f.Line())
	} else if r.HostFreezesNote != "" {
		fmt.Fprintf(w, "host freezes: %s\n", r.HostFreezesNote)
	}
	r.writeMemory(w)
	r.writeHops(w)
	r.writeFaults(w)
	r.writeStoreFaults(w)
	r.writeNotifications(w)
	a := r.Audit
	verdict := "PASS"
	if a.Skipped {
		verdict = "SKIPPED"
	} else if !a.OK {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\naudit %s: %d touched, %d checked, charged %d, debited %d, mismatches %d, negative %d, reservations left %d, unreadable %d, unresolved requests %d",
		verdict, a.Touched, a.Checked, a.Charged, a.Debited, a.Mismatches, a.Negative, a.Reserved, a.Unreadable, a.Unresolved)
	if a.Reason != "" {
		fmt.Fprintf(w, " (%s)", a.Reason)
	}
	fmt.Fprintln(w)
	if c := a.CDR; c != nil {
		fmt.Fprintf(w, "audit, CDRs %s: %d records (%d replay records, %d duplicates dropped), charged %d, debited %d, %d subscribers, mismatches %d\n",
			cdrVerdict(c), c.Records, c.Replays, c.Duplicates, c.Charged, c.Debited, c.Subscribers, c.Mismatches)
		for _, e := range c.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if a.Independent {
		fmt.Fprintf(w, "audit, independent of what the CHF reported: expected (rated by the audit's tariff) %d, debited + overage %d, overage %d, mismatches %d\n",
			a.Expected, a.Debited+a.Overage, a.Overage, a.ExpectedMismatches)
		if a.Offline != 0 || a.BucketValue != 0 || a.BucketInexact != 0 {
			fmt.Fprintf(w, "  + offline usage recorded %d + bucket units' value %d = %d (%d subscribers left out: a data bucket paid part of their usage)\n",
				a.Offline, a.BucketValue, a.Debited+a.Overage+a.Offline+a.BucketValue, a.BucketInexact)
		}
	}
	if r.Retransmits > 0 || r.Abandoned > 0 {
		fmt.Fprintf(w, "retransmissions sent %d, requests abandoned %d\n", r.Retransmits, r.Abandoned)
	}
	if r.Retried > 0 || r.RetriesDropped > 0 {
		fmt.Fprintf(w, "retries of requests shed or without a definitive answer %d, requests they resolved %d, retries dropped (queue full or past the drain bound) %d\n",
			r.Retried, r.RetryResolved, r.RetriesDropped)
	}
	fmt.Fprintf(w, "%s\n", r.usageLostLine())
	for _, e := range a.Examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
	if len(r.Thresholds) > 0 {
		res := "PASS"
		if !r.ThresholdsOK {
			res = "FAIL"
		}
		fmt.Fprintf(w, "\nthresholds %s:\n", res)
		for _, v := range r.Thresholds {
			fmt.Fprintf(w, "  %s\n", v)
		}
	}
}

// sutUs formats the SUT's CPU per transaction, n/a without a SUT source.
func (r *Result) sutUs() string {
	for k := range r.CPUSeconds {
		if k != LoadgenComponent {
			return fmt.Sprintf("%.1f", r.SUTCPUUsTxn)
		}
	}
	return "n/a (no --cpu source)"
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

func by(sig string) string {
	if sig == "" {
		return ""
	}
	return " by " + sig
}

// opOrder returns operation names in engine order, then any others.
func opOrder(r *Result) []string {
	order := []string{"create", "update", "release", "event", "balance"}
	seen := map[string]bool{}
	var out []string
	for _, n := range order {
		if _, ok := r.Ops[n]; ok {
			out = append(out, n)
			seen[n] = true
		}
	}
	var rest []string
	for n := range r.Ops {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteCSV writes the per-second time series: a header row, a units row
// (the second line), then one row per second; per-operation and CPU
// columns follow the totals.
func (r *Result) WriteCSV(w io.Writer) error {
	comps, ops := r.Components(), opOrder(r)
	cw := csv.NewWriter(w)
	head := []string{"t_s", "phase", "offered", "completed", "errors", "late", "dropped", "in_flight", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms",
		"service_p50_ms", "service_p99_ms", "sched_lag_p99_ms"}
	units := []string{"s", "", "req/s", "req/s", "req/s", "req/s", "req/s", "req", "ms", "ms", "ms", "ms", "ms", "ms", "ms", "ms"}
	for _, o := range ops {
		head = append(head, o+"_completed", o+"_errors")
		units = append(units, "req/s", "req/s")
	}
	for _, c := range comps {
		head = append(head, "cpu_"+c)
		units = append(units, "% of one core")
	}
	if r.Host != nil {
		head = append(head, "host_busy", "host_steal")
		units = append(units, "% of one core", "% of one core")
	}
	freezes := r.HostFreezes != nil
	if freezes {
		head = append(head, "host_freeze")
		units = append(units, "ms (longest freeze of 2 ms or more, 0 = none)")
	}
	if err := cw.Write(head); err != nil {
		return fmt.Errorf("cannot write CSV: %w", err)
	}
	if err := cw.Write(units); err != nil {
		return fmt.Errorf("cannot write CSV: %w", err)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, p := range r.Series {
		row := []string{strconv.Itoa(p.Second), p.Phase, i(p.Offered), i(p.Completed), i(p.Errors), i(p.Late), i(p.Dropped), i(p.InFlight),
			f(p.P50), f(p.P90), f(p.P99), f(p.P999), f(p.Max), f(p.ServiceP50), f(p.ServiceP99), f(p.SchedLagP99)}
		for _, o := range ops {
			row = append(row, i(p.OpCompleted[o]), i(p.OpErrors[o]))
		}
		for _, c := range comps {
			row = append(row, f(p.CPU[c]))
		}
		if r.Host != nil {
			row = append(row, f(p.HostBusy), f(p.HostSteal))
		}
		if freezes {
			v := ""
			if p.HostFreezeMs != nil {
				v = f(*p.HostFreezeMs)
			}
			row = append(row, v)
		}
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("cannot write CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("cannot write CSV: %w", err)
	}
	return nil
}

// WriteMarkdown writes the report as Markdown.
func (r *Result) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# loadgen result\n\n")
	fmt.Fprintf(w, "Started %s, %s against %s, scenario `%s`, %.1f s measured.\n\n", r.Started.UTC().Format("2006-01-02 15:04:05Z"), r.Proto, strings.Join(r.Targets, ", "), r.Scenario.Name, r.DurationS)
	if r.Interrupted {
		fmt.Fprintf(w, "**INTERRUPTED%s**: the run was cut short; the figures cover only what ran.\n\n", by(r.InterruptedBy))
	}
	for _, x := range r.Incomplete {
		fmt.Fprintf(w, "**INCOMPLETE**: %s\n\n", x)
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(w, "**WARNING**: %s\n\n", x)
	}
	fmt.Fprintf(w, "Verdict: %s.\n\n", mdVerdict(r.verdict()))
	if len(r.Thresholds) > 0 {
		fmt.Fprintf(w, "| threshold | actual | limit | verdict |\n|---|---:|---:|---|\n")
		for _, v := range r.Thresholds {
			res, act := "pass", v.format(v.Actual)
			if !v.Pass {
				res = "**FAIL**"
			}
			if v.NA {
				act = "n/a"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", v.Expr, act, v.format(v.Limit), res)
		}
		fmt.Fprintln(w)
	}
	r.WriteProvenance(w)
	fmt.Fprintf(w, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(w, "| offered TPS | %.0f |\n| achieved TPS | %.0f |\n| transactions | %d |\n| errors | %d (%.3f%%) |\n| late / dropped | %d / %d |\n",
		r.OfferedTPS, r.TPS, r.Transactions, r.Errors, 100*r.ErrorRate, r.Late, r.Dropped)
	fmt.Fprintf(w, "| latency p50 / p90 / p99 / p99.9 / max / mean (ms) | %.3f / %.3f / %.3f / %.3f / %.3f / %.3f |\n",
		r.LatencyMs.P50, r.LatencyMs.P90, r.LatencyMs.P99, r.LatencyMs.P999, r.LatencyMs.Max, r.LatencyMs.Mean)
	fmt.Fprintf(w, "| service time p50 / p99 (ms) | %.3f / %.3f |\n", r.ServiceMs.P50, r.ServiceMs.P99)
	if l := r.AdmittedLatencyMs; l != nil && r.Shed > 0 {
		fmt.Fprintf(w, "| admitted latency (shed excluded) p50 / p99 / p99.9 (ms) | %.3f / %.3f / %.3f |\n| shed (503 / 3004) | %d (%.2f%%) |\n",
			l.P50, l.P99, l.P999, r.Shed, 100*r.ShedShare)
	}
	fmt.Fprintf(w, "| jitter (CV of latency) | %.3f |\n", r.JitterCV)
	for _, c := range r.Components() {
		fmt.Fprintf(w, "| CPU %% %s | %.1f |\n", c, r.CPUPercent[c])
	}
	fmt.Fprintf(w, "| SUT CPU µs / transaction | %s |\n| loadgen CPU µs / transaction | %.1f |\n", r.sutUs(), r.LoadgenUsTxn)
	if h := r.Host; h != nil {
		fmt.Fprintf(w, "| host CPU (this machine, %d cores) | %s |\n", h.Cores, h.summary())
	}
	if f := r.HostFreezes; f != nil {
		fmt.Fprintf(w, "| host freezes (SCHED_FIFO probe, %d CPUs, every %.0f ms) | %s |\n", len(f.CPUs), f.PeriodMs, f.Line())
	} else if r.HostFreezesNote != "" {
		fmt.Fprintf(w, "| host freezes | %s |\n", r.HostFreezesNote)
	}
	for _, k := range sortedKeys(r.Memory) {
		fmt.Fprintf(w, "| RSS MiB %s (peak) | %.0f (%.0f) |\n", k, float64(r.Memory[k].RSS)/(1<<20), float64(r.Memory[k].Peak)/(1<<20))
	}
	if s := r.Sessions; s != nil && (s.OpenPeak > 0 || s.Limited > 0) {
		fmt.Fprintf(w, "| open sessions end / peak / not started (bound) | %d / %d / %d (%d) |\n| loadgen bytes per open session | %.0f |\n",
			s.OpenEnd, s.OpenPeak, s.Limited, s.MaxOpenSessions, s.BytesPerOpenSession)
	}
	for _, h := range r.Hops {
		fmt.Fprintf(w, "| hop %s %s: count, p50 / p99 / p99.9 (ms) | %d, %s / %s / %s |\n", h.Service, h.Hop, h.Count, hopMs(h.P50Ms, h.P50Bound), hopMs(h.P99Ms, h.P99Bound), hopMs(h.P999Ms, h.P999Bound))
	}
	verdict := "pass"
	if r.Audit.Skipped {
		verdict = "skipped"
	} else if !r.Audit.OK {
		verdict = "**FAIL**"
	}
	fmt.Fprintf(w, "| audit | %s (%d checked, charged %d, debited %d) |\n", verdict, r.Audit.Checked, r.Audit.Charged, r.Audit.Debited)
	if a := r.Audit; a.Independent {
		fmt.Fprintf(w, "| audit, independent (tariff-rated) | expected %d, debited + overage %d, %d mismatches |\n", a.Expected, a.Debited+a.Overage, a.ExpectedMismatches)
	}
	if c := r.Audit.CDR; c != nil {
		fmt.Fprintf(w, "| audit, CDRs | %s (%d records, %d replay records, %d duplicates dropped; charged %d, debited %d, %d mismatches) |\n",
			cdrVerdict(c), c.Records, c.Replays, c.Duplicates, c.Charged, c.Debited, c.Mismatches)
	}
	lost := "0"
	if r.UsageLost.Requests > 0 {
		lost = "**" + strings.TrimPrefix(r.usageLostLine(), "usage lost: ") + "**"
	}
	fmt.Fprintf(w, "| usage lost (not delivered after the retries) | %s |\n", lost)
	if r.Retried > 0 || r.RetriesDropped > 0 {
		fmt.Fprintf(w, "| retries sent / requests they resolved / dropped | %d / %d / %d |\n", r.Retried, r.RetryResolved, r.RetriesDropped)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| op | count | errors | late | dropped | TPS | p50 ms | p99 ms | p99.9 ms | max ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range opOrder(r) {
		o := r.Ops[name]
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %.0f | %.3f | %.3f | %.3f | %.3f |\n", name, o.Count, o.Errors, o.Late, o.Dropped, o.TPS,
			o.LatencyMs.P50, o.LatencyMs.P99, o.LatencyMs.P999, o.LatencyMs.Max)
	}
	r.writeNotificationsMarkdown(w)
	if len(r.ErrorClasses) > 0 {
		fmt.Fprintf(w, "\n| error class | count |\n|---|---:|\n")
		for _, k := range sortedKeys(r.ErrorClasses) {
			fmt.Fprintf(w, "| %s | %d |\n", k, r.ErrorClasses[k])
		}
	}
	if len(r.Audit.Examples) > 0 {
		fmt.Fprintf(w, "\nAudit findings:\n\n")
		for _, e := range r.Audit.Examples {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
	if c := r.Audit.CDR; c != nil && (len(c.Examples) > 0 || c.Reason != "") {
		fmt.Fprintf(w, "\nCDR check findings: %s\n\n", c.Reason)
		for _, e := range c.Examples {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
}

// cdrVerdict is the CDR check's verdict word.
func cdrVerdict(c *audit.CDRResult) string {
	switch {
	case c.Skipped:
		return "SKIPPED"
	case !c.OK:
		return "FAIL"
	}
	return "PASS"
}

// WriteProvenance writes the provenance table (Markdown): label,
// versions, scenario, host, kernel, CPU and command line.
func (r *Result) WriteProvenance(w io.Writer) {
	p := r.Provenance
	fmt.Fprintf(w, "| provenance | |\n|---|---|\n")
	fmt.Fprintf(w, "| label | %s |\n| loadgen / chf / Go | %s / %s / %s |\n| scenario | %s (hash %s) |\n| host | %s |\n| kernel | %s |\n| CPU | %s x%d |\n| store | %s |\n| chf runtime profile | %s |\n| command | `%s` |\n\n",
		orNA(r.Label), orNA(p.LoadgenVersion), orNA(p.CHFVersion), orNA(p.GoVersion), r.Scenario.Name, orNA(p.ScenarioHash), orNA(p.Host), orNA(p.Kernel), orNA(p.CPUModel), p.CPUs,
		p.Store, orNA(p.RuntimeProfile), strings.Join(p.CommandLine, " "))
}

// mdVerdict makes the verdict stand out (bold; red on the page when it
// failed).
func mdVerdict(v string) string { return "**" + v + "**" }

// Files names the report files WriteAll writes.
type Files struct {
	JSON, CSV, Markdown, HTML string
}

// WriteAll writes result.json, series.csv, report.md and report.html
// into dir (created when missing).
func (r *Result) WriteAll(dir string) (Files, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Files{}, fmt.Errorf("cannot create report directory: %w", err)
	}
	f := Files{
		JSON:     filepath.Join(dir, "result.json"),
		CSV:      filepath.Join(dir, "series.csv"),
		Markdown: filepath.Join(dir, "report.md"),
		HTML:     filepath.Join(dir, "report.html"),
	}
	if err := r.WriteJSON(f.JSON); err != nil {
		return f, err
	}
	write := func(path string, fn func(io.Writer) error) error {
		out, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("cannot create %s: %w", path, err)
		}
		if err := fn(out); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		return nil
	}
	if err := write(f.CSV, r.WriteCSV); err != nil {
		return f, err
	}
	if err := write(f.Markdown, func(w io.Writer) error { r.WriteMarkdown(w); return nil }); err != nil {
		return f, err
	}
	if err := write(f.HTML, r.WriteHTML); err != nil {
		return f, err
	}
	return f, nil
}

// writeMemory prints the components' resident memory and the sessions'
// line.
func (r *Result) writeMemory(w io.Writer) {
	if len(r.Memory) > 0 {
		fmt.Fprintf(w, "RSS MiB at the window's end (peak):")
		for _, k := range sortedKeys(r.Memory) {
			m := r.Memory[k]
			fmt.Fprintf(w, " %s=%.0f (%.0f)", k, float64(m.RSS)/(1<<20), float64(m.Peak)/(1<<20))
		}
		fmt.Fprintln(w)
	}
	if s := r.Sessions; s != nil && (s.OpenPeak > 0 || s.Limited > 0) {
		fmt.Fprintf(w, "sessions open: %d at the window's end, peak %d (bound %d, %d not started at it); loadgen heap %.0f MiB = %.0f bytes per open session (engine's part %d)\n",
			s.OpenEnd, s.OpenPeak, s.MaxOpenSessions, s.Limited, float64(s.LoadgenHeapBytes)/(1<<20), s.BytesPerOpenSession, s.FlowBytes)
	}
}

// writeHops prints the hops' latency table.
func (r *Result) writeHops(w io.Writer) {
	if len(r.Hops) == 0 {
		if r.HopsNote != "" {
			fmt.Fprintf(w, "hops: %s\n", r.HopsNote)
		}
		return
	}
	fmt.Fprintln(w, "hops (the services' histograms over the window; a call includes its wait for a batch, a round trip is one batch):")
	fmt.Fprintf(w, "  %-8s %-20s %10s %9s %9s %9s\n", "service", "hop", "count", "p50 ms", "p99 ms", "p99.9 ms")
	for _, h := range r.Hops {
		fmt.Fprintf(w, "  %-8s %-20s %10d %9s %9s %9s\n", h.Service, h.Hop, h.Count,
			hopMs(h.P50Ms, h.P50Bound), hopMs(h.P99Ms, h.P99Bound), hopMs(h.P999Ms, h.P999Bound))
	}
	if r.HopsNote != "" {
		fmt.Fprintf(w, "hops: %s\n", r.HopsNote)
	}
}

// hopMs formats a hop's quantile: "< X" within the first bucket, "> X"
// beyond the last.
func hopMs(ms float64, bound string) string {
	switch bound {
	case "below":
		return fmt.Sprintf("< %.3g", ms)
	case "above":
		return fmt.Sprintf("> %.3g", ms)
	}
	return fmt.Sprintf("%.3g", ms)
}

// summary is the host's CPU in one line: busy, idle, what no component
// accounts for, stolen.
func (h *HostCPU) summary() string {
	s := fmt.Sprintf("busy %.1f%%, idle %.0f%% of the machine", h.BusyPercent, h.IdlePercent)
	if h.OtherPercent != nil {
		s += fmt.Sprintf(", not the run's processes %.1f%%", *h.OtherPercent)
	}
	return s + fmt.Sprintf(", steal %.1f%%", h.StealPercent)
}

// usageLostLine says what usage the run lost ("usage lost: 0" when none).
func (r *Result) usageLostLine() string {
	l := r.UsageLost
	if l.Requests == 0 {
		return "usage lost: 0 (every unit reported was delivered)"
	}
	s := fmt.Sprintf("usage lost: %d requests FAIL (%d refused on every attempt, %d in doubt, %d abandoned at the end): volume %d octets, time %d s, %d service units",
		l.Requests, l.Refused, l.InDoubt, l.Abandoned, l.TotalVolume, l.Time, l.ServiceSpecificUnits)
	if l.Rated {
		s += fmt.Sprintf(", rated %d minor units", l.ExpectedMinorUnits)
	}
	return s
}
