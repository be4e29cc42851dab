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
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
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
	chf      string
	accounts int
	balance  int64
	tlsDir   string // loadgen local and sweep --local; gate has no --tls-dir
	store    storeFlags
}

// defaultLocalFlags returns the defaults of the local CHF's flags.
func defaultLocalFlags() localFlags {
	return localFlags{accounts: 100_000, balance: 100_000_000}
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
	fs.StringVar(&l.chf, "chf", l.chf, "chf binary (default: next to loadgen, ./bin/chf, PATH, else built from ./cmd/chf)")
	fs.IntVar(&l.accounts, "accounts", l.accounts, accountsHelp)
	fs.Int64Var(&l.balance, "balance", l.balance, "initial balance of every provisioned account, in minor units, > 0")
	fs.StringVar(&l.tlsDir, "tls-dir", l.tlsDir, "run the local CHF over TLS, mTLS on every hop (chf local --tls-dir), with the CA and certificate in this directory (made there when it has no ca.pem), and send Nchf over TLS with them; empty = cleartext")
	l.store.register(fs)
}

// apply checks the local flags and makes the run's subscriber range the
// provisioned accounts: --subscribers may narrow it, never exceed it.
func (l *localFlags) apply(f *runFlags) error {
	if l.accounts <= 0 || l.accounts > 100_000_000 {
		return usageError{fmt.Errorf("invalid --accounts: must be 1..100000000, got %d", l.accounts)}
	}
	if l.balance <= 0 {
		return usageError{fmt.Errorf("invalid --balance: must be positive, got %d", l.balance)}
	}
	if err := l.store.check(); err != nil {
		return err
	}
	if l.tlsDir != "" {
		if f.proto == "gy" {
			return usageError{errors.New("invalid --tls-dir: Gy has no TLS here")}
		}
		d := tlsconfig.Dir(l.tlsDir)
		if err := d.Ensure("127.0.0.1", "localhost", "::1"); err != nil {
			return usageError{fmt.Errorf("invalid --tls-dir: %w", err)}
		}
		f.tls, f.localTLSDir = true, l.tlsDir
		f.caFile, f.certFile, f.keyFile = d.CA(), d.Cert(), d.Key()
	}
	if f.runtimeProfile == "" { // the services' default, which the run records
		f.runtimeProfile = string(sched.Production)
	}
	set := setFlags(f.fs)
	switch {
	case set["subscribers"] && f.subscribers > l.accounts:
		return usageError{fmt.Errorf("invalid --subscribers: %d exceeds the %d provisioned accounts (--accounts)", f.subscribers, l.accounts)}
	case !set["subscribers"]:
		f.subscribers = l.accounts
		f.fs.Set("subscribers", fmt.Sprint(l.accounts))
	}
	if f.initialBalance == 0 {
		f.initialBalance = l.balance // freshly provisioned: no need to read balances first
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

// LocalConfig is the configuration of loadgen local: the run's flags,
// the local CHF's, and the command's own. Validate resolves the values
// the run needs (replicas, faults, the services' extra flags, the tariff
// change); nothing is started or written before it succeeds.
type LocalConfig struct {
	run runFlags
	chf localFlags

	results                               string
	chfLogs                               bool
	cgwArgs, ocpArgs, abmArgs, asliteArgs string
	replicas                              string
	asliteDataDir, asliteCommit           string
	faultValidity, sampleEvery            time.Duration
	tariffChange                          string
	cdrDir                                string
	faultSpecs                            multiFlag

	// Resolved by Validate.
	reps          map[string]int
	faults        []run.Fault
	cgw, ocp, abm serviceArgs
	change        *tariffChange
}

// tariffChange is a resolved --tariff-change: the file replacing the
// OCP's tariff after the given time into the load.
type tariffChange struct {
	after time.Duration
	file  string
	body  []byte
	audit *audit.Change
}

// DefaultLocalConfig returns loadgen local's defaults.
func DefaultLocalConfig() LocalConfig {
	return LocalConfig{
		chf:           defaultLocalFlags(),
		results:       "results",
		asliteCommit:  "sync",
		faultValidity: 10 * time.Second,
	}
}

// RegisterFlags registers loadgen local's flags on fs, c's values as the
// defaults.
func (c *LocalConfig) RegisterFlags(fs *flag.FlagSet) {
	c.run.register(fs)
	c.chf.register(fs, "accounts to provision (the subscriber range of the run unless --subscribers is smaller)")
	fs.StringVar(&c.results, "results", c.results, "directory under which a <timestamp>/ directory receives every report file")
	fs.BoolVar(&c.chfLogs, "chf-logs", c.chfLogs, "copy the CHF services' logs to stderr (default: into chf.log in the results directory)")
	fs.StringVar(&c.cgwArgs, "cgw-args", c.cgwArgs, "extra flags for the cgw process, space-separated")
	fs.StringVar(&c.ocpArgs, "ocp-args", c.ocpArgs, "extra flags for the ocp process, space-separated")
	fs.StringVar(&c.abmArgs, "abm-args", c.abmArgs, "extra flags for the abm process, space-separated")
	fs.StringVar(&c.asliteArgs, "aslite-args", c.asliteArgs, "extra flags for the aslite process, space-separated (e.g. \"--flight-recorder DIR\")")
	fs.StringVar(&c.replicas, "replicas", c.replicas, "instances per service, e.g. \"ocp=2,abm=2\" (cgw, ocp, abm; default 1 each), as chf local --replicas; the load spreads over every cgw")
	fs.StringVar(&c.asliteDataDir, "aslite-data-dir", c.asliteDataDir, "make aslite durable with its log and snapshots in this directory (chf local --aslite-data-dir); a --fault on aslite without it uses a temporary one")
	fs.StringVar(&c.asliteCommit, "aslite-commit", c.asliteCommit, "with a durable aslite, its --commit: sync or interval")
	fs.DurationVar(&c.faultValidity, "fault-validity", c.faultValidity, "with --fault, the validity time of every grant (a tariff written to the results directory for the ocp), so the reservations of sessions a fault cut short expire, and the audit waits up to twice this for them")
	fs.DurationVar(&c.sampleEvery, "sample-every", c.sampleEvery, "sample each service's RSS, open files and goroutines (through a --pprof port given to cgw, ocp and abm) this often, with the p99 per interval, and write soak.json and soak.txt (flat, or where it grows) to the results directory; 0 = off (make soak sets 10s)")
	fs.StringVar(&c.tariffChange, "tariff-change", c.tariffChange, "AFTER:FILE: replace the OCP's tariff file with FILE this long after the load starts (the OCP reloads it within a second, the ABM's sweep — --reservation-sweep 5s unless --abm-args sets one — finds the sessions granted under the old tariff and the CGW sends them REAUTHORIZATION); the audit rates each request on the tariff in force when it was sent, either for one sent from 2 s before to 3 s after the replacement; not with --fault or account plans")
	fs.StringVar(&c.cdrDir, "cdr-dir", c.cdrDir, "the OCP writes CHF-CDRs into this directory (chf ocp --cdr-dir; with several OCPs a subdirectory each; other --cdr-* flags through --ocp-args), and the audit checks them once the CHF stopped: the charges of the records, each request counted once (cdr/README.md), equal the debits per subscriber; empty = no CDRs")
	fs.Var(&c.faultSpecs, "fault", "inject a fault at an offset into the measured window, ACTION:SERVICE:AT[:FOR]: kill (kill -9, restarted after FOR, default 2s) or stop (SIGSTOP for FOR) one instance of cgw, ocp, abm or aslite, or with --store asd a node of the Aerospike cluster (asd = node 0, asd1, asd2, ...), e.g. kill:ocp:10s:2s, kill:asd1:5s:3s; repeatable; the report gives errors, time to recover and the audit (for asd also the migrations, result store_faults)")
}

// Validate checks the parsed flags (a usage error naming the flag),
// resolves the values the run needs, and sets the defaults that depend on
// other flags (--rate 1000 unless a load is given, --out under
// --results).
func (c *LocalConfig) Validate() error {
	if err := c.chf.apply(&c.run); err != nil {
		return err
	}
	var err error
	if c.reps, err = local.ParseReplicas(c.replicas); err != nil {
		return usageError{fmt.Errorf("invalid --replicas: %w", err)}
	}
	if c.asliteCommit != "sync" && c.asliteCommit != "interval" {
		return usageError{fmt.Errorf("invalid --aslite-commit %q: want sync or interval", c.asliteCommit)}
	}
	if (c.asliteDataDir != "" || c.asliteArgs != "") && !c.runsAslite() {
		return usageError{errors.New("invalid --aslite-data-dir/--aslite-args: aslite does not run with --store asd or --aerospike")}
	}
	if err := c.validateFaults(); err != nil {
		return err
	}
	if err := c.validateServiceArgs(); err != nil {
		return err
	}
	if err := c.validateTariffChange(); err != nil {
		return err
	}
	if c.writesFaultTariff() && c.faultValidity < time.Second {
		return usageError{fmt.Errorf("invalid --fault-validity %s: want at least 1s", c.faultValidity)}
	}
	if c.sampleEvery > 0 && c.sampleEvery < time.Second {
		return usageError{fmt.Errorf("invalid --sample-every %s: want at least 1s", c.sampleEvery)}
	}
	set := setFlags(c.run.fs)
	if !set["rate"] && !set["sessions-per-second"] && c.run.scenarioFile == "" {
		c.run.rate = 1000
		c.run.fs.Set("rate", "1000")
	}
	if c.run.outDir == "" {
		c.run.outDir = filepath.Join(c.results, time.Now().UTC().Format("20060102-150405"))
	}
	return nil
}

// runsAslite reports whether the local CHF's store is aslite.
func (c *LocalConfig) runsAslite() bool {
	return c.chf.store.kind == local.StoreAslite && c.chf.store.aerospike == ""
}

// writesFaultTariff reports whether the run writes the OCP a tariff with
// --fault-validity: with faults, unless a tariff is given.
func (c *LocalConfig) writesFaultTariff() bool {
	return len(c.faults) > 0 && !c.ocp.has("tariff") && c.run.tariffFile == ""
}

// validateFaults parses --fault and checks each against the store.
func (c *LocalConfig) validateFaults() error {
	st := &c.chf.store
	for _, spec := range c.faultSpecs {
		ft, err := run.ParseFault(spec)
		if err != nil {
			return usageError{fmt.Errorf("invalid --fault: %w", err)}
		}
		c.faults = append(c.faults, ft)
		if node, ok := ft.StoreNode(); ok {
			switch {
			case st.kind != local.StoreAsd:
				return usageError{fmt.Errorf("invalid --fault %s: a fault on asd needs --store asd", spec)}
			case node >= st.nodes:
				return usageError{fmt.Errorf("invalid --fault %s: asd%d is no node of the %d (--store-nodes; asd is node 0)", spec, node, st.nodes)}
			case ft.Action == run.FaultKill && st.nodes == 1:
				return usageError{fmt.Errorf("invalid --fault %s: killing the only asd node loses every balance (memory storage, replication factor 1); use --store-nodes 3, or stop:", spec)}
			}
		}
		if ft.Service == "aslite" && !c.runsAslite() {
			return usageError{fmt.Errorf("invalid --fault %s: aslite does not run with --store asd or --aerospike", spec)}
		}
	}
	return nil
}

// faultsAslite reports whether a fault hits aslite.
func (c *LocalConfig) faultsAslite() bool {
	return slices.ContainsFunc(c.faults, func(f run.Fault) bool { return f.Service == "aslite" })
}

// validateServiceArgs reads --cgw-args, --ocp-args and --abm-args with
// the flag package's syntax (serviceArgs).
func (c *LocalConfig) validateServiceArgs() error {
	var err error
	if c.cgw, err = parseServiceArgs("cgw", c.cgwArgs); err != nil {
		return err
	}
	if c.ocp, err = parseServiceArgs("ocp", c.ocpArgs); err != nil {
		return err
	}
	c.abm, err = parseServiceArgs("abm", c.abmArgs)
	return err
}

// validateTariffChange reads and checks --tariff-change's file.
func (c *LocalConfig) validateTariffChange() error {
	if c.tariffChange == "" {
		return nil
	}
	after, file, ok := strings.Cut(c.tariffChange, ":")
	d, err := time.ParseDuration(after)
	if !ok || err != nil || d <= 0 || file == "" {
		return usageError{fmt.Errorf("invalid --tariff-change %q: want AFTER:FILE, AFTER a positive duration (20s)", c.tariffChange)}
	}
	body, err := readfile.Read(file, tariff.MaxFileBytes)
	if err != nil {
		return usageError{fmt.Errorf("invalid --tariff-change: %w", err)}
	}
	if _, err := tariff.Parse(body); err != nil {
		return usageError{fmt.Errorf("invalid --tariff-change: the OCP would refuse %s: %w", file, err)}
	}
	newT, err := audit.ParseTariff(body)
	if err != nil {
		return usageError{fmt.Errorf("invalid --tariff-change: %s: %w", file, err)}
	}
	switch {
	case len(c.faults) > 0:
		return usageError{errors.New("invalid --tariff-change: not with --fault (a fault run writes its own tariff)")}
	case c.ocp.has("tariff"):
		return usageError{errors.New("invalid --tariff-change: not with --ocp-args --tariff (loadgen local writes the OCP's tariff file; give the first tariff with --tariff)")}
	}
	c.change = &tariffChange{after: d, file: file, body: body,
		audit: &audit.Change{New: newT, Before: 2 * time.Second, After: 3 * time.Second}}
	return nil
}
