package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/chassis/tlsconfig"
	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/hops"
	"github.com/chf-testbed/testbed/loadgen/operator"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/loadgen/testbed"
)

func init() {
	register("run", "one measured load run against a deployed CHF", runCmd)
}

// runFlags are the flags shared by run, local, sweep and gate.
type runFlags struct {
	fs             *flag.FlagSet
	scenarioFile   string
	rate           float64
	sessionsPerSec float64
	duration       time.Duration
	warmup         time.Duration
	rampUp         time.Duration
	subscribers    int
	first          string
	maxInFlight    int
	timeout        time.Duration
	workers        int
	pacing         time.Duration
	procs          int
	noAsync        bool
	conns          int
	proto          string
	balanceURL     string
	cpus           multiFlag
	cpuOptional    bool
	auditMode      string
	initialBalance int64
	auditConc      int
	progress       string
	metricsListen  string
	jsonOut        string
	resultLog      bool // run --result-log: the result as one line on stdout
	csvOut         string
	mdOut          string
	htmlOut        string
	outDir         string
	label          string
	shard          string
	seed           int64
	logLevel       string
	cpuProfile     string
	thresholds     multiFlag
	noDefThresh    bool
	tariffFile     string
	retransmit     float64
	retryErrors    int
	retryBackoff   time.Duration
	reauthorize    float64
	abortShare     float64
	notifyListen   string
	operatorToken  string
	// TLS of https:// targets: --ca, --cert, --key, set by parseTargets
	// when the targets are https://.
	caFile, certFile, keyFile string
	hostProbe                 bool
	tls                       bool
	localTLSDir               string // loadgen local / sweep --local --tls-dir
	localCDRDir               string // sweep --local --cdr-dir
	// runtimeProfile is the CHF's runtime profile (--runtime-profile):
	// given to the services a command starts, recorded in the report.
	runtimeProfile string
	// chfVersion is the system under test's version when known.
	chfVersion string
	// afterRun, when set, sees the run's result (and error) before the
	// reports are written and returns the error to end with (loadgen
	// local --cdr-dir: the CDR check, once the CHF stopped).
	afterRun func(res *report.Result, err error) error
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// protos are the values of --proto.
var protos = []string{"h2c", "h2c-async", "h2c-std", "http1", "gy"}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	d := scenario.Default()
	fs.StringVar(&f.scenarioFile, "scenario", "", "scenario: a built-in one by name (busy-hour) or a YAML file (see loadgen/README.md); empty = the built-in default mix")
	fs.Float64Var(&f.rate, "rate", 0, fmt.Sprintf("offered load in transactions per second (each create, update, release, event and inquiry is one), > 0; overrides the scenario (default %v)", d.Load.TPS))
	fs.Float64Var(&f.sessionsPerSec, "sessions-per-second", 0, "offered load in flow starts (sessions, events, inquiries) per second, > 0, instead of --rate; overrides the scenario")
	fs.DurationVar(&f.duration, "duration", 0, fmt.Sprintf("measured duration (after ramp-up and warm-up), > 0; overrides the scenario (default %s)", d.Phases.Duration.D()))
	fs.DurationVar(&f.warmup, "warmup", 0, fmt.Sprintf("warm-up at full rate before measuring, excluded from results, >= 0; overrides the scenario (default %s)", d.Phases.WarmUp.D()))
	fs.DurationVar(&f.rampUp, "ramp-up", 0, fmt.Sprintf("linear ramp from 0 to the full rate at the start, excluded from results, >= 0; overrides the scenario (default %s)", d.Phases.RampUp.D()))
	fs.IntVar(&f.subscribers, "subscribers", 0, fmt.Sprintf("number of subscribers in the range (they must be provisioned); overrides the scenario (default %d)", d.Subscribers.Count))
	fs.StringVar(&f.first, "first", "", fmt.Sprintf("first SUPI of the range; overrides the scenario (default %s)", d.Subscribers.First))
	fs.IntVar(&f.maxInFlight, "max-inflight", 0, fmt.Sprintf("bound on requests in flight, > 0; overrides the scenario (default %d)", d.MaxInFlight))
	fs.DurationVar(&f.timeout, "timeout", 0, fmt.Sprintf("per-request timeout, > 0; overrides the scenario (default %s)", d.Timeout.D()))
	fs.IntVar(&f.workers, "workers", 0, "scheduler goroutines (0 = GOMAXPROCS)")
	fs.DurationVar(&f.pacing, "pacing", time.Millisecond, "wake the scheduler on multiples of this and send every request due by then together (fewer wake-ups and system calls per request; sends up to this late, which the latency, measured from the due time, includes); 0 = each request at its own time (the h2c event loop then wakes early by its learnt wake-up delay and spins the last µs: lag of µs, several times the CPU per request)")
	fs.IntVar(&f.procs, "procs", 0, "GOMAXPROCS of the load generator; 0 = with --proto h2c one per scheduler worker the offered rate needs (1 up to 25,000 TPS: the cheapest per request), else Go's default (one per CPU)")
	fs.BoolVar(&f.noAsync, "no-async", false, "h2c: send through a goroutine per request in flight instead of the connection's callbacks (for comparison)")
	fs.IntVar(&f.conns, "conns", 0, "connections per target: h2c at most this many (dialed as streams fill, default 64), h2c-std exactly this many (default 2), http1 pool size (default 1024), gy Diameter peers each with its own Origin-Host (default 4)")
	fs.StringVar(&f.proto, "proto", "h2c", "protocol: h2c (HTTP/2 cleartext, prior knowledge, chassis/h2c; on Linux one event loop per scheduler worker), h2c-async (the same client with a reader and a writer goroutine per connection), h2c-std (golang.org/x/net/http2.Transport), http1 (HTTP/1.1, fasthttp) or gy (Diameter Gy credit control; implied by --target diameter://...)")
	fs.StringVar(&f.proto, "protocol", "h2c", "alias of --proto")
	fs.Var(&f.cpus, "cpu", "CPU source of a SUT component, repeatable: NAME=pid:PID[,PID], NAME=proc:PROCESS, NAME=http://HOST:PORT/metrics (process_cpu_seconds_total), or a bare process name; a source missing at the start or lost during the run is an error")
	fs.BoolVar(&f.cpuOptional, "cpu-optional", false, "a --cpu source missing at the start or lost during the run is a loud warning and marks the report incomplete, instead of an error")
	fs.StringVar(&f.auditMode, "audit", run.AuditAuto, "balance audit: auto (initial balances of the range read first when it has at most 200000 subscribers or --initial-balance states them; final balances of the touched subscribers), full (the whole range before and after), off")
	fs.StringVar(&f.balanceURL, "balance-url", "", "with --proto gy: the CGW's HTTP endpoint(s), http://HOST:PORT[,...], the audit reads balances from (GET /chf/v1/accounts/{supi}); empty skips the audit of a Gy run (loadgen local and sweep --local know it)")
	fs.Int64Var(&f.initialBalance, "initial-balance", 0, "known initial balance of every account in minor units (freshly provisioned), >= 0; skips reading balances before the run (0 = read them)")
	fs.IntVar(&f.auditConc, "audit-concurrency", 128, "balance reads in flight during the audit, > 0")
	fs.StringVar(&f.progress, "progress", run.ProgressAuto, "live progress on stderr: auto (refreshed line on a terminal, else plain), line, plain, json (JSON lines), off")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "host:port to serve live Prometheus metrics on during the run (/metrics: offered, completed, late, dropped, in flight, latency by operation, errors by class, phase; loadgen/live); empty = off")
	fs.StringVar(&f.jsonOut, "json", "", "write the JSON result to this file")
	fs.StringVar(&f.csvOut, "csv", "", "write the per-second CSV time series to this file")
	fs.StringVar(&f.mdOut, "md", "", "write the Markdown report to this file")
	fs.StringVar(&f.htmlOut, "html", "", "write the HTML report (offline, inline SVG charts) to this file")
	fs.StringVar(&f.outDir, "out", "", "write every report file (result.json, series.csv, report.md, report.html) into this directory")
	fs.StringVar(&f.label, "label", "", "label stored in the result (e.g. the network model)")
	fs.StringVar(&f.shard, "shard", "", "i/n: run shard i of n (0-based): its slice of the subscriber range and 1/n of the rate")
	fs.Int64Var(&f.seed, "seed", 0, "random seed (0 = the scenario's)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the load generator to this file")
	fs.Var(&f.thresholds, "threshold", "pass/fail criterion, repeatable, added to the scenario's thresholds: METRIC OP VALUE with METRIC p50, p90, p99, p99.9, max, mean (latency: 10ms), errors, late, dropped (rates: 0.1%), tps (a number or F*offered), jitter; e.g. 'p99<10ms' 'errors<0.1%' 'tps>=0.99*offered' 'late<1%'. A failed threshold exits 6. Unless replaced by one on the same metric, 'tps>0' and 'errors<=1%' apply")
	fs.BoolVar(&f.noDefThresh, "no-default-thresholds", false, "do not apply the default thresholds 'tps>0' and 'errors<=1%'")
	fs.StringVar(&f.tariffFile, "tariff", "", "tariff file the audit rates every charge with, independently of what the CHF reports (the same YAML/JSON file the OCP loads with --tariff); empty = the built-in default tariff")
	fs.Float64Var(&f.retransmit, "retransmit", 0, "share 0..1 of creates, updates, releases and events sent twice with the same identity (some flagged as retransmissions, some after a timeout); the audit must still reconcile exactly; overrides the scenario's retransmit")
	fs.IntVar(&f.retryErrors, "retry-errors", scenario.DefaultRetryErrors, fmt.Sprintf("times 0..%d a create, update, release or event that was shed (Nchf 503: after its Retry-After, at most 10s; Gy 3004) or got no definitive answer (timeout, lost connection, other 5xx; Gy 5012...) is sent again with the same identity (updates and releases with the retransmission flag, creates and events exactly as first sent; over Gy every retry with the T flag), as an SMF does, else --retry-backoff after the failure and doubling, while it can be answered within the run's drain bound and the retry queue has room; the answer that resolves it is what the audit counts; usage no attempt delivered is counted in usage_lost and fails the audit; 0 = never; overrides the scenario's retry_errors", scenario.MaxRetryErrors))
	fs.DurationVar(&f.retryBackoff, "retry-backoff", scenario.DefaultRetryBackoff, "wait before the first --retry-errors retry, doubled before each next one, each wait jittered ±50%; overrides the scenario's retry_backoff")
	fs.Float64Var(&f.reauthorize, "reauthorize", 0, "share 0..1 of sessions the loadgen has the CHF re-authorise during the run (POST /chf/v1/accounts/{supi}/reauthorize, halfway to the session's next request): the CHF notifies the session (Nchf ChargingNotify REAUTHORIZATION to the notifyUri the loadgen serves, Gy RAR), the loadgen answers with an update, and the report gives the round trip; overrides the scenario's notifications.reauthorize")
	fs.Float64Var(&f.abortShare, "abort", 0, "share 0..1 of sessions the loadgen has the CHF abort (POST .../abort: ABORT_CHARGING or a Gy ASR, answered by releasing the session); overrides the scenario's notifications.abort")
	fs.StringVar(&f.notifyListen, "notify-listen", "", "host:port the Nchf driver serves its notifyUri on (HTTP/2 cleartext; every create then carries notifyUri http://HOST:PORT/notify/<flow>, and notifications are answered as an SMF would); the host must be one the CHF reaches; empty = off, or 127.0.0.1:0 when the scenario triggers notifications")
	fs.StringVar(&f.runtimeProfile, sched.FlagName, "", "the CHF services' runtime profile (chf --runtime-profile): production or lab; recorded in the report (provenance runtime_profile). loadgen local, sweep --local and gate start the services with it (empty = production, their default); against a CHF loadgen did not start, state the one it runs (the chf chart's runtimeProfile), empty = not known")
	fs.StringVar(&f.operatorToken, "operator-token-file", "", "file holding the bearer token of the CHF's operator API (the CGW's --operator-token-file), sent on --reauthorize and --abort and on every balance read over Nchf (the audit's, and balance inquiries), which a CGW with a token guards; loadgen local, sweep and gate give their CGW the same file; empty sends none (a loopback CGW without a token accepts that)")
	fs.StringVar(&f.caFile, "ca", "", "with https:// targets: PEM bundle of the CAs that sign the CGW's certificate (empty = the system roots)")
	fs.StringVar(&f.certFile, "cert", "", "with https:// targets: PEM client certificate to present (mTLS), with --key")
	fs.StringVar(&f.keyFile, "key", "", "PEM private key of --cert")
	fs.BoolVar(&f.hostProbe, "host-probe", true, "measure how long the host froze this machine's CPUs: a child process with a SCHED_FIFO thread on each CPU of the loadgen's affinity, waking every 5 ms (about 2% of each CPU), reported as host freezes and each second's host_freeze_ms; needs root, else reported as not measured; false = off")
}

