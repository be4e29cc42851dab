package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/chassis/tlsconfig"
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
	store    storeFlags
}

// storeFlags are the store flags of the commands that start local CHFs
// (local.RegisterStoreFlags, as chf local has them).
type storeFlags struct {
	aerospike, namespace, kind, asdBinary string
	nodes                                 int
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	s.namespace, s.kind, s.nodes = local.DefaultNamespace, local.StoreAslite, 1
	local.RegisterStoreFlags(fs, &s.aerospike, &s.namespace, &s.kind, &s.asdBinary, &s.nodes)
}

// check checks the store flags (exit 2 naming the flag) and resolves the
// asd binary.
func (s *storeFlags) check() error {
	bin, err := local.CheckStoreFlags(s.aerospike, s.namespace, s.kind, s.asdBinary, s.nodes)
	if err != nil {
		return usageError{err}
	}
	s.asdBinary = bin
	return nil
}

// config is the local store of a run whose files go to dir (asd's
// directory is dir/asd).
func (s *storeFlags) config(dir string) local.StoreConfig {
	c := local.StoreConfig{Kind: s.kind, External: s.aerospike, Namespace: s.namespace, AsdBinary: s.asdBinary, Nodes: s.nodes}
	if s.kind == local.StoreAsd {
		abs, err := filepath.Abs(filepath.Join(dir, "asd"))
		if err != nil {
			abs = filepath.Join(dir, "asd")
		}
		c.Dir = abs
	}
	return c
}

// storeProvenance is the report's name for tb's store.
func storeProvenance(tb *testbed.Testbed) *report.Store {
	st := tb.Store()
	return &report.Store{Kind: st.Kind, Hosts: st.Hosts, Namespace: st.Namespace, Build: st.Build, Nodes: st.Nodes, External: st.External}
}

