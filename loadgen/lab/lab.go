// Package lab compares the network models on one Linux box: it builds
// each model (host, baremetal, bridge, calico-noencap, calico-vxlan,
// calico-ipip, sriov) in network namespaces, places the CHF's services on
// two "nodes" as the reference deployment does, pins them (or not), runs
// the real binaries (`chf aslite|abm|ocp|cgw`, `chf provision`, `loadgen
// run --json`, iperf3 and the lab's own request/response probe) and writes
// one comparison report (lab.json, lab.md, lab.html).
//
// Everything it creates carries a prefix unique to the run and is removed
// after a normal end, a failure, or a cancelled context (SIGINT/SIGTERM in
// `loadgen lab`): processes by process group, then the namespaces, which
// take their links, routes and tunnels with them.
package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// Options configure a lab run. Validate checks them; zero values of the
// optional ones take the defaults.
type Options struct {
	Models []string
	// Pin lists the pinning modes to run: true = pinned, false = not.
	Pin []bool
	// Rate is the fixed offered TPS; 0 = 50% of the host model's knee,
	// found by a short sweep first.
	Rate     float64
	Duration time.Duration
	Warmup   time.Duration
	Trials   int
	MTU      int
	// Sweep adds a sweep per model and pinning (in the first trial).
	Sweep bool
	// KneeP99 is the p99 limit of the sweeps that find a knee.
	KneeP99 time.Duration
	// Pacing is loadgen's --pacing: 0 (the lab's default) sends each
	// request at its own time, so that the scheduling lag (tens of µs)
	// stays below the differences between models, at several times the
	// load generator's CPU per request of the 1 ms default.
	Pacing time.Duration
	// Experiment "shaping" runs the bottleneck experiment instead.
	Experiment string
	Out        string
	// Baseline is the row ratios are taken to.
	Baseline       string
	BaselinePinned bool
	Accounts       int
	// MatchGOMAXPROCS gives each unpinned service the GOMAXPROCS it has
	// pinned, so that pinning changes only the CPU mask.
	MatchGOMAXPROCS bool
	// CHF and Loadgen are the binaries; IPerf3 the iperf3 binary (empty:
	// the network columns say it is missing).
	CHF, Loadgen, IPerf3 string
	// IPerfTime is each iperf3 run's length; ProbeCount the RR probes.
	IPerfTime  time.Duration
	ProbeCount int
	// ShapingRateMbit and ShapingRTT size the shaping experiment's tbf.
	ShapingRateMbit int
	ShapingRTT      time.Duration
	// Progress receives progress lines (stderr); Logs the services' output.
	Progress io.Writer
	Logs     io.Writer
	// CPUs are the CPUs the lab may use (default: this process's mask).
	CPUs []int
	// AsdBinary, when set, runs the real Aerospike server (one node) in
	// the store's pod instead of aslite; the role keeps its name,
	// "aslite", in the report's columns.
	AsdBinary string
	// RuntimeProfile is every CHF service's --runtime-profile (the zero
	// value: production, the services' default, not passed), recorded in
	// every run's result and in the report.
	RuntimeProfile sched.Profile
	// Cluster, when set, also runs the models on a real cluster (cluster
	// e2e) after the emulated ones: the report's datapath "cni" rows.
	Cluster *ClusterOptions
}

// Upper bounds of the options: the accounts are provisioned on every
// model and the probes' round trips kept, so a typo must not exhaust
// memory; a run phase longer than an hour is a typo too.
const (
	maxAccounts    = 100_000_000
	maxProbes      = 1_000_000
	maxShapingMbit = 100_000
	maxPhase       = time.Hour
)

