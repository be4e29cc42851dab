package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/testbed"
)

func init() {
	register("local", "start `chf local` services, run the default scenario, write reports under ./results/<timestamp>/, stop", localCmd)
}

func localCmd(args []string) error {
	fs := flag.NewFlagSet("loadgen local", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	chfBin := fs.String("chf", "", "chf binary (default: next to loadgen, ./bin/chf, PATH, else built from ./cmd/chf)")
	accounts := fs.Int("accounts", 100_000, "accounts to provision (the subscriber range of the run unless --subscribers is smaller)")
	balance := fs.Int64("balance", 100_000_000, "initial balance of every provisioned account, in minor units")
	results := fs.String("results", "results", "directory under which a <timestamp>/ directory receives every report file")
	chfLogs := fs.Bool("chf-logs", false, "copy the CHF services' logs to stderr (default: into chf.log in the results directory)")
	cgwArgs := fs.String("cgw-args", "", "extra flags for the cgw process, space-separated")
	ocpArgs := fs.String("ocp-args", "", "extra flags for the ocp process, space-separated")
	abmArgs := fs.String("abm-args", "", "extra flags for the abm process, space-separated")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadgen local [--duration 30s] [--rate N] [--json FILE] [flags]\n\n"+
			"Starts the CHF's services locally (aslite, abm with provisioned accounts, ocp, cgw; with\n"+
			"--proto gy the cgw's Diameter Gy front too, which the load then uses), runs the\n"+
			"scenario (default: the built-in mix at 1000 TPS), prints the report, writes result.json, series.csv,\n"+
			"report.md and report.html under ./results/<timestamp>/, then stops the CHF.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.rate == 0 && f.sessionsPerSec == 0 && f.scenarioFile == "" {
		f.rate = 1000
	}
	if f.subscribers == 0 || f.subscribers > *accounts {
		f.subscribers = *accounts
	}
	if f.initialBalance == 0 {
		f.initialBalance = *balance // freshly provisioned: no need to read balances first
	}
	dir := filepath.Join(*results, time.Now().UTC().Format("20060102-150405"))
	if f.outDir == "" {
		f.outDir = dir
	}
	if err := os.MkdirAll(f.outDir, 0o755); err != nil {
		return fmt.Errorf("cannot create results directory: %w", err)
	}
	o, err := f.options(nil)
	if err != nil {
		return err
	}
	logs := os.Stderr
	if !*chfLogs {
		if logs, err = os.Create(filepath.Join(f.outDir, "chf.log")); err != nil {
			return fmt.Errorf("cannot create chf.log: %w", err)
		}
		defer logs.Close()
	}
	ctx, stop := signalContext()
	defer stop()
	o.Log.Info("starting the local CHF", "accounts", *accounts)
	t0 := time.Now()
	tb, err := testbed.Start(ctx, testbed.Options{
		CHF: *chfBin, Accounts: *accounts, Balance: *balance, First: o.Scenario.Subscribers.First,
		Logs: logs, Log: o.Log, CGWArgs: strings.Fields(*cgwArgs), OCPArgs: strings.Fields(*ocpArgs), ABMArgs: strings.Fields(*abmArgs), Diameter: f.proto == "gy",
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := tb.Stop(); err != nil {
			o.Log.Warn("the local CHF stopped with an error", "err", err)
		}
	}()
	o.Log.Info("local CHF ready", "target", tb.Target, "diameter", tb.Diameter, "pids", tb.Pids, "chf", tb.CHF, "took", time.Since(t0).Round(time.Millisecond))
	o.Targets = f.localTargets(tb)
	o.BalanceTargets = []string{tb.Target}
	o.CPU = append(o.CPU, tb.CPU()...)
	if o.Label == "" {
		o.Label = "local"
	}
	stopProfile, err := f.startProfile()
	if err != nil {
		return err
	}
	res, err := run.Execute(ctx, o)
	stopProfile()
	select {
	case <-tb.Done():
		err = errors.Join(err, fmt.Errorf("the local CHF failed during the run: %w", tb.Err()))
	default:
	}
	if res != nil {
		if werr := f.writeReports(res); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}
