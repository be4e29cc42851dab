package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/chf-testbed/testbed/loadgen/compare"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
)

func init() {
	register("merge", "combine shard results (loadgen run --shard i/n) into one exact report", mergeCmd)
	register("compare", "side-by-side table of runs or sweeps with ratios to a baseline (Markdown, HTML)", compareCmd)
}

var mergeHelp = help{
	name:     "merge",
	synopsis: "loadgen merge -o OUT.json IN.json...",
	text: "Counts add up and HDR histograms merge exactly; see loadgen/README.md for CPU and series.\n" +
		"The inputs must be distinct shards (--shard i/n) of one run: merge refuses a shard twice, different\n" +
		"shard counts, different scenarios (scenario hash) and start times further apart than --start-tolerance.\n" +
		"A missing shard is merged without and noted in the result as incomplete. The merged result is checked\n" +
		"against the shards' thresholds (exit 6 when one fails).",
}

func mergeCmd(args []string) error {
	fs := newFlagSet("merge")
	out := fs.String("o", "", "merged JSON result to write (required)")
	dir := fs.String("out", "", "also write every report file (result.json, series.csv, report.md, report.html) into this directory")
	tol := fs.Duration("start-tolerance", report.DefaultStartTolerance, "largest spread of the shards' start times, >= 0 (shards must run at the same time)")
	inputs, err := parseInterspersed(fs, mergeHelp, args)
	if err != nil {
		return err
	}
	if *out == "" || len(inputs) == 0 {
		return usageError{errors.New("need -o OUT.json and at least one input")}
	}
	if *tol < 0 {
		return usageError{fmt.Errorf("invalid --start-tolerance: must not be negative, got %s", *tol)}
	}
	var in []*report.Result
	for _, p := range inputs {
		r, err := report.ReadJSON(p)
		if err != nil {
			return err
		}
		in = append(in, r)
	}
	m, err := report.Merge(report.MergeOptions{StartTolerance: max(*tol, 1)}, in...)
	if err != nil {
		return err
	}
	m.WriteSummary(os.Stdout)
	if err := m.WriteJSON(*out); err != nil {
		return err
	}
	if *dir != "" {
		if _, err := m.WriteAll(*dir); err != nil {
			return err
		}
		printIndex(*dir)
	}
	switch {
	case !m.Audit.Skipped && !m.Audit.OK:
		return fmt.Errorf("%w: %s", errAuditMerged, m.Audit.Reason)
	case !m.ThresholdsOK:
		return fmt.Errorf("%w: merged result", run.ErrThresholds)
	}
	return nil
}

var errAuditMerged = fmt.Errorf("merged audit failed: %w", run.ErrAudit)

var compareHelp = help{
	name:     "compare",
	synopsis: "loadgen compare A.json B.json ... [--labels a,b] [--baseline LABEL|N] [--md FILE] [--html FILE]",
	text: "Inputs are run or sweep results (a sweep is represented by its knee). Columns: offered and achieved TPS,\n" +
		"p50, p99, p99.9, jitter (CV), SUT CPU µs per transaction and CPU % per component, with ratios to the\n" +
		"baseline. A figure a run did not measure is n/a, and so is any ratio against it.",
}

func compareCmd(args []string) error {
	fs := newFlagSet("compare")
	labels := fs.String("labels", "", "comma-separated labels, one per input (default: each result's label, else its file name)")
	baseline := fs.String("baseline", "", "the baseline run: its label, or its index among the inputs counting from 0 (default: the first)")
	md := fs.String("md", "", "write the Markdown table to this file (it is printed on stdout anyway)")
	html := fs.String("html", "", "write the HTML page with grouped bar charts to this file")
	inputs, err := parseInterspersed(fs, compareHelp, args)
	if err != nil {
		return err
	}
	if len(inputs) == 0 {
		return usageError{errors.New("need at least one result file")}
	}
	var ls []string
	if *labels != "" {
		ls = strings.Split(*labels, ",")
		if len(ls) != len(inputs) {
			return usageError{fmt.Errorf("invalid --labels: %d labels for %d inputs", len(ls), len(inputs))}
		}
	}
	var runs []compare.Run
	for i, p := range inputs {
		l := ""
		if ls != nil {
			l = ls[i]
		}
		r, err := compare.Load(p, l)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	b, err := compare.FindBaseline(runs, *baseline)
	if err != nil {
		return usageError{fmt.Errorf("invalid --baseline: %w", err)}
	}
	t, err := compare.New(runs, b)
	if err != nil {
		return usageError{err}
	}
	t.WriteMarkdown(os.Stdout)
	if *md != "" {
		f, err := os.Create(*md)
		if err != nil {
			return fmt.Errorf("cannot create %s: %w", *md, err)
		}
		t.WriteMarkdown(f)
		if err := f.Close(); err != nil {
			return fmt.Errorf("cannot write %s: %w", *md, err)
		}
	}
	if *html != "" {
		f, err := os.Create(*html)
		if err != nil {
			return fmt.Errorf("cannot create %s: %w", *html, err)
		}
		if err := t.WriteHTML(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("cannot write %s: %w", *html, err)
		}
	}
	return nil
}