// Validate reports the first bad option, naming its flag.
func (o *Options) Validate() error {
	if err := o.RuntimeProfile.Validate(); err != nil {
		return fmt.Errorf("--%s: %w", sched.FlagName, err)
	}
	if len(o.Models) == 0 {
		return errors.New("--models: at least one model")
	}
	seen := map[string]bool{}
	for _, m := range o.Models {
		if _, ok := Describe[m]; !ok {
			return fmt.Errorf("--models: unknown model %q (known: %s)", m, strings.Join(Models, ","))
		}
		if seen[m] {
			return fmt.Errorf("--models: %q given twice", m)
		}
		seen[m] = true
	}
	if len(o.Pin) == 0 {
		return errors.New("--pin: on, off or both")
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return fmt.Errorf("--rate: %v is not a positive TPS", o.Rate)
	}
	if o.Pacing < 0 {
		return fmt.Errorf("--pacing: %v must not be negative", o.Pacing)
	}
	if o.Duration < time.Second || o.Duration > maxPhase {
		return fmt.Errorf("--duration: %v is not in 1s..%v", o.Duration, maxPhase)
	}
	if o.Warmup < 0 || o.Warmup > maxPhase {
		return fmt.Errorf("--warmup: %v is not in 0..%v", o.Warmup, maxPhase)
	}
	if o.KneeP99 <= 0 {
		return fmt.Errorf("--knee-slo-p99: %v is not positive", o.KneeP99)
	}
	if o.Trials < 1 || o.Trials > 100 {
		return fmt.Errorf("--trials: %d is not in 1..100", o.Trials)
	}
	if o.MTU != 1500 && o.MTU != 9000 {
		return fmt.Errorf("--mtu: %d is not 1500 or 9000", o.MTU)
	}
	if o.Experiment != "" && o.Experiment != "shaping" {
		return fmt.Errorf("--experiment: %q is not shaping", o.Experiment)
	}
	if o.Out == "" {
		return errors.New("--out: a directory is required")
	}
	if _, ok := Describe[o.Baseline]; !ok {
		return fmt.Errorf("--baseline: unknown model %q", o.Baseline)
	}
	if o.Accounts < 100 || o.Accounts > maxAccounts {
		return fmt.Errorf("--accounts: %d is not in 100..%d", o.Accounts, maxAccounts)
	}
	if o.IPerfTime < time.Second || o.IPerfTime > maxPhase {
		return fmt.Errorf("--iperf-time: %v is not in 1s..%v", o.IPerfTime, maxPhase)
	}
	if o.ProbeCount < 10 || o.ProbeCount > maxProbes {
		return fmt.Errorf("--probes: %d is not in 10..%d", o.ProbeCount, maxProbes)
	}
	if o.ShapingRateMbit < 1 || o.ShapingRateMbit > maxShapingMbit {
		return fmt.Errorf("--shaping-rate: %d Mbit/s is not in 1..%d", o.ShapingRateMbit, maxShapingMbit)
	}
	if o.ShapingRTT <= 0 {
		return fmt.Errorf("--shaping-rtt: %v is not positive", o.ShapingRTT)
	}
	if c := o.Cluster; c != nil {
		switch {
		case o.Experiment != "":
			return errors.New("--cluster: the cluster runs the comparison, not --experiment")
		case c.KubeBin == "":
			return errors.New("--kube-bin: --cluster needs the Kubernetes binaries' directory (cluster/build.sh --all prints it)")
		case c.Nodes < 1 || c.Nodes > 3:
			return fmt.Errorf("--cluster-nodes: %d is not in 1..3", c.Nodes)
		case c.Shards < 1 || c.Shards > 16:
			return fmt.Errorf("--cluster-shards: %d is not in 1..16", c.Shards)
		case o.Duration%time.Second != 0:
			return fmt.Errorf("--duration: %v: with --cluster, whole seconds (the loadgen Job's duration)", o.Duration)
		}
		if _, err := os.Stat(c.Bin); err != nil {
			return fmt.Errorf("--cluster-bin: %w (make build puts cluster in bin/)", err)
		}
	}
	if o.Experiment == "shaping" && o.IPerf3 == "" {
		return errors.New("--experiment shaping: needs iperf3 (Debian package iperf3; `make deb-deps` installs it)")
	}
	return nil
}

// Balance of every provisioned account, in minor units.
const balance = 100_000_000

// Lab is one run; New prepares it, Run runs it.
type Lab struct {
	o      Options
	prefix string
	pins   map[string]string // role → CPU list when pinned
	procs  map[bool]map[string]int
	cell   int
	// goDefault is GOMAXPROCS of an unpinned Go process left to choose.
	goDefault int
}