// flagOfField names the flag that sets a scenario field.
var flagOfField = map[string]string{
	"load.tps": "rate", "load.sessions_per_second": "sessions-per-second", "phases.duration": "duration",
	"phases.warm_up": "warmup", "phases.ramp_up": "ramp-up", "subscribers.count": "subscribers",
	"subscribers.first": "first", "max_in_flight": "max-inflight", "timeout": "timeout",
	"notifications.reauthorize": "reauthorize", "notifications.abort": "abort",
	"retry_errors": "retry-errors", "retry_backoff": "retry-backoff",
}

// fieldError turns a scenario validation error into a usage error naming
// the flag that set the field, or the scenario file.
func (f *runFlags) fieldError(err error) error {
	var fe *scenario.FieldError
	if errors.As(err, &fe) {
		if name, ok := flagOfField[fe.Field]; ok && setFlags(f.fs)[name] {
			return usageError{fmt.Errorf("invalid --%s: %s", name, fe.Msg)}
		}
		if f.scenarioFile != "" {
			return usageError{fmt.Errorf("scenario %s: %w", f.scenarioFile, err)}
		}
	}
	return usageError{err}
}

// scenario builds the scenario from the file and the flags that were set,
// validates it once (the same rules whether a value comes from a flag or
// the file), and applies --shard. hash identifies the unsharded scenario.
func (f *runFlags) scenario() (sc scenario.Scenario, hash string, err error) {
	set := setFlags(f.fs)
	sc = scenario.Default()
	if f.scenarioFile != "" {
		if sc, err = scenario.Open(f.scenarioFile); err != nil {
			return sc, "", usageError{fmt.Errorf("scenario %s: %w", f.scenarioFile, err)}
		}
	}
	if set["rate"] && set["sessions-per-second"] {
		return sc, "", usageError{errors.New("give only one of --rate and --sessions-per-second")}
	}
	f.override(&sc, set)
	for _, t := range f.thresholds {
		if _, err := scenario.ParseThreshold(t); err != nil {
			return sc, "", usageError{fmt.Errorf("invalid --threshold: %w", err)}
		}
		sc.Thresholds = append(sc.Thresholds, t)
	}
	if err := sc.Validate(); err != nil {
		return sc, "", f.fieldError(err)
	}
	if err := run.CheckProto(&sc, f.proto); err != nil {
		return sc, "", usageError{err}
	}
	hash = sc.Hash()
	if f.shard != "" {
		i, n, err := scenario.ParseShard(f.shard)
		if err != nil {
			return sc, "", usageError{fmt.Errorf("invalid --shard: %w", err)}
		}
		if sc.Subscribers.Count < n {
			return sc, "", usageError{fmt.Errorf("invalid --shard %s: %d subscribers cannot be split into %d shards", f.shard, sc.Subscribers.Count, n)}
		}
		sc = scenario.Shard(sc, i, n)
	}
	return sc, hash, nil
}

