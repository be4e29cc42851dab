package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/hops"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/loadgen/testbed"
	"github.com/chf-testbed/testbed/local"
	"github.com/chf-testbed/testbed/tariff"
)

// localCmd is loadgen local: parse and validate, then the phases of a
// localRunner: prepare, start, configure, execute, stop.
func localCmd(args []string) error {
	cfg := DefaultLocalConfig()
	fs := newFlagSet("local")
	cfg.RegisterFlags(fs)
	if err := parseFlags(fs, localHelp, args); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	s := onSignals()
	defer s.Stop()
	return cfg.execute(s)
}

// execute runs the validated configuration c under s: the phases of a
// localRunner (loadgen local, and each CHF run of loadgen bench).
func (c *LocalConfig) execute(s *stopper) (err error) {
	o, err := c.run.options(nil) // every flag checked before anything starts
	if err != nil {
		return err
	}
	cleanup, err := resultsDir(c.run.outDir)
	if err != nil {
		return err
	}
	defer func() { cleanup(err != nil && !errors.As(err, new(interrupted))) }()
	r := &localRunner{cfg: c, f: &c.run, o: o}
	defer r.close()
	if err := r.prepare(); err != nil {
		return err
	}
	if err := r.start(s.Context()); err != nil {
		return s.wrap(err)
	}
	defer r.stop()
	r.configure(s.Context())
	return r.execute(s)
}

// localRunner is one run of loadgen local, from its validated configuration
// to the stopped CHF.
type localRunner struct {
	cfg *LocalConfig
	f   *runFlags // &cfg.run
	o   run.Options

	logs          *os.File // chf.log; nil with --chf-logs
	temp          []string // directories removed at the end
	cgw, ocp, abm []string // the services' extra flags
	pprof         map[string]string
	tariffPath    string // the OCP's tariff file under --tariff-change
	plans         []local.Plan
	tb            *testbed.Testbed
	stopped       bool // tb stopped already (the CDR check stops it)
}

// prepare creates the run's files and the services' flags: chf.log, a
// data directory for a faulted aslite, the OCP's tariff (a fault run's,
// or the first of --tariff-change), --pprof ports for --sample-every, and
// the account plans.
func (r *localRunner) prepare() error {
	c := r.cfg
	if c.faultsAslite() && c.asliteDataDir == "" {
		dir, err := os.MkdirTemp("", "loadgen-aslite-")
		if err != nil {
			return fmt.Errorf("cannot create a data directory for aslite: %w", err)
		}
		r.temp = append(r.temp, dir)
		c.asliteDataDir = dir
	}
	if !c.chfLogs {
		logs, err := os.Create(filepath.Join(r.f.outDir, "chf.log"))
		if err != nil {
			return fmt.Errorf("cannot create chf.log: %w", err)
		}
		r.logs = logs
	}
	r.ocp = localOCPArgs(c.ocp, r.f.tariffFile)
	if c.writesFaultTariff() {
		file, err := r.writeFaultTariff()
		if err != nil {
			return err
		}
		r.ocp = append(r.ocp, "--tariff", file)
	}
	var err error
	if r.cgw, err = localCGWArgs(c.cgw, r.f.operatorToken); err != nil {
		return err
	}
	r.abm = c.abm.with()
	if c.change != nil {
		if err := r.prepareTariffChange(); err != nil {
			return err
		}
	}
	if err := r.preparePprof(); err != nil {
		return err
	}
	return r.preparePlans()
}

// writeFaultTariff writes the built-in tariff with the grants' validity
// shortened to --fault-validity into the results directory.
func (r *localRunner) writeFaultTariff() (string, error) {
	rates := slices.Clone(tariff.Default().RatingGroups)
	for i := range rates {
		rates[i].ValidityTime = int64(r.cfg.faultValidity.Seconds())
	}
	body, err := (&tariff.Tariff{RatingGroups: rates}).Marshal()
	if err != nil {
		return "", err
	}
	file := filepath.Join(r.f.outDir, "tariff.yaml")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		return "", fmt.Errorf("cannot write the fault run's tariff: %w", err)
	}
	return file, nil
}

