package main

import (
	"errors"
	"flag"
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

func mergeCmd(args []string) error {
	fs := flag.NewFlagSet("loadgen merge", flag.ContinueOnError)
	out := fs.String("o", "", "merged JSON result to write (required)")
	dir := fs.String("out", "", "also write every report file (result.json, series.csv, report.md, report.html) into this directory")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadgen merge -o OUT.json IN.json...\n\nCounts add up and HDR histograms merge exactly; see loadgen/README.md for CPU and series.\n\nflags:\n")
		fs.PrintDefaults()
	}
	inputs, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *out == "" || len(inputs) == 0 {
		return usageError{errors.New("need -o OUT.json and at least one input")}
	}
	var in []*report.Result
	for _, p := range inputs {
		r, err := report.ReadJSON(p)
		if err != nil {
			return err
		}
		in = append(in, r)
	}
	m, err := report.Merge(in...)
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
	}
	if !m.Audit.Skipped && !m.Audit.OK {
		return fmt.Errorf("%w: %s", errAuditMerged, m.Audit.Reason)
	}
	return nil
}

var errAuditMerged = fmt.Errorf("merged audit failed: %w", run.ErrAudit)

func compareCmd(args []string) error {
	fs := flag.NewFlagSet("loadgen compare", flag.ContinueOnError)
	labels := fs.String("labels", "", "comma-separated labels, one per input (default: each result's label, else its file name)")
	baseline := fs.Int("baseline", 0, "index (0-based) of the baseline input")
	md := fs.String("md", "", "write the Markdown table to this file (it is printed on stdout anyway)")
	html := fs.String("html", "", "write the HTML page with grouped bar charts to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadgen compare A.json B.json ... [--labels a,b] [--baseline N] [--md FILE] [--html FILE]\n\nInputs are run or sweep results (a sweep is represented by its knee).\n\nflags:\n")
		fs.PrintDefaults()
	}
	inputs, err := parseInterspersed(fs, args)
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
			return usageError{fmt.Errorf("--labels has %d labels for %d inputs", len(ls), len(inputs))}
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
	t, err := compare.New(runs, *baseline)
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

// parseInterspersed parses flags that may come after positional arguments
// ("compare A.json B.json --baseline 1") and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