// New returns a lab with a namespace prefix unique to this process.
func New(o Options) *Lab {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	if len(o.CPUs) == 0 {
		o.CPUs = allowedCPUs()
	}
	l := &Lab{o: o, prefix: fmt.Sprintf("chfl%d-", pid), procs: map[bool]map[string]int{}}
	l.pins = Pinning(o.CPUs)
	return l
}

// Prefix is the prefix of every namespace this lab creates.
func (l *Lab) Prefix() string { return l.prefix }

func (l *Lab) progress(format string, args ...any) {
	fmt.Fprintf(l.o.Progress, "lab: "+format+"\n", args...)
}

// Run runs the comparison (or the shaping experiment) and writes the
// report into Options.Out. Whatever happens, it leaves no namespace or
// process behind; on cancellation the rows measured so far are written.
func (l *Lab) Run(ctx context.Context) (*Report, error) {
	// Namespaces of an earlier lab that was killed (SIGKILL leaves them).
	if err := removeStale(); err != nil {
		l.progress("cannot remove the namespaces of a killed lab: %v", err)
	}
	// A last sweep by prefix catches what a cancelled step left half-built.
	defer func() { _ = removeNamespaces(l.prefix) }()
	if err := os.MkdirAll(filepath.Join(l.o.Out, "runs"), 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", l.o.Out, err)
	}
	rep := l.newReport()
	var err error
	if l.o.Experiment == "shaping" {
		err = l.shaping(ctx, rep)
	} else {
		err = l.compare(ctx, rep)
	}
	rep.GoDefaultGOMAXPROCS = l.goDefault
	rep.finish(l.o)
	if werr := rep.Write(l.o.Out); werr != nil {
		err = errors.Join(err, werr)
	} else if _, ierr := report.UpdateIndex(l.o.Out); ierr != nil {
		l.progress("cannot update the results index: " + ierr.Error())
	}
	return rep, err
}

func (l *Lab) compare(ctx context.Context, rep *Report) error {
	if l.o.Rate == 0 {
		l.progress("no --rate: a short sweep of the host model finds its knee; the fixed rate is half of it")
		knee, notes, err := l.hostKnee(ctx)
		if err != nil {
			return fmt.Errorf("cannot find the host model's knee: %w", err)
		}
		rep.HostKneeTPS, rep.HostKneeRetried = knee, notes
		for _, n := range notes {
			l.progress("host knee sweep: " + n)
		}
		l.o.Rate = math.Max(100, math.Round(knee/2/100)*100)
		l.progress("host knee %.0f TPS: fixed rate %.0f TPS", knee, l.o.Rate)
	}
	rep.RateTPS = l.o.Rate
	ipip := HasIPIP(ctx)
	rows := map[string]*Row{}
	for _, m := range l.o.Models {
		for _, pinned := range l.o.Pin {
			r := &Row{Model: m, Datapath: DatapathEmulated, Emulation: Describe[m], Pinned: pinned, CPUs: l.cpuSets(pinned)}
			if m == "calico-ipip" && !ipip {
				r.Unavailable = "not available on this kernel (no ipip module)"
			}
			rep.Rows = append(rep.Rows, r)
			rows[rowKey(m, pinned)] = r
		}
	}
	var failed []error
	for trial := 1; trial <= l.o.Trials; trial++ {
		for _, r := range rep.Rows {
			if r.Unavailable != "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			l.progress("trial %d/%d: %s, %s", trial, l.o.Trials, r.Model, pinName(r.Pinned))
			t0 := time.Now()
			tr, err := l.cellRun(ctx, r, trial)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				l.progress("trial %d: %s, %s failed: %v", trial, r.Model, pinName(r.Pinned), err)
				r.Failures = append(r.Failures, fmt.Sprintf("trial %d: %v", trial, err))
				failed = append(failed, fmt.Errorf("%s %s trial %d: %w", r.Model, pinName(r.Pinned), trial, err))
				continue
			}
			r.Trials = append(r.Trials, tr)
			l.progress("trial %d: %s, %s: %.0f TPS, p50 %.3f ms, p99 %.3f ms, SUT %.0f µs/txn (%.1fs)",
				trial, r.Model, pinName(r.Pinned), tr.TPS, tr.P50Ms, tr.P99Ms, tr.SUTUsTxn, time.Since(t0).Seconds())
		}
	}
	if l.o.Cluster != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.cluster(ctx, rep); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