func (l *localFlags) register(fs *flag.FlagSet, accountsHelp string) {
	l.chf = fs.String("chf", "", "chf binary (default: next to loadgen, ./bin/chf, PATH, else built from ./cmd/chf)")
	l.accounts = fs.Int("accounts", 100_000, accountsHelp)
	l.balance = fs.Int64("balance", 100_000_000, "initial balance of every provisioned account, in minor units, > 0")
	l.tlsDir = fs.String("tls-dir", "", "run the local CHF over TLS, mTLS on every hop (chf local --tls-dir), with the CA and certificate in this directory (made there when it has no ca.pem), and send Nchf over TLS with them; empty = cleartext")
	l.store.register(fs)
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
	if err := l.store.check(); err != nil {
		return err
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
	if f.runtimeProfile == "" { // the services' default, which the run records
		f.runtimeProfile = string(sched.Production)
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
	asliteArgs := fs.String("aslite-args", "", "extra flags for the aslite process, space-separated (e.g. \"--flight-recorder DIR\")")
	replicas := fs.String("replicas", "", "instances per service, e.g. \"ocp=2,abm=2\" (cgw, ocp, abm; default 1 each), as chf local --replicas; the load spreads over every cgw")
	asliteDir := fs.String("aslite-data-dir", "", "make aslite durable with its log and snapshots in this directory (chf local --aslite-data-dir); a --fault on aslite without it uses a temporary one")
	asliteCommit := fs.String("aslite-commit", "sync", "with a durable aslite, its --commit: sync or interval")
	faultValidity := fs.Duration("fault-validity", 10*time.Second, "with --fault, the validity time of every grant (a tariff written to the results directory for the ocp), so the reservations of sessions a fault cut short expire, and the audit waits up to twice this for them")
	sampleEvery := fs.Duration("sample-every", 0, "sample each service's RSS, open files and goroutines (through a --pprof port given to cgw, ocp and abm) this often, with the p99 per interval, and write soak.json and soak.txt (flat, or where it grows) to the results directory; 0 = off (make soak sets 10s)")
	tariffChange := fs.String("tariff-change", "", "AFTER:FILE: replace the OCP's tariff file with FILE this long after the load starts (the OCP reloads it within a second, the ABM's sweep — --reservation-sweep 5s unless --abm-args sets one — finds the sessions granted under the old tariff and the CGW sends them REAUTHORIZATION); the audit rates each request on the tariff in force when it was sent, either for one sent from 2 s before to 3 s after the replacement; not with --fault or account plans")
	cdrDir := fs.String("cdr-dir", "", "the OCP writes CHF-CDRs into this directory (chf ocp --cdr-dir; with several OCPs a subdirectory each; other --cdr-* flags through --ocp-args), and the audit checks them once the CHF stopped: the charges of the records, each request counted once (cdr/README.md), equal the debits per subscriber; empty = no CDRs")
	var faultSpecs multiFlag
	fs.Var(&faultSpecs, "fault", "inject a fault at an offset into the measured window, ACTION:SERVICE:AT[:FOR]: kill (kill -9, restarted after FOR, default 2s) or stop (SIGSTOP for FOR) one instance of cgw, ocp, abm or aslite, or with --store asd a node of the Aerospike cluster (asd = node 0, asd1, asd2, ...), e.g. kill:ocp:10s:2s, kill:asd1:5s:3s; repeatable; the report gives errors, time to recover and the audit (for asd also the migrations, result store_faults)")
	if err := parseFlags(fs, localHelp, args); err != nil {
		return err
	}
	if err := l.apply(&f); err != nil {
		return err
	}
	reps, err := local.ParseReplicas(*replicas)
	if err != nil {
		return usageError{fmt.Errorf("invalid --replicas: %w", err)}
	}
	if *asliteCommit != "sync" && *asliteCommit != "interval" {
		return usageError{fmt.Errorf("invalid --aslite-commit %q: want sync or interval", *asliteCommit)}
	}
	if (*asliteDir != "" || *asliteArgs != "") && (l.store.kind != local.StoreAslite || l.store.aerospike != "") {
		return usageError{errors.New("invalid --aslite-data-dir/--aslite-args: aslite does not run with --store asd or --aerospike")}
	}
	var faults []run.Fault
	for _, spec := range faultSpecs {
		ft, err := run.ParseFault(spec)
		if err != nil {
			return usageError{fmt.Errorf("invalid --fault: %w", err)}
		}
		faults = append(faults, ft)
		if node, ok := ft.StoreNode(); ok {
			switch {
			case l.store.kind != local.StoreAsd:
				return usageError{fmt.Errorf("invalid --fault %s: a fault on asd needs --store asd", spec)}
			case node >= l.store.nodes:
				return usageError{fmt.Errorf("invalid --fault %s: asd%d is no node of the %d (--store-nodes; asd is node 0)", spec, node, l.store.nodes)}
			case ft.Action == run.FaultKill && l.store.nodes == 1:
				return usageError{fmt.Errorf("invalid --fault %s: killing the only asd node loses every balance (memory storage, replication factor 1); use --store-nodes 3, or stop:", spec)}
			}
		}
		if ft.Service == "aslite" && l.store.kind != local.StoreAslite || ft.Service == "aslite" && l.store.aerospike != "" {
			return usageError{fmt.Errorf("invalid --fault %s: aslite does not run with --store asd or --aerospike", spec)}
		}
		if ft.Service == "aslite" && *asliteDir == "" {
			dir, err := os.MkdirTemp("", "loadgen-aslite-")
			if err != nil {
				return fmt.Errorf("cannot create a data directory for aslite: %w", err)
			}
			defer os.RemoveAll(dir)
			*asliteDir = dir
		}
	}
	var change *audit.Change
	var changeBody []byte
	var changeAfter time.Duration
	if *tariffChange != "" {
		after, file, ok := strings.Cut(*tariffChange, ":")
		d, err := time.ParseDuration(after)
		if !ok || err != nil || d <= 0 || file == "" {
			return usageError{fmt.Errorf("invalid --tariff-change %q: want AFTER:FILE, AFTER a positive duration (20s)", *tariffChange)}
		}
		if changeBody, err = readfile.Read(file, tariff.MaxFileBytes); err != nil {
			return usageError{fmt.Errorf("invalid --tariff-change: %w", err)}
		}
		if _, err := tariff.Parse(changeBody); err != nil {
			return usageError{fmt.Errorf("invalid --tariff-change: the OCP would refuse %s: %w", file, err)}
		}
		newT, err := audit.ParseTariff(changeBody)
		if err != nil {
			return usageError{fmt.Errorf("invalid --tariff-change: %s: %w", file, err)}
		}
		switch {
		case len(faults) > 0:
			return usageError{errors.New("invalid --tariff-change: not with --fault (a fault run writes its own tariff)")}
		case strings.Contains(*ocpArgs, "--tariff"):
			return usageError{errors.New("invalid --tariff-change: not with --ocp-args --tariff (loadgen local writes the OCP's tariff file; give the first tariff with --tariff)")}
		}
		change = &audit.Change{New: newT, Before: 2 * time.Second, After: 3 * time.Second}
		changeAfter = d
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
	ocpFlags := localOCPArgs(strings.Fields(*ocpArgs), f.tariffFile)
	if len(faults) > 0 && !strings.Contains(*ocpArgs, "--tariff") && f.tariffFile == "" {
		if *faultValidity < time.Second {
			return usageError{fmt.Errorf("invalid --fault-validity %s: want at least 1s", *faultValidity)}
		}
		// The built-in tariff with the grants' validity shortened.
		rates := slices.Clone(tariff.Default().RatingGroups)
		for i := range rates {
			rates[i].ValidityTime = int64(faultValidity.Seconds())
		}
		body, err := (&tariff.Tariff{RatingGroups: rates}).Marshal()
		if err != nil {
			return err
		}
		tariffFile := filepath.Join(f.outDir, "tariff.yaml")
		if err := os.WriteFile(tariffFile, body, 0o644); err != nil {
			return fmt.Errorf("cannot write the fault run's tariff: %w", err)
		}
		ocpFlags = append(ocpFlags, "--tariff", tariffFile)
	}
	cgwFlags, abmFlags := strings.Fields(*cgwArgs), strings.Fields(*abmArgs)
	if cgwFlags, err = localCGWArgs(cgwFlags, f.operatorToken); err != nil {
		return err
	}
	tariffPath := ""
	if change != nil {
		// The OCP rates from a file in the results directory, which the
		// change replaces; the audit starts on the same first tariff.
		first := []byte(tariff.DefaultFile)
		if f.tariffFile != "" {
			if first, err = readfile.Read(f.tariffFile, tariff.MaxFileBytes); err != nil {
				return usageError{fmt.Errorf("invalid --tariff: %w", err)}
			}
		}
		tariffPath = filepath.Join(f.outDir, "tariff.yaml")
		if err := os.WriteFile(tariffPath, first, 0o644); err != nil {
			return fmt.Errorf("cannot write the OCP's tariff: %w", err)
		}
		ocpFlags = localOCPArgs(strings.Fields(*ocpArgs), tariffPath)
		if change.Old = o.Tariff; change.Old == nil {
			if change.Old, err = audit.LoadTariff(""); err != nil {
				return err
			}
		}
		o.TariffChange = change
		if !strings.Contains(*abmArgs, "--reservation-sweep") {
			abmFlags = append(abmFlags, "--reservation-sweep", "5s")
		}
	}
	pprof := map[string]string{}
	if *sampleEvery > 0 {
		if *sampleEvery < time.Second {
			return usageError{fmt.Errorf("invalid --sample-every %s: want at least 1s", *sampleEvery)}
		}
		if len(reps) == 0 { // one pprof port per service: not with replicas
			for _, svc := range []struct {
				name  string
				flags *[]string
			}{{"cgw", &cgwFlags}, {"ocp", &ocpFlags}, {"abm", &abmFlags}} {
				addr, err := local.FreePort() // never a port the CHF services get
				if err != nil {
					return err
				}
				*svc.flags = append(*svc.flags, "--pprof", addr)
				pprof[svc.name] = addr
			}
		}
	}
	plans, initialOf, err := testbed.Plans(&o.Scenario, *l.balance)
	if err != nil {
		return usageError{err}
	}
	o.InitialOf = initialOf
	if change != nil && len(plans) > 0 {
		return usageError{errors.New("invalid --tariff-change: not with account plans (the audit values bucket units and credit on one tariff)")}
	}
	s := onSignals()
	defer s.Stop()
	o.Log.Info("starting the local CHF", "accounts", *l.accounts)
	t0 := time.Now()
	tb, err := testbed.Start(s.Context(), testbed.Options{
		CHF: *l.chf, Accounts: *l.accounts, Balance: *l.balance, First: o.Scenario.Subscribers.First,
		Logs: logs, Log: o.Log, CGWArgs: cgwFlags, OCPArgs: ocpFlags, ABMArgs: abmFlags, AsliteArgs: strings.Fields(*asliteArgs), Diameter: f.proto == "gy",
		Replicas: reps, AsliteDataDir: *asliteDir, AsliteCommit: *asliteCommit,
		TLSDir: f.localTLSDir, Plans: plans, CDRDir: *cdrDir, Store: l.store.config(f.outDir), RuntimeProfile: sched.Profile(f.runtimeProfile),
	})
	if err != nil {
		return s.wrap(err)
	}
	stopped := false
	defer func() {
		if stopped {
			return
		}
		if err := tb.Stop(); err != nil {
			o.Log.Warn("the local CHF stopped with an error", "err", err)
		}
	}()
	if *cdrDir != "" {
		f.afterRun = func(res *report.Result, err error) error {
			stopped = true
			return checkCDRs(tb, *cdrDir, o, res, err)
		}
	}
	o.Log.Info("local CHF ready", "target", tb.Target, "diameter", tb.Diameter, "pids", tb.Pids, "chf", tb.CHF, "took", time.Since(t0).Round(time.Millisecond))
	o.Provenance.CHFVersion = chfVersion(s.Context(), tb.CHF)
	o.Provenance.Store = storeProvenance(tb)
	o.Targets = f.localTargets(tb)
	o.BalanceTargets = tb.Targets
	o.CPU = append(o.CPU, tb.CPU()...)
	localHops(tb, &o)
	if len(faults) > 0 {
		o.Faults, o.Injector = faults, tb
		o.ReservationSettle = 2 * *faultValidity
		// A killed instance's CPU cannot be read across the window.
		o.CPUOptional = true
	}
	if o.Label == "" {
		o.Label = "local"
	}
	var soak *soakSampler
	if *sampleEvery > 0 {
		soak = startSoak(*sampleEvery, tb.Pids, pprof)
	}
	if change != nil {
		go replaceTariff(s.Context(), o, change, changeAfter, tariffPath, changeBody)
	}
	err = f.execute(s, o)
	if soak != nil {
		res, _ := report.ReadJSON(filepath.Join(f.outDir, "result.json"))
		if serr := soak.finish(f.outDir, res); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	select {
	case <-tb.Done():
		if s.Signal() == nil {
			err = errors.Join(err, fmt.Errorf("the local CHF failed during the run: %w", tb.Err()))
		}
	default:
	}
	return err
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
// when the load generator has one and args do not name another, so that
// the local CGW guards its operator API and balance inquiry with the
// token the run sends.
func localCGWArgs(args []string, tokenFile string) ([]string, error) {
	if tokenFile == "" {
		return args, nil
	}
	for _, a := range args {
		if a == "--operator-token-file" || strings.HasPrefix(a, "--operator-token-file=") {
			return args, nil
		}
	}
	abs, err := filepath.Abs(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve --operator-token-file %s: %w", tokenFile, err)
	}
	return append(args, "--operator-token-file", abs), nil
}

// localOCPArgs adds --tariff FILE for the OCP when loadgen's audit rates
// with that file, so that both rate from the same tariff.
func localOCPArgs(args []string, tariff string) []string {
	if tariff == "" {
		return args
	}
	return append(args, "--tariff", tariff)
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