// override sets the scenario fields of the flags in set (the flags given)
// on sc; --seed overrides unless 0.
func (f *runFlags) override(sc *scenario.Scenario, set map[string]bool) {
	if set["rate"] {
		sc.Load = scenario.Load{TPS: f.rate}
	}
	if set["sessions-per-second"] {
		sc.Load = scenario.Load{SessionsPerSecond: f.sessionsPerSec}
	}
	if set["duration"] {
		sc.Phases.Duration = scenario.Duration(f.duration)
	}
	if set["warmup"] {
		sc.Phases.WarmUp = scenario.Duration(f.warmup)
	}
	if set["ramp-up"] {
		sc.Phases.RampUp = scenario.Duration(f.rampUp)
	}
	if set["subscribers"] {
		sc.Subscribers.Count = f.subscribers
	}
	if set["first"] {
		sc.Subscribers.First = f.first
	}
	if set["max-inflight"] {
		sc.MaxInFlight = f.maxInFlight
	}
	if set["timeout"] {
		sc.Timeout = scenario.Duration(f.timeout)
	}
	if f.seed != 0 {
		sc.Seed = f.seed
	}
	if set["retransmit"] {
		sc.Retransmit = f.retransmit
	}
	if set["retry-errors"] {
		sc.RetryErrors = f.retryErrors
	}
	if set["retry-backoff"] {
		sc.RetryBackoff = scenario.Duration(f.retryBackoff)
	}
	if set["reauthorize"] {
		sc.Notifications.Reauthorize = f.reauthorize
	}
	if set["abort"] {
		sc.Notifications.Abort = f.abortShare
	}
}

