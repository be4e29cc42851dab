package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chassis/tlsconfig"
	"github.com/chf-testbed/testbed/loadgen/testbed"
)

func init() {
	register("local", "start `chf local` services, run the default scenario, write reports under ./results/<timestamp>/, stop", localCmd)
}

var localHelp = help{
	name:     "local",
	synopsis: "loadgen local [--duration 30s] [--rate N] [--json FILE] [flags]",
	text: "Starts the CHF's services locally (aslite, abm with provisioned accounts, ocp, cgw; with\n" +
		"--proto gy the cgw's Diameter Gy front too, which the load then uses), runs the\n" +
		"scenario (default: the built-in mix at 1000 TPS), prints the report, writes result.json, series.csv,\n" +
		"report.md and report.html under ./results/<timestamp>/, then stops the CHF.\n" +
		"The subscriber range is the provisioned accounts (--accounts) unless --subscribers is smaller.\n" +
		"SIGINT or SIGTERM stops the run, writes the report marked interrupted and stops the CHF (exit 130 / 143).",
}

// localFlags are the flags of the commands that start local CHFs.
type localFlags struct {
	chf      *string
	accounts *int
	balance  *int64
	tlsDir   *string
}

func (l *localFlags) register(fs *flag.FlagSet, accountsHelp string) {
	l.chf = fs.String("chf", "", "chf binary (default: next to loadgen, ./bin/chf, PATH, else built from ./cmd/chf)")
	l.accounts = fs.Int("accounts", 100_000, accountsHelp)
	l.balance = fs.Int64("balance", 100_000_000, "initial balance of every provisioned account, in minor units, > 0")
	l.tlsDir = fs.String("tls-dir", "", "run the local CHF over TLS, mTLS on every hop (chf local --tls-dir), with the CA and certificate in this directory (made there when it has no ca.pem), and send Nchf over TLS with them; empty = cleartext")
}

// apply checks the local flags and makes the run's subscriber range the
// provisioned accounts: --subscribers may narrow it, never exceed it.
func (l *localFlags) apply(f *runFlags) error {
	if *l.accounts <= 0 || *l.accounts > 100_000_000 {
		return usageError{fmt.Errorf("invalid --accounts: must be 1..100000000, got %d", *l.accounts)}
	}
	if *l.balance <= 0 {
		return usageError{fmt.Errorf("invalid --balance: must be positive, got %d", *l.balance)}
	}
	if l.tlsDir != nil && *l.tlsDir != "" { // nil: the gate, which has no --tls-dir
		if f.proto == "gy" {
			return usageError{errors.New("invalid --tls-dir: Gy has no TLS here")}
		}
		d := tlsconfig.Dir(*l.tlsDir)
		if err := d.Ensure("127.0.0.1", "localhost", "::1"); err != nil {
			return usageError{fmt.Errorf("invalid --tls-dir: %w", err)}
		}
		f.tls, f.localTLSDir = true, *l.tlsDir
		f.caFile, f.certFile, f.keyFile = d.CA(), d.Cert(), d.Key()
	}
	set := setFlags(f.fs)
	switch {
	case set["subscribers"] && f.subscribers > *l.accounts:
		return usageError{fmt.Errorf("invalid --subscribers: %d exceeds the %d provisioned accounts (--accounts)", f.subscribers, *l.accounts)}
	case !set["subscribers"]:
		f.subscribers = *l.accounts
		f.fs.Set("subscribers", fmt.Sprint(*l.accounts))
	}
	if f.initialBalance == 0 {
		f.initialBalance = *l.balance // freshly provisioned: no need to read balances first
	}
	return nil
}

// chfVersion returns `chf --version` of the binary, "" when it has none.
func chfVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// resultsDir creates dir for a command's files; its cleanup removes it
// again when the command failed before writing anything into it (an
// empty chf.log aside).
func resultsDir(dir string) (cleanup func(failed bool), err error) {
	_, statErr := os.Stat(dir)
	existed := statErr == nil
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create results directory: %w", err)
	}
	return func(failed bool) {
		if !failed || existed {
			return
		}
		log := filepath.Join(dir, "chf.log")
		if fi, err := os.Stat(log); err == nil && fi.Size() == 0 {
			os.Remove(log)
		}
		os.Remove(dir) // only when empty
	}, nil
}

func localCmd(args []string) (err error) {
	fs := newFlagSet("local")
	var f runFlags
	f.register(fs)
	var l localFlags
	l.register(fs, "accounts to provision (the subscriber range of the run unless --subscribers is smaller)")
	results := fs.String("results", "results", "directory under which a <timestamp>/ directory receives every report file")
	chfLogs := fs.Bool("chf-logs", false, "copy the CHF services' logs to stderr (default: into chf.log in the results directory)")
	cgwArgs := fs.String("cgw-args", "", "extra flags for the cgw process, space-separated")
	ocpArgs := fs.String("ocp-args", "", "extra flags for the ocp process, space-separated")
	abmArgs := fs.String("abm-args", "", "extra flags for the abm process, space-separated")
	if err := parseFlags(fs, localHelp, args); err != nil {
		return err
	}
	if err := l.apply(&f); err != nil {
		return err
	}
	if !setFlags(fs)["rate"] && !setFlags(fs)["sessions-per-second"] && f.scenarioFile == "" {
		f.rate = 1000
		fs.Set("rate", "1000")
	}
	if f.outDir == "" {
		f.outDir = filepath.Join(*results, time.Now().UTC().Format("20060102-150405"))
	}
	o, err := f.options(nil) // every flag checked before anything starts
	if err != nil {
		return err
	}
	cleanup, err := resultsDir(f.outDir)
	if err != nil {
		return err
	}
	defer func() { cleanup(err != nil && !errors.As(err, new(interrupted))) }()
	logs := os.Stderr
	if !*chfLogs {
		if logs, err = os.Create(filepath.Join(f.outDir, "chf.log")); err != nil {
			return fmt.Errorf("cannot create chf.log: %w", err)
		}
		defer logs.Close()
	}
	s := onSignals()
	defer s.Stop()
	o.Log.Info("starting the local CHF", "accounts", *l.accounts)
	t0 := time.Now()
	tb, err := testbed.Start(s.Context(), testbed.Options{
		CHF: *l.chf, Accounts: *l.accounts, Balance: *l.balance, First: o.Scenario.Subscribers.First,
		Logs: logs, Log: o.Log, CGWArgs: strings.Fields(*cgwArgs), OCPArgs: strings.Fields(*ocpArgs), ABMArgs: strings.Fields(*abmArgs), Diameter: f.proto == "gy",
		TLSDir: f.localTLSDir,
	})
	if err != nil {
		return s.wrap(err)
	}
	defer func() {
		if err := tb.Stop(); err != nil {
			o.Log.Warn("the local CHF stopped with an error", "err", err)
		}
	}()
	o.Log.Info("local CHF ready", "target", tb.Target, "diameter", tb.Diameter, "pids", tb.Pids, "chf", tb.CHF, "took", time.Since(t0).Round(time.Millisecond))
	o.Provenance.CHFVersion = chfVersion(s.Context(), tb.CHF)
	o.Targets = f.localTargets(tb)
	o.BalanceTargets = []string{tb.Target}
	o.CPU = append(o.CPU, tb.CPU()...)
	if o.Label == "" {
		o.Label = "local"
	}
	err = f.execute(s, o)
	select {
	case <-tb.Done():
		if s.Signal() == nil {
			err = errors.Join(err, fmt.Errorf("the local CHF failed during the run: %w", tb.Err()))
		}
	default:
	}
	return err
}