// prepareTariffChange has the OCP rate from a file in the results
// directory, which the change replaces; the audit starts on the same
// first tariff. The ABM sweeps every 5s unless --abm-args sets
// --reservation-sweep.
func (r *localRunner) prepareTariffChange() error {
	first := []byte(tariff.DefaultFile)
	if r.f.tariffFile != "" {
		var err error
		if first, err = readfile.Read(r.f.tariffFile, tariff.MaxFileBytes); err != nil {
			return usageError{fmt.Errorf("invalid --tariff: %w", err)}
		}
	}
	r.tariffPath = filepath.Join(r.f.outDir, "tariff.yaml")
	if err := os.WriteFile(r.tariffPath, first, 0o644); err != nil {
		return fmt.Errorf("cannot write the OCP's tariff: %w", err)
	}
	r.ocp = localOCPArgs(r.cfg.ocp, r.tariffPath)
	change := r.cfg.change.audit
	if change.Old = r.o.Tariff; change.Old == nil {
		var err error
		if change.Old, err = audit.LoadTariff(""); err != nil {
			return err
		}
	}
	r.o.TariffChange = change
	if !r.cfg.abm.has("reservation-sweep") {
		r.abm = append(r.abm, "--reservation-sweep", "5s")
	}
	return nil
}

// preparePprof gives cgw, ocp and abm a --pprof port each for
// --sample-every (not with replicas: one port per service).
func (r *localRunner) preparePprof() error {
	r.pprof = map[string]string{}
	if r.cfg.sampleEvery <= 0 || len(r.cfg.reps) > 0 {
		return nil
	}
	for _, svc := range []struct {
		name  string
		flags *[]string
	}{{"cgw", &r.cgw}, {"ocp", &r.ocp}, {"abm", &r.abm}} {
		addr, err := local.FreePort() // never a port the CHF services get
		if err != nil {
			return err
		}
		*svc.flags = append(*svc.flags, "--pprof", addr)
		r.pprof[svc.name] = addr
	}
	return nil
}

// preparePlans makes the account plans of the scenario's postpaid and
// bucket shares, and the audit's initial state of each account.
func (r *localRunner) preparePlans() error {
	plans, initialOf, err := testbed.Plans(&r.o.Scenario, r.cfg.chf.balance)
	if err != nil {
		return usageError{err}
	}
	r.plans, r.o.InitialOf = plans, initialOf
	if r.cfg.change != nil && len(plans) > 0 {
		return usageError{errors.New("invalid --tariff-change: not with account plans (the audit values bucket units and credit on one tariff)")}
	}
	return nil
}