func rowKey(model string, pinned bool) string { return model + "/" + pinName(pinned) }

func pinName(p bool) string {
	if p {
		return "pinned"
	}
	return "unpinned"
}

// cpuSets returns each role's CPU list ("" = every CPU).
func (l *Lab) cpuSets(pinned bool) map[string]string {
	out := map[string]string{}
	for _, r := range Roles {
		if pinned {
			out[r] = l.pins[r]
		} else {
			out[r] = ""
		}
	}
	return out
}

// Pinning divides cpus among the roles, disjoint sets covering all of
// them (the same CPU budget as unpinned): one set per role with five or
// more CPUs, else one set per node (the node's pods share it), else none.
func Pinning(cpus []int) map[string]string {
	out := map[string]string{}
	switch {
	case len(cpus) >= len(Roles):
		k := len(cpus) / len(Roles)
		for i, r := range Roles {
			hi := (i + 1) * k
			if i == len(Roles)-1 {
				hi = len(cpus)
			}
			out[r] = cpuList(cpus[i*k : hi])
		}
	case len(cpus) >= 2:
		half := len(cpus) / 2
		for _, r := range Roles {
			if Nodes[r] == 1 {
				out[r] = cpuList(cpus[:half])
			} else {
				out[r] = cpuList(cpus[half:])
			}
		}
	default:
		for _, r := range Roles {
			out[r] = ""
		}
	}
	return out
}

// PinNote says in plain words what "pinned" means with these CPUs.
func PinNote(cpus []int) string {
	p := Pinning(cpus)
	switch {
	case len(cpus) >= len(Roles):
		parts := make([]string, 0, len(Roles))
		for _, r := range Roles {
			parts = append(parts, r+" on CPU "+p[r])
		}
		return fmt.Sprintf("pinned: each process has CPUs of its own (%s); unpinned: every process may run on all %d CPUs. Same CPU budget either way.", strings.Join(parts, ", "), len(cpus))
	case len(cpus) >= 2:
		return fmt.Sprintf("this machine has %d CPUs for 5 processes, so pinned cannot give each service a CPU of its own: pinned means node n1's pods (cgw, ocp) share CPU %s and node n2's pods (aslite, abm) and the load generator share CPU %s, as a static CPU manager with one exclusive set per node would; unpinned: every process may run on all %d CPUs. Same CPU budget either way.", len(cpus), p["cgw"], p["aslite"], len(cpus))
	default:
		return "this machine has 1 CPU: pinned and unpinned are the same (nothing to divide)"
	}
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// allowedCPUs parses Cpus_allowed_list of this process (0..NumCPU-1 if
// unreadable).
func allowedCPUs() []int {
	var out []int
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			v, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
			if !ok {
				continue
			}
			for _, part := range strings.Split(strings.TrimSpace(v), ",") {
				lo, hi, isRange := strings.Cut(part, "-")
				a, err1 := strconv.Atoi(lo)
				b := a
				var err2 error
				if isRange {
					b, err2 = strconv.Atoi(hi)
				}
				if err1 != nil || err2 != nil {
					out = nil
					break
				}
				for c := a; c <= b; c++ {
					out = append(out, c)
				}
			}
		}
	}
	if len(out) == 0 {
		for c := 0; c < runtime.NumCPU(); c++ {
			out = append(out, c)
		}
	}
	return out
}

// chf is one running CHF placed on a topology.
type chf struct {
	t     *Topology
	procs map[string]*proc
	order []*proc
}

func (c *chf) stop() {
	for i := len(c.order) - 1; i >= 0; i-- {
		c.order[i].stop(3 * time.Second)
	}
}