// parseTargets reads --target for the protocol: diameter://HOST:PORT
// targets select gy (and need it), the others are Nchf URLs.
func (f *runFlags) parseTargets(s string) ([]string, error) {
	if s == "" {
		return nil, usageError{errors.New("--target is required")}
	}
	if driver.IsDiameterTarget(s) {
		if f.proto != "h2c" && f.proto != "gy" {
			return nil, usageError{fmt.Errorf("cannot use --proto %s with diameter:// targets", f.proto)}
		}
		f.proto = "gy"
	}
	var ts []string
	var err error
	f.tls = f.proto != "gy" && driver.IsTLSTarget(s)
	if f.proto == "gy" {
		ts, err = driver.ParseDiameterTargets(s)
	} else {
		ts, err = driver.ParseTargets(s)
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("invalid --target: %w", err)}
	}
	return ts, nil
}

// localTargets returns the targets of a local testbed for the protocol,
// and sets --balance-url for a Gy run.
func (f *runFlags) localTargets(tb *testbed.Testbed) []string {
	if f.proto == "gy" {
		if f.balanceURL == "" {
			f.balanceURL = "http://" + tb.Target
		}
		return tb.Diameters
	}
	return tb.Targets
}

// Bounds of flags whose value is a count of goroutines, connections or
// peers allocated up front: far above what a run needs, low enough that a
// typo cannot exhaust memory.
const (
	maxWorkers          = 4096
	maxConns            = 4096
	maxAuditConcurrency = 4096
)