// start starts the local CHF.
func (r *localRunner) start(ctx context.Context) error {
	c, f := r.cfg, r.f
	logs := os.Stderr
	if r.logs != nil {
		logs = r.logs
	}
	r.o.Log.Info("starting the local CHF", "accounts", c.chf.accounts)
	t0 := time.Now()
	tb, err := testbed.Start(ctx, testbed.Options{
		CHF: c.chf.chf, Accounts: c.chf.accounts, Balance: c.chf.balance, First: r.o.Scenario.Subscribers.First,
		Logs: logs, Log: r.o.Log, CGWArgs: r.cgw, OCPArgs: r.ocp, ABMArgs: r.abm, AsliteArgs: strings.Fields(c.asliteArgs), Diameter: f.proto == "gy",
		Replicas: c.reps, AsliteDataDir: c.asliteDataDir, AsliteCommit: c.asliteCommit,
		TLSDir: f.localTLSDir, Plans: r.plans, CDRDir: c.cdrDir, Store: c.chf.store.config(f.outDir), RuntimeProfile: sched.Profile(f.runtimeProfile),
	})
	if err != nil {
		return err
	}
	r.tb = tb
	r.o.Log.Info("local CHF ready", "target", tb.Target, "diameter", tb.Diameter, "pids", tb.Pids, "chf", tb.CHF, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// configure points the run at the started CHF: targets, CPU sources,
// hops, provenance, faults and the CDR check.
func (r *localRunner) configure(ctx context.Context) {
	c, f, tb, o := r.cfg, r.f, r.tb, &r.o
	if c.cdrDir != "" {
		f.afterRun = func(res *report.Result, err error) error {
			r.stopped = true
			return checkCDRs(tb, c.cdrDir, *o, res, err)
		}
	}
	o.Provenance.CHFVersion = chfVersion(ctx, tb.CHF)
	o.Provenance.Store = storeProvenance(tb)
	o.Targets = f.localTargets(tb)
	o.BalanceTargets = tb.Targets
	o.CPU = append(o.CPU, tb.CPU()...)
	localHops(tb, o)
	if len(c.faults) > 0 {
		o.Faults, o.Injector = c.faults, tb
		o.ReservationSettle = 2 * c.faultValidity
		// A killed instance's CPU cannot be read across the window.
		o.CPUOptional = true
	}
	if o.Label == "" {
		o.Label = "local"
	}
}

// execute runs the load with the soak sampler and the tariff change,
// writes the reports, and fails the run when the CHF failed during it.
func (r *localRunner) execute(s *stopper) error {
	c, f := r.cfg, r.f
	var soak *soakSampler
	if c.sampleEvery > 0 {
		soak = startSoak(c.sampleEvery, r.tb.Pids, r.pprof)
	}
	if c.change != nil {
		go replaceTariff(s.Context(), r.o, c.change.audit, c.change.after, r.tariffPath, c.change.body)
	}
	err := f.execute(s, r.o)
	if soak != nil {
		res, _ := report.ReadJSON(filepath.Join(f.outDir, "result.json"))
		if serr := soak.finish(f.outDir, res); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	select {
	case <-r.tb.Done():
		if s.Signal() == nil {
			err = errors.Join(err, fmt.Errorf("the local CHF failed during the run: %w", r.tb.Err()))
		}
	default:
	}
	return err
}

// stop stops the local CHF unless the CDR check did.
func (r *localRunner) stop() {
	if r.stopped {
		return
	}
	if err := r.tb.Stop(); err != nil {
		r.o.Log.Warn("the local CHF stopped with an error", "err", err)
	}
}

// close closes chf.log and removes the temporary directories.
func (r *localRunner) close() {
	if r.logs != nil {
		r.logs.Close()
	}
	for _, d := range r.temp {
		os.RemoveAll(d)
	}
}

// checkCDRs stops the local CHF (its OCPs finish their CDR files on a
// clean stop), runs the audit's CDR check on dir against the debits the
// audit read and puts it into res.Audit; a failed check fails the run
// as a failed audit does.
func checkCDRs(tb *testbed.Testbed, dir string, o run.Options, res *report.Result, err error) error {
	var c audit.CDRResult
	serr := tb.Stop()
	switch {
	case res.Audit.Skipped || res.Audit.Checked == 0:
		c = audit.CDRResult{Dir: dir, Skipped: true, Reason: "the balance audit did not run: no debits to compare with"}
	case serr != nil:
		c = audit.CDRResult{Dir: dir, Reason: fmt.Sprintf("the CHF did not stop cleanly: %v", serr)}
	default:
		first, perr := scenario.ParseSUPI(o.Scenario.Subscribers.First)
		if perr != nil {
			c = audit.CDRResult{Dir: dir, Reason: fmt.Sprintf("cannot read the first subscriber: %v", perr)}
			break
		}
		c = audit.CheckCDR(dir, first, res.Audit.Debits)
	}
	if serr != nil {
		o.Log.Warn("the local CHF stopped with an error", "err", serr)
	}
	o.Log.Info("CDR check", "ok", c.OK, "skipped", c.Skipped, "records", c.Records, "replay_records", c.Replays, "charged", c.Charged, "debited", c.Debited, "mismatches", c.Mismatches)
	wasOK := res.Audit.OK
	res.Audit.AddCDR(c)
	if err == nil && wasOK && !res.Audit.OK {
		err = fmt.Errorf("%w: %s", run.ErrAudit, res.Audit.Reason)
	}
	return err
}

// replaceTariff replaces the OCP's tariff file at path with body after
// after (unless ctx ends first), marking the change for the audit just
// before.
func replaceTariff(ctx context.Context, o run.Options, c *audit.Change, after time.Duration, path string, body []byte) {
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	c.Mark(time.Now())
	tmp := path + ".new"
	err := os.WriteFile(tmp, body, 0o644)
	if err == nil {
		err = os.Rename(tmp, path) // the OCP never reads half a file
	}
	if err != nil {
		o.Log.Error("cannot replace the tariff file: the audit will fail", "err", err)
		return
	}
	o.Log.Info("tariff file replaced", "path", path, "at", c.At().Format(time.RFC3339Nano))
}

// localCGWArgs adds --operator-token-file FILE (absolute) for the CGW
// when the load generator has one and args do not set another, so that
// the local CGW guards its operator API and balance inquiry with the
// token the run sends.
func localCGWArgs(args serviceArgs, tokenFile string) ([]string, error) {
	if tokenFile == "" || args.has("operator-token-file") {
		return args.with(), nil
	}
	abs, err := filepath.Abs(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve --operator-token-file %s: %w", tokenFile, err)
	}
	return args.with("--operator-token-file", abs), nil
}

// localOCPArgs adds --tariff FILE for the OCP when loadgen's audit rates
// with that file, so that both rate from the same tariff.
func localOCPArgs(args serviceArgs, tariff string) []string {
	if tariff == "" {
		return args.with()
	}
	return args.with("--tariff", tariff)
}

// localHops has the run scrape the local CHF's /metrics for the report's
// hops (none under --tls-dir: the endpoints ask for a client
// certificate).
func localHops(tb *testbed.Testbed, o *run.Options) {
	if tb.Metrics != nil {
		o.Hops, o.HopsNote = hops.New(tb.Metrics), ""
	} else {
		o.Hops, o.HopsNote = nil, "not measured: the services' /metrics ask for a client certificate under --tls-dir"
	}
}