func (c *chf) alive() error {
	var errs []error
	for _, p := range c.order {
		errs = append(errs, p.exited())
	}
	return errors.Join(errs...)
}

// env returns the environment of role's process.
func (l *Lab) env(role string, pinned bool) []string {
	if pinned || !l.o.MatchGOMAXPROCS || l.pins[role] == "" {
		return nil
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(len(strings.Split(l.pins[role], ",")))}
}

// build builds model under a prefix of its own and registers its teardown.
func (l *Lab) build(ctx context.Context, model string) (*Topology, func(), error) {
	l.cell++
	b := &builder{prefix: fmt.Sprintf("%sc%d-", l.prefix, l.cell), mtu: l.o.MTU}
	down := func() { _ = removeNamespaces(b.prefix) }
	t, err := b.build(ctx, model)
	if err != nil {
		down()
		return nil, nil, fmt.Errorf("cannot build %s: %w", model, err)
	}
	return t, down, nil
}

// wait waits in ns until addr (or url) is ready.
func (l *Lab) wait(ctx context.Context, ns, addr, url string) error {
	args := []string{l.o.Loadgen, "lab", "wait", "--timeout", "30s"}
	if url != "" {
		args = append(args, "--http", url)
	} else {
		args = append(args, "--tcp", addr)
	}
	_, err := runOut(ctx, ns, "", nil, l.o.Logs, args...)
	return err
}

// startCHF starts aslite, abm, provisioning, ocp and cgw on t, each once
// the previous is ready (checked from the namespace of its client).
func (l *Lab) startCHF(ctx context.Context, t *Topology, pinned bool) (*chf, error) {
	c := &chf{t: t, procs: map[string]*proc{}}
	p := t.Places
	cpus := l.cpuSets(pinned)
	spawn := func(role string, args ...string) error {
		if rp := l.o.RuntimeProfile; rp != "" && rp != sched.Production {
			args = append(args, "--"+sched.FlagName, string(rp))
		}
		pr, err := start(role, p[role].NS, cpus[role], l.env(role, pinned), l.o.Logs, append([]string{l.o.CHF, role}, args...)...)
		if err != nil {
			return err
		}
		c.procs[role] = pr
		c.order = append(c.order, pr)
		return nil
	}
	aslite, abm, ocp, cgw := p["aslite"].HostPort(Ports["aslite"]), p["abm"].HostPort(Ports["abm"]), p["ocp"].HostPort(Ports["ocp"]), p["cgw"].HostPort(Ports["cgw"])
	startStore := func() error { return spawn("aslite", "--listen", aslite, "--namespace", "chf") }
	waitStore := func() error { return l.wait(ctx, p["abm"].NS, aslite, "") }
	if l.o.AsdBinary != "" {
		startStore = func() error {
			dir, err := os.MkdirTemp(l.o.Out, "asd-"+t.Model+"-")
			if err != nil {
				return fmt.Errorf("cannot create asd's directory: %w", err)
			}
			conf, err := asdConfig(dir, p["aslite"].Addr)
			if err != nil {
				return err
			}
			pr, err := start("aslite", p["aslite"].NS, cpus["aslite"], nil, l.o.Logs, l.o.AsdBinary, "--config-file", conf, "--foreground")
			if err != nil {
				return err
			}
			c.procs["aslite"] = pr
			c.order = append(c.order, pr)
			return nil
		}
		waitStore = func() error {
			_, err := runOut(ctx, p["abm"].NS, "", nil, l.o.Logs, l.o.Loadgen, "lab", "wait", "--timeout", "60s", "--aerospike", aslite)
			return err
		}
	}
	steps := []func() error{
		startStore,
		waitStore,
		func() error {
			return spawn("abm", "--listen", abm, "--aerospike", aslite, "--as-namespace", "chf", "--log-level", "warn")
		},
		func() error { return l.wait(ctx, p["ocp"].NS, "", "http://"+abm+"/readyz") },
		// Provisioning runs in the client's pod, which reaches aslite in
		// every model (a node cannot reach its own macvlan pods).
		func() error {
			_, err := runOut(ctx, p["loadgen"].NS, "", nil, l.o.Logs, l.o.CHF, "provision", "--aerospike", aslite,
				"--accounts", strconv.Itoa(l.o.Accounts), "--balance", strconv.Itoa(balance), "--overwrite", "--quiet")
			return err
		},
		func() error { return spawn("ocp", "--listen", ocp, "--abm", abm, "--log-level", "warn") },
		func() error { return l.wait(ctx, p["cgw"].NS, "", "http://"+ocp+"/readyz") },
		func() error { return spawn("cgw", "--listen", cgw, "--ocp", ocp, "--log-level", "warn") },
		func() error { return l.wait(ctx, p["loadgen"].NS, "", "http://"+cgw+"/readyz") },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			c.stop()
			if aerr := c.alive(); aerr != nil && ctx.Err() == nil {
				err = errors.Join(err, aerr)
			}
			return nil, fmt.Errorf("cannot start the CHF: %w", err)
		}
	}
	return c, nil
}