// checkFlags validates the flags that are not scenario fields.
func (f *runFlags) checkFlags() error {
	bad := func(name, format string, a ...any) error {
		return usageError{fmt.Errorf("invalid --%s: %s", name, fmt.Sprintf(format, a...))}
	}
	switch {
	case !contains(protos, f.proto):
		return bad("proto", "%q: want %s", f.proto, strings.Join(protos, ", "))
	case f.workers < 0 || f.workers > maxWorkers:
		return bad("workers", "must be 0..%d, got %d", maxWorkers, f.workers)
	case f.pacing < 0:
		return bad("pacing", "must not be negative, got %s", f.pacing)
	case f.procs < 0 || f.procs > sched.MaxGOMAXPROCS:
		return bad("procs", "must be 0..%d, got %d", sched.MaxGOMAXPROCS, f.procs)
	case f.runtimeProfile != "" && sched.Profile(f.runtimeProfile).Validate() != nil:
		return bad(sched.FlagName, "%q: want production or lab", f.runtimeProfile)
	case f.conns < 0 || f.conns > maxConns:
		return bad("conns", "must be 0..%d, got %d", maxConns, f.conns)
	case f.initialBalance < 0:
		return bad("initial-balance", "must not be negative, got %d", f.initialBalance)
	case f.auditConc <= 0 || f.auditConc > maxAuditConcurrency:
		return bad("audit-concurrency", "must be 1..%d, got %d", maxAuditConcurrency, f.auditConc)
	case !contains([]string{run.AuditAuto, run.AuditFull, run.AuditOff}, f.auditMode):
		return bad("audit", "%q: want auto, full or off", f.auditMode)
	case !contains([]string{run.ProgressAuto, run.ProgressLine, run.ProgressPlain, run.ProgressJSON, run.ProgressOff}, f.progress):
		return bad("progress", "%q: want auto, line, plain, json or off", f.progress)
	case f.metricsListen != "" && !validHostPort(f.metricsListen):
		return bad("metrics-listen", "%q: want host:port (port 0 allowed)", f.metricsListen)
	case f.notifyListen != "" && !validHostPort(f.notifyListen):
		return bad("notify-listen", "%q: want host:port (port 0 allowed)", f.notifyListen)
	}
	return nil
}