// gomaxprocs returns what Go picks for each service's CPU mask and
// environment, asked of a Go process started exactly as the service is.
func (l *Lab) gomaxprocs(ctx context.Context, t *Topology, pinned bool) (map[string]int, error) {
	if m, ok := l.procs[pinned]; ok {
		return m, nil
	}
	cpus := l.cpuSets(pinned)
	m := map[string]int{}
	for _, role := range Roles {
		if role == "loadgen" {
			continue // sized by loadgen run --procs (one per scheduler worker)
		}
		out, err := runOut(ctx, t.Places[role].NS, cpus[role], l.env(role, pinned), l.o.Logs, l.o.Loadgen, "lab", "gomaxprocs")
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			return nil, fmt.Errorf("cannot parse GOMAXPROCS %q: %w", out, err)
		}
		m[role] = n
	}
	if !pinned && l.goDefault == 0 {
		// And Go's own choice for an unpinned process without GOMAXPROCS.
		out, err := runOut(ctx, t.Places["cgw"].NS, "", nil, l.o.Logs, l.o.Loadgen, "lab", "gomaxprocs")
		if err != nil {
			return nil, err
		}
		if l.goDefault, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
			return nil, fmt.Errorf("cannot parse GOMAXPROCS %q: %w", out, err)
		}
	}
	l.procs[pinned] = m
	return m, nil
}

// cellRun builds the model, measures the network alone, starts the CHF,
// runs the fixed-rate load (and the sweep when asked, in trial 1), and
// tears it all down.
func (l *Lab) cellRun(ctx context.Context, r *Row, trial int) (Trial, error) {
	tr := Trial{Trial: trial}
	t, down, err := l.build(ctx, r.Model)
	if err != nil {
		return tr, err
	}
	defer down()
	if r.GOMAXPROCS == nil {
		if r.GOMAXPROCS, err = l.gomaxprocs(ctx, t, r.Pinned); err != nil {
			return tr, err
		}
	}
	if tr.Network, err = l.network(ctx, t, r.Pinned); err != nil {
		return tr, err
	}
	c, err := l.startCHF(ctx, t, r.Pinned)
	if err != nil {
		return tr, err
	}
	defer c.stop()
	name := fmt.Sprintf("%s-%s-t%d", r.Model, pinName(r.Pinned), trial)
	file := filepath.Join(l.o.Out, "runs", name+".json")
	if err := l.load(ctx, c, r.Pinned, l.o.Rate, file, r.Model+" "+pinName(r.Pinned)); err != nil {
		return tr, err
	}
	if err := tr.read(file); err != nil {
		return tr, err
	}
	tr.File = filepath.Join("runs", name+".json")
	if l.o.Sweep && trial == 1 {
		dir := filepath.Join(l.o.Out, "runs", name+"-sweep")
		knee, notes, err := l.sweep(ctx, c, r.Pinned, dir, l.o.Duration)
		if err != nil {
			return tr, err
		}
		r.KneeTPS, r.KneeRetried = &knee, notes
	}
	if err := c.alive(); err != nil {
		return tr, fmt.Errorf("a service died during the run: %w", err)
	}
	return tr, nil
}

// loadArgs are the flags of `loadgen run` the lab passes. fresh: the
// accounts are as provisioned (no run before on this CHF), so the audit
// may take every balance as the provisioned one rather than read it
// before the run; a run after another on the same CHF (the knee sweep
// after trial 1's fixed-rate run) must read them.
func (l *Lab) loadArgs(c *chf, duration time.Duration, fresh bool) []string {
	args := []string{
		"--target", "http://" + c.t.Places["cgw"].HostPort(Ports["cgw"]),
		"--duration", duration.String(), "--warmup", l.o.Warmup.String(), "--ramp-up", "1s",
		"--subscribers", strconv.Itoa(l.o.Accounts),
		"--progress", "off", "--log-level", "warn", "--pacing", l.o.Pacing.String(),
		"--" + sched.FlagName, l.o.RuntimeProfile.String(),
	}
	for _, role := range []string{"aslite", "abm", "ocp", "cgw"} {
		args = append(args, "--cpu", role+"=pid:"+strconv.Itoa(c.procs[role].Pid()))
	}
	if fresh {
		args = append(args, "--initial-balance", strconv.Itoa(balance))
	}
	return args
}

// load runs `loadgen run --json file` in the client's namespace.
func (l *Lab) load(ctx context.Context, c *chf, pinned bool, rate float64, file, label string) error {
	args := append([]string{l.o.Loadgen, "run"}, l.loadArgs(c, l.o.Duration, true)...)
	args = append(args, "--rate", strconv.FormatFloat(rate, 'f', -1, 64), "--json", file, "--label", label)
	_, err := runOut(ctx, c.t.Places["loadgen"].NS, l.cpuSets(pinned)["loadgen"], nil, l.o.Logs, args...)
	var exit *exec.ExitError
	if errors.As(err, &exit) && (exit.ExitCode() == exitAudit || exit.ExitCode() == exitThreshold) && ctx.Err() == nil {
		// The run completed and wrote its result; the failed audit is a
		// finding the report shows, not a failure of the lab.
		if _, serr := os.Stat(file); serr == nil {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("loadgen run: %w", err)
	}
	return nil
}

// loadgen's exit codes for a run that completed and wrote its result but
// whose balance audit failed (3) or that missed a threshold (6).
const (
	exitAudit     = 3
	exitThreshold = 6
)

// kneeRetries is how many more times a knee sweep runs a step that
// missed its SLO before it declares the knee: on a shared machine one
// noisy step (a neighbour's burst) must not end the sweep.
const kneeRetries = 2

// Knee sweep steps: 1000, 2000, ... 40000 TPS.
const (
	kneeStart, kneeStep, kneeMax = 1000, 1000, 40000
	kneeSteps                    = (kneeMax-kneeStart)/kneeStep + 1
)

// retries is the --retries the knee sweeps get: kneeRetries, fewer when
// the accounts cannot give every attempt its own slice.
func (l *Lab) retries() int { return kneeRetriesFor(l.o.Accounts) }

func kneeRetriesFor(accounts int) int {
	return max(0, min(kneeRetries, accounts/kneeSteps-1))
}

// kneeStealRetries is the knee sweeps' --steal-retries: at most this many
// attempts over a sweep are void and run again because the hypervisor
// took more than loadgen sweep's --max-steal in one of their seconds.
const kneeStealRetries = 3

// stealRetries is the --steal-retries the knee sweeps get: fewer than
// kneeStealRetries when the accounts left after retries() cannot give
// each such attempt its own slice.
func (l *Lab) stealRetries() int { return kneeStealRetriesFor(l.o.Accounts) }

func kneeStealRetriesFor(accounts int) int {
	return max(0, min(kneeStealRetries, accounts-kneeSteps*(1+kneeRetriesFor(accounts))))
}

// sweep runs `loadgen sweep` against c and returns its knee and, for each
// step that passed only on a retry or failed after its retries, what the
// earlier attempts missed.
func (l *Lab) sweep(ctx context.Context, c *chf, pinned bool, dir string, step time.Duration) (float64, []string, error) {
	args := append([]string{l.o.Loadgen, "sweep"}, l.loadArgs(c, step, false)...)
	// The SLO finds where the CHF saturates (queues grow, p99 climbs by
	// orders of magnitude), not a latency target: --knee-slo-p99 (default
	// 50 ms) and 5% late sends, so that a shared machine's scheduling
	// noise does not end the sweep first; a step that misses is run
	// again (--retries) before it counts.
	// Capacity, not latency resolution: the knee sweeps pace at loadgen's
	// 1 ms default (cheaper per request, and not counted late for a
	// loaded machine's wake-up delays), whatever --pacing the runs use.
	args = append(args, KneeSweepArgs(l.o.Accounts, l.o.KneeP99)...)
	args = append(args, "--out", dir)
	if _, err := runOut(ctx, c.t.Places["loadgen"].NS, l.cpuSets(pinned)["loadgen"], nil, l.o.Logs, args...); err != nil {
		return 0, nil, fmt.Errorf("loadgen sweep: %w", err)
	}
	b, err := readfile.Read(filepath.Join(dir, "sweep.json"), report.MaxFileBytes)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot read the sweep result: %w", err)
	}
	return KneeOf(b)
}