// validHostPort reports whether s is host:port with a numeric port.
func validHostPort(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return err == nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// options validates every flag and builds the run's options; nothing is
// started before it succeeds.
func (f *runFlags) options(targets []string) (run.Options, error) {
	if err := f.checkFlags(); err != nil {
		return run.Options{}, err
	}
	sc, hash, err := f.scenario()
	if err != nil {
		return run.Options{}, err
	}
	log, err := newLogger(f.logLevel)
	if err != nil {
		return run.Options{}, err
	}
	o := run.Options{
		Scenario: sc, Targets: targets, Proto: f.proto, Conns: f.conns, Workers: f.workers, Pacing: f.pacing, NoAsync: f.noAsync,
		Audit: f.auditMode, InitialBalance: f.initialBalance, AuditConcurrency: f.auditConc,
		ProgressMode: f.progress, Label: f.label, Shard: f.shard, Log: log, CPUOptional: f.cpuOptional,
		Thresholds: sc.EffectiveThresholds(f.noDefThresh),
	}
	o.MetricsListen = f.metricsListen
	if f.hostProbe {
		if o.HostProbe, err = os.Executable(); err != nil {
			return o, fmt.Errorf("cannot find this executable for --host-probe (pass --host-probe=false): %w", err)
		}
	}
	o.NotifyListen = f.notifyListen
	if f.operatorToken != "" {
		if o.OperatorToken, err = operator.ReadToken(f.operatorToken); err != nil {
			return o, usageError{err}
		}
	}
	o.Provenance = report.HostProvenance()
	o.Provenance.LoadgenVersion = version
	o.Provenance.CHFVersion = f.chfVersion
	o.Provenance.CommandLine = os.Args
	o.Provenance.Flags = flagValues(f.fs)
	o.Provenance.ScenarioHash = hash
	o.Provenance.RuntimeProfile = f.runtimeProfile
	if f.tariffFile != "" {
		if o.Tariff, err = audit.LoadTariff(f.tariffFile); err != nil {
			return o, usageError{fmt.Errorf("invalid --tariff: %w", err)}
		}
	}
	if o.TLS, err = f.clientTLS(log); err != nil {
		return o, err
	}
	if f.balanceURL != "" {
		if o.BalanceTargets, err = driver.ParseTargets(f.balanceURL); err != nil {
			return o, usageError{fmt.Errorf("invalid --balance-url: %w", err)}
		}
	}
	if err := f.cpuSources(&o); err != nil {
		return o, err
	}
	return o, nil
}

// clientTLS is the TLS of https:// targets and --balance-url (--ca,
// --cert, --key), nil for cleartext.
func (f *runFlags) clientTLS(log *slog.Logger) (*tls.Config, error) {
	if !f.tls && !driver.IsTLSTarget(f.balanceURL) {
		if f.caFile != "" || f.certFile != "" || f.keyFile != "" {
			return nil, usageError{errors.New("invalid --ca/--cert/--key: only with https:// targets")}
		}
		return nil, nil
	}
	tc := tlsconfig.Config{Cert: f.certFile, Key: f.keyFile, CA: f.caFile, Peers: true}
	if err := tc.Validate(); err != nil {
		return nil, usageError{fmt.Errorf("invalid --ca/--cert/--key: %w", err)}
	}
	files, err := tc.Files(log)
	if err != nil {
		return nil, usageError{fmt.Errorf("invalid --ca/--cert/--key: %w", err)}
	}
	return tc.Client(files, "http/1.1"), nil
}

// cpuSources adds the --cpu sources to o, with the hops of those that
// are a service's /metrics, and checks they can be read (unless
// --cpu-optional).
func (f *runFlags) cpuSources(o *run.Options) error {
	var metrics map[string]string
	for _, spec := range f.cpus {
		src, err := cpu.ParseSpec(spec)
		switch {
		case err == nil:
		case !errors.Is(err, cpu.ErrNoProcess) || !f.cpuOptional:
			return usageError{fmt.Errorf("invalid --cpu: %w (pass --cpu-optional to run without a missing source)", err)}
		default: // no such process, and optional: run.Execute warns and marks the report incomplete
			src = cpu.NewMissing(cpu.SpecName(spec), err)
		}
		o.CPU = append(o.CPU, src)
		if m, ok := src.(*cpu.Metrics); ok {
			if metrics == nil {
				metrics = map[string]string{}
			}
			metrics[m.Name()] = m.URL()
		}
	}
	if metrics != nil {
		o.Hops = hops.New(metrics) // the services' /metrics: their hops too
	} else {
		o.HopsNote = "not measured: no service's /metrics given (--cpu NAME=http://HOST:PORT/metrics)"
	}
	if len(o.CPU) > 0 && !f.cpuOptional {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		smp := cpu.NewSampler(o.CPU...).Sample(ctx)
		cancel()
		if smp.Err != nil {
			return usageError{fmt.Errorf("invalid --cpu: %w (pass --cpu-optional to run without it)", smp.Err)}
		}
	}
	return nil
}

// applyProcs sets GOMAXPROCS for the run.
func (f *runFlags) applyProcs(sc scenario.Scenario) {
	if procs := f.gomaxprocs(sc); procs > 0 {
		runtime.GOMAXPROCS(procs)
	}
}

// gomaxprocs returns the GOMAXPROCS to set, 0 for Go's default. h2c
// workers run event loops that keep their P between ticks (see
// loadgen/driver.Loop): with one P per worker a loop yields it cheaply
// before each wait, where spare Ps would cost a thread wake-up (futex)
// at every yield, or a preemption signal every 10 ms without yields.
func (f *runFlags) gomaxprocs(sc scenario.Scenario) int {
	if f.procs > 0 {
		return f.procs
	}
	if f.proto != "h2c" {
		return 0
	}
	n := f.workers
	if n <= 0 {
		n = int(math.Ceil(sc.OfferedTPS() / engine.TxnPerWorker))
	}
	return max(1, min(n, runtime.NumCPU()))
}

// printIndex rebuilds the results index holding dir (report.UpdateIndex)
// and names it; a failure only warns, the reports are written.
func printIndex(dir string) {
	idx, err := report.UpdateIndex(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
		return
	}
	if idx != "" {
		fmt.Printf("results index: %s\n", idx)
	}
}

// writeReports prints the summary and writes the requested files.
func (f *runFlags) writeReports(res *report.Result) error {
	res.WriteSummary(os.Stdout)
	if f.outDir != "" {
		files, err := res.WriteAll(f.outDir)
		if err != nil {
			return err
		}
		fmt.Printf("\nreports: %s %s %s %s\n", files.JSON, files.CSV, files.Markdown, files.HTML)
		printIndex(f.outDir)
	}
	if f.jsonOut != "" {
		if err := res.WriteJSON(f.jsonOut); err != nil {
			return err
		}
	}
	writeFile := func(path string, fn func(*os.File) error) error {
		if path == "" {
			return nil
		}
		out, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("cannot create %s: %w", path, err)
		}
		if err := fn(out); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	if err := writeFile(f.csvOut, func(w *os.File) error { return res.WriteCSV(w) }); err != nil {
		return err
	}
	if err := writeFile(f.mdOut, func(w *os.File) error { res.WriteMarkdown(w); return nil }); err != nil {
		return err
	}
	return writeFile(f.htmlOut, func(w *os.File) error { return res.WriteHTML(w) })
}

// startProfile starts the CPU profile when asked; the returned function
// stops it.
func (f *runFlags) startProfile() (func(), error) {
	if f.cpuProfile == "" {
		return func() {}, nil
	}
	out, err := os.Create(f.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("cannot create CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("cannot start CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// execute runs o under the signal stopper s, writes the reports (an
// interrupted run's too, marked so) and returns the command's error.
func (f *runFlags) execute(s *stopper, o run.Options) error {
	f.applyProcs(o.Scenario)
	stopProfile, err := f.startProfile()
	if err != nil {
		return err
	}
	res, err := run.Execute(s.Context(), o)
	stopProfile()
	s.mark(res)
	if f.afterRun != nil && res != nil {
		err = f.afterRun(res, err)
	}
	if res != nil {
		if werr := f.writeReports(res); werr != nil && err == nil {
			err = werr
		}
		// Last, after the summary: the line a collector reading the
		// pod's log looks for (report.ParseResultLog).
		if f.resultLog {
			if werr := report.WriteResultLog(os.Stdout, res); werr != nil && err == nil {
				err = werr
			}
		}
	}
	return s.wrap(err)
}

var runHelp = help{
	name:     "run",
	synopsis: "loadgen run --target http://HOST:PORT[,...] | diameter://HOST:PORT[,...] [flags]",
	text: "Runs the scenario (ramp-up, warm-up, measured duration), prints the report and writes the files asked for.\n" +
		"SIGINT or SIGTERM stops the run within a second and still writes the report, marked interrupted\n" +
		"(exit 130 / 143); a second signal exits at once.",
}

// RunConfig is the configuration of loadgen run: the run's flags and
// the target, --check-flags, --start-at.
type RunConfig struct {
	run       runFlags
	target    string
	checkOnly bool
	startAt   string

	// Resolved by Validate.
	targets []string
	at      time.Time
}

// DefaultRunConfig returns loadgen run's defaults.
func DefaultRunConfig() RunConfig { return RunConfig{} }

// RegisterFlags registers loadgen run's flags on fs, c's values as the
// defaults.
func (c *RunConfig) RegisterFlags(fs *flag.FlagSet) {
	c.run.register(fs)
	fs.StringVar(&c.target, "target", c.target, "CGW endpoints, comma-separated: Nchf http://HOST:PORT, or Diameter Gy diameter://HOST:PORT (selects --proto gy; --conns peers each); flows are balanced over them client-side")
	fs.BoolVar(&c.run.resultLog, "result-log", c.run.resultLog, "after the run, print the JSON result to stdout as one line, "+strconv.Quote(report.ResultLogMarker)+" then the compact JSON (the last line of the output), for a collector that reads the pod's log (report.ParseResultLog); an interrupted or failed run's result too")
	fs.BoolVar(&c.checkOnly, "check-flags", c.checkOnly, "parse and validate every flag and the scenario, print the effective configuration as JSON and exit: 0 valid, 2 invalid (nothing is contacted)")
	fs.StringVar(&c.startAt, report.StartAtFlag, c.startAt, fmt.Sprintf("wall-clock start barrier, RFC 3339 (e.g. 2026-12-01T10:00:00Z): wait until then before starting, so that the shards of a distributed run start together (merge checks they had the same); at most %s ahead, and refused when more than %s past", maxStartWait, startLateTolerance))
}

// Validate checks --start-at, the run flags and the targets (a usage
// error naming the flag); the scenario is checked when the run's options
// are built.
func (c *RunConfig) Validate() error {
	var err error
	if c.at, err = parseStartAt(c.startAt, time.Now()); err != nil {
		return err
	}
	if err := c.run.checkFlags(); err != nil {
		return err
	}
	c.targets, err = c.run.parseTargets(c.target)
	return err
}

func runCmd(args []string) error {
	c := DefaultRunConfig()
	fs := newFlagSet("run")
	c.RegisterFlags(fs)
	if err := parseFlags(fs, runHelp, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	o, err := c.run.options(c.targets)
	if err != nil {
		return err
	}
	if c.checkOnly {
		return printConfig(os.Stdout, o, c.startAt)
	}
	o.StartAt = c.at
	s := onSignals()
	defer s.Stop()
	return c.run.execute(s, o)
}

// The bounds of --start-at: how far ahead it may be, and how late a
// start still counts as on time (a pod scheduled a little late).
const (
	maxStartWait       = time.Hour
	startLateTolerance = 2 * time.Second
)

// parseStartAt reads --start-at ("" = start at once) against now.
func parseStartAt(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("invalid --start-at %q: want an RFC 3339 time such as 2026-12-01T10:00:00Z: %w", s, err)}
	}
	switch d := at.Sub(now); {
	case d < -startLateTolerance:
		return time.Time{}, usageError{fmt.Errorf("invalid --start-at %s: %s in the past (more than the tolerance %s): this shard would not start with the others; set a later time", s, (-d).Round(time.Millisecond), startLateTolerance)}
	case d > maxStartWait:
		return time.Time{}, usageError{fmt.Errorf("invalid --start-at %s: %s ahead, more than %s", s, d.Round(time.Second), maxStartWait)}
	}
	return at, nil
}

// printConfig writes the effective configuration of a run (--check-flags).
func printConfig(w io.Writer, o run.Options, startAt string) error {
	cfg := struct {
		Targets  []string          `json:"targets"`
		Proto    string            `json:"proto"`
		StartAt  string            `json:"start_at,omitempty"`
		Scenario scenario.Scenario `json:"scenario"`
		Flags    map[string]string `json:"flags"`
	}{o.Targets, o.Proto, startAt, o.Scenario, o.Provenance.Flags}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode the configuration: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