// KneeSweepArgs are the flags every knee sweep passes to `loadgen sweep`
// beyond the run's own: 1 ms pacing, the steps, the retries the accounts
// allow and the SLO. The real cluster's sweeps (cluster e2e --sweep) pass
// the same, so that a model's emulated and CNI knees are found alike.
func KneeSweepArgs(accounts int, kneeP99 time.Duration) []string {
	return []string{"--pacing", "1ms",
		"--start", strconv.Itoa(kneeStart), "--step", strconv.Itoa(kneeStep), "--max", strconv.Itoa(kneeMax),
		"--retries", strconv.Itoa(kneeRetriesFor(accounts)), "--steal-retries", strconv.Itoa(kneeStealRetriesFor(accounts)),
		"--slo-p99", kneeP99.String(), "--slo-late-rate", "0.05"}
}

// KneeOf returns the knee of a sweep.json and, for each step that had
// attempts voided by the host's steal or passed only on a retry or failed
// after its retries, what those attempts met.
func KneeOf(b []byte) (float64, []string, error) {
	var s struct {
		Knee  float64 `json:"knee_tps"`
		Steps []struct {
			TPS     float64  `json:"offered_tps"`
			Pass    bool     `json:"pass"`
			Reason  string   `json:"reason"`
			Retried []string `json:"retried"`
			Voided  []string `json:"voided"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, nil, fmt.Errorf("cannot decode the sweep result: %w", err)
	}
	var notes []string
	for _, st := range s.Steps {
		for _, v := range st.Voided {
			notes = append(notes, fmt.Sprintf("%.0f TPS attempt void (%s)", st.TPS, v))
		}
		if len(st.Retried) == 0 {
			continue
		}
		v := fmt.Sprintf("met on attempt %d", len(st.Retried)+1)
		if !st.Pass {
			v = fmt.Sprintf("missed %d times (last: %s)", len(st.Retried)+1, st.Reason)
		}
		notes = append(notes, fmt.Sprintf("%.0f TPS %s; earlier: %s", st.TPS, v, strings.Join(st.Retried, "; ")))
	}
	return s.Knee, notes, nil
}

// hostKnee sweeps the host model, unpinned, with short steps.
func (l *Lab) hostKnee(ctx context.Context) (float64, []string, error) {
	t, down, err := l.build(ctx, "host")
	if err != nil {
		return 0, nil, err
	}
	defer down()
	c, err := l.startCHF(ctx, t, false)
	if err != nil {
		return 0, nil, err
	}
	defer c.stop()
	knee, notes, err := l.sweep(ctx, c, false, filepath.Join(l.o.Out, "runs", "host-knee-sweep"), 3*time.Second)
	if err != nil {
		return 0, nil, err
	}
	if knee == 0 {
		return 0, notes, fmt.Errorf("not even the first step (1000 TPS) met the SLO (p99 %v, late sends 5%%): pass --rate or a larger --knee-slo-p99", l.o.KneeP99)
	}
	return knee, notes, nil
}
