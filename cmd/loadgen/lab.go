package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/loadgen/lab"
	"github.com/chf-testbed/testbed/loadgen/testbed"
	"github.com/chf-testbed/testbed/local"
)

func init() {
	register("lab", "build the network models in namespaces, run the CHF on each ± pinning, write lab.json/lab.md/lab.html (root)", labCmd)
}

// LabConfig is the configuration of loadgen lab; Validate turns it into
// the lab's options.
type LabConfig struct {
	models, pin, experiment, out, baseline, chf string
	rate                                        float64
	duration, warmup, pacing, kneeP99           time.Duration
	iperfTime, shapingRTT                       time.Duration
	trials, mtu, accounts, probes, shapingRate  int
	sweep, matchGOMAXPROCS, logs                bool
	profile                                     sched.Profile
	store                                       storeFlags

	cluster                                        bool
	clusterBin, kubeBin, helm, repo, clusterModels string
	clusterImages                                  string
	clusterNodes, clusterShards                    int

	// Resolved by Validate.
	options lab.Options
}

// DefaultLabConfig returns loadgen lab's defaults.
func DefaultLabConfig() LabConfig {
	return LabConfig{
		models: strings.Join(lab.Models, ","), pin: "both", baseline: "baremetal,pinned",
		duration: 10 * time.Second, warmup: 2 * time.Second, kneeP99: 50 * time.Millisecond,
		iperfTime: 3 * time.Second, shapingRTT: 10 * time.Millisecond,
		trials: 3, mtu: 1500, accounts: 20_000, probes: 2000, shapingRate: 100, matchGOMAXPROCS: true,
		helm: filepath.Join(".tools", "bin", "helm"), repo: ".", clusterNodes: 2, clusterShards: 1,
	}
}

// RegisterFlags registers loadgen lab's flags on fs, c's values as the
// defaults.
func (c *LabConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.models, "models", c.models, "comma-separated network models to compare: "+strings.Join(lab.Models, ", ")+" (each an emulation in network namespaces; deploy/lab/README.md)")
	fs.StringVar(&c.pin, "pin", c.pin, "CPU pinning: on (each service its own CPU set, taskset), off, or both")
	fs.Float64Var(&c.rate, "rate", c.rate, "fixed offered TPS of every run; 0 = 50% of the host model's knee, found first by a short sweep")
	fs.DurationVar(&c.duration, "duration", c.duration, "measured duration of each run (after a 1s ramp-up and --warmup)")
	fs.DurationVar(&c.warmup, "warmup", c.warmup, "warm-up of each run at full rate, excluded from the results")
	fs.DurationVar(&c.pacing, "pacing", c.pacing, "loadgen's --pacing for every run: 0 sends each request at its own time (scheduling lag of tens of µs, at several times loadgen's CPU per request); 1ms is loadgen's cheaper default, whose lag (~0.5 ms) exceeds the differences between models")
	fs.DurationVar(&c.kneeP99, "knee-slo-p99", c.kneeP99, "p99 limit of the sweeps that find a knee (the host sweep for the default rate, --sweep): where the CHF saturates, its p99 climbs far past it")
	fs.IntVar(&c.trials, "trials", c.trials, "trials per model × pinning, interleaved across models so drift hits all alike; the report shows medians and the range")
	fs.IntVar(&c.mtu, "mtu", c.mtu, "MTU of the fabric, the node uplinks and the pods: 1500 or 9000 (encapsulating models lower the pod MTU by their overhead)")
	fs.BoolVar(&c.sweep, "sweep", c.sweep, "also sweep each model × pinning (first trial) to find its knee: the TPS the models can carry, not only the fixed rate")
	fs.StringVar(&c.experiment, "experiment", c.experiment, "instead of the comparison, run an experiment: shaping (a tbf bottleneck between the nodes: BDP queue vs one-burst queue, cubic vs bbr; iperf3 and the CHF's p99)")
	fs.StringVar(&c.out, "out", c.out, "directory receiving lab.json, lab.md, lab.html, lab.log and every run's result (default results/lab-<timestamp>)")
	fs.StringVar(&c.baseline, "baseline", c.baseline, "row the ratios are taken to: MODEL[,pinned|,unpinned]")
	fs.IntVar(&c.accounts, "accounts", c.accounts, "accounts provisioned on each model (the subscriber range of the runs)")
	fs.StringVar(&c.chf, "chf", c.chf, "chf binary (default: next to loadgen, ./bin/chf, PATH, else built from ./cmd/chf)")
	fs.DurationVar(&c.iperfTime, "iperf-time", c.iperfTime, "length of each iperf3 run (whole seconds)")
	fs.IntVar(&c.probes, "probes", c.probes, "request/response exchanges of the RTT probe per model")
	fs.BoolVar(&c.matchGOMAXPROCS, "match-gomaxprocs", c.matchGOMAXPROCS, "give each unpinned service the GOMAXPROCS it gets pinned (Go sizes it from the CPU mask), so pinning changes only the mask; false keeps Go's default")
	fs.IntVar(&c.shapingRate, "shaping-rate", c.shapingRate, "--experiment shaping: bottleneck rate in Mbit/s")
	fs.DurationVar(&c.shapingRTT, "shaping-rtt", c.shapingRTT, "--experiment shaping: reference RTT sizing the shaping queue (rate × RTT)")
	fs.BoolVar(&c.logs, "logs", c.logs, "copy the services' output to stderr (default: into lab.log in --out)")
	fs.Var(&c.profile, sched.FlagName, "the CHF services' runtime profile (chf --runtime-profile): production (Go's and the kernel's scheduler defaults) or lab (SCHED_BATCH and Go's sysmon kept awake); recorded in every run's result and in lab.json")
	c.store.register(fs)
	fs.BoolVar(&c.cluster, "cluster", c.cluster, "also run the models on a real cluster on this machine (cluster e2e: nodes in network namespaces with containerd, kubelet and real CNI plugins), after the emulated ones: the report's datapath cni rows beside the emulated rows of the same model (root; cluster/README.md)")
	fs.StringVar(&c.clusterBin, "cluster-bin", c.clusterBin, "--cluster: the cluster binary (default: next to loadgen, else bin/cluster)")
	fs.StringVar(&c.kubeBin, "kube-bin", c.kubeBin, "--cluster: directory of the Kubernetes binaries (cluster/build.sh --all prints it)")
	fs.StringVar(&c.helm, "helm", c.helm, "--cluster: the helm binary")
	fs.StringVar(&c.repo, "repo", c.repo, "--cluster: the repository root whose charts/ are installed")
	fs.StringVar(&c.clusterModels, "cluster-models", c.clusterModels, "--cluster: cluster e2e's models (comma-separated; default all: pod-network, overlay, baremetal, the pinned ones and sriov-pinned); each is reported beside its emulated counterpart")
	fs.IntVar(&c.clusterNodes, "cluster-nodes", c.clusterNodes, "--cluster: nodes (the CGW and OCP on the first, the store, ABM and loadgen Job on the second)")
	fs.StringVar(&c.clusterImages, "cluster-images", c.clusterImages, "--cluster: comma-separated image archives for the nodes (default: make images' bin/images/{chf,loadgen,pause}.tar under --repo)")
	fs.IntVar(&c.clusterShards, "cluster-shards", c.clusterShards, "--cluster: loadgen Job shards")
}

// Validate checks the parsed flags (a usage error naming the flag) and
// builds the lab's options.
func (c *LabConfig) Validate() error {
	o := lab.Options{
		Rate: c.rate, KneeP99: c.kneeP99, Pacing: c.pacing, Duration: c.duration, Warmup: c.warmup, Trials: c.trials, MTU: c.mtu, Sweep: c.sweep,
		Experiment: c.experiment, Out: c.out, Accounts: c.accounts, MatchGOMAXPROCS: c.matchGOMAXPROCS,
		IPerfTime: c.iperfTime, ProbeCount: c.probes, ShapingRateMbit: c.shapingRate, ShapingRTT: c.shapingRTT,
		Progress: os.Stderr, RuntimeProfile: c.profile,
	}
	for _, m := range strings.Split(c.models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.Models = append(o.Models, m)
		}
	}
	switch c.pin {
	case "on":
		o.Pin = []bool{true}
	case "off":
		o.Pin = []bool{false}
	case "both":
		o.Pin = []bool{true, false}
	default:
		return usageError{fmt.Errorf("--pin: %q is not on, off or both", c.pin)}
	}
	bm, bp, _ := strings.Cut(c.baseline, ",")
	o.Baseline = bm
	switch bp {
	case "", "pinned":
		o.BaselinePinned = true
	case "unpinned":
	default:
		return usageError{fmt.Errorf("--baseline: %q: the pinning after the comma is pinned or unpinned", c.baseline)}
	}
	if o.Out == "" {
		o.Out = filepath.Join("results", "lab-"+time.Now().UTC().Format("20060102-150405"))
	}
	if p, err := exec.LookPath("iperf3"); err == nil {
		o.IPerf3 = p
	}
	if err := o.Validate(); err != nil {
		return usageError{err}
	}
	if err := c.validateStore(); err != nil {
		return err
	}
	o.AsdBinary = c.store.asdBinary
	if c.cluster {
		o.Cluster = &lab.ClusterOptions{Bin: c.clusterBin, KubeBin: c.kubeBin, Helm: c.helm, Repo: c.repo, Nodes: c.clusterNodes, Shards: c.clusterShards}
		if o.Cluster.Bin == "" {
			o.Cluster.Bin = besideSelf("cluster")
		}
		for _, m := range strings.Split(c.clusterModels, ",") {
			if m = strings.TrimSpace(m); m != "" {
				o.Cluster.Models = append(o.Cluster.Models, m)
			}
		}
		for _, i := range strings.Split(c.clusterImages, ",") {
			if i = strings.TrimSpace(i); i != "" {
				abs, _ := filepath.Abs(i)
				o.Cluster.Images = append(o.Cluster.Images, abs)
			}
		}
		for _, p := range []*string{&o.Cluster.Bin, &o.Cluster.KubeBin, &o.Cluster.Helm, &o.Cluster.Repo} {
			if *p != "" {
				*p, _ = filepath.Abs(*p)
			}
		}
		if o.Rate == 0 {
			return usageError{errors.New("--cluster: give --rate (the cluster's runs need a fixed rate; the host sweep is for the emulation)")}
		}
		if err := o.Validate(); err != nil {
			return usageError{err}
		}
	} else if c.clusterModels != "" || c.kubeBin != "" || c.clusterImages != "" {
		return usageError{errors.New("--cluster-models, --cluster-images and --kube-bin need --cluster")}
	}
	c.options = o
	return nil
}

// besideSelf is the path of the named binary next to this executable
// when there is one, else bin/<name>.
func besideSelf(name string) string {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return filepath.Join("bin", name)
}

// validateStore checks the store flags against what the lab can run.
func (c *LabConfig) validateStore() error {
	if err := c.store.check(); err != nil {
		return err
	}
	switch {
	case c.store.aerospike != "":
		return usageError{errors.New("invalid --aerospike: the lab's namespaces reach nothing outside them (no egress by construction); use --store asd, which runs the real server in the store's pod")}
	case c.store.nodes > 1:
		return usageError{errors.New("invalid --store-nodes: the lab runs one store node (its pod); a cluster is for loadgen local --store asd")}
	case c.store.namespace != local.DefaultNamespace:
		return usageError{errors.New("invalid --as-namespace: the lab's store serves chf")}
	}
	return nil
}

func labCmd(args []string) error {
	if len(args) > 0 {
		switch args[0] { // hidden helpers the lab runs inside its namespaces
		case "probe-server", "probe", "wait", "gomaxprocs":
			return labHelper(args[0], args[1:])
		}
	}
	c := DefaultLabConfig()
	fs := flag.NewFlagSet("loadgen lab", flag.ContinueOnError)
	c.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadgen lab [--models host,baremetal,...] [--pin on|off|both] [--rate N] [--out DIR] [flags]\n\n"+
			"Builds each network model in network namespaces (emulations, on this box), places the CHF's services on two\n"+
			"nodes (aslite and abm on n2 with the client, ocp and cgw on n1), runs `chf` and `loadgen run` on each with and\n"+
			"without CPU pinning, measures the datapath alone (iperf3, a TCP request/response probe), and writes one\n"+
			"comparison report. Removes everything it created at the end, on failure and on SIGINT/SIGTERM. Needs root and ip.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if err := labPreflight(c.experiment); err != nil {
		return err
	}
	return c.run()
}

// labPreflight checks what the lab needs of the machine: root, ip and
// taskset, tc for --experiment shaping.
func labPreflight(experiment string) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates network namespaces, links and qdiscs (run it with sudo)")
	}
	for _, tool := range []string{"ip", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s (iproute2, util-linux): %w", tool, err)
		}
	}
	if experiment == "shaping" {
		if _, err := exec.LookPath("tc"); err != nil {
			return fmt.Errorf("--experiment shaping needs tc (iproute2): %w", err)
		}
	}
	return nil
}

// run runs the lab until done or SIGINT/SIGTERM, and tears it down.
func (c *LabConfig) run() error {
	o := c.options
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the loadgen executable: %w", err)
	}
	o.Loadgen = self
	s := onSignalsTearDown()
	defer s.Stop() // only after Run has torn everything down
	ctx := s.Context()
	exe, cleanup, err := testbed.FindCHF(ctx, c.chf, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	if cleanup != nil {
		defer cleanup()
	}
	o.CHF = exe
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return fmt.Errorf("cannot create --out %s: %w", o.Out, err)
	}
	if c.logs {
		o.Logs = os.Stderr
	} else {
		f, err := os.Create(filepath.Join(o.Out, "lab.log"))
		if err != nil {
			return fmt.Errorf("cannot create lab.log: %w", err)
		}
		defer f.Close()
		o.Logs = f
	}
	l := lab.New(o)
	fmt.Fprintf(os.Stderr, "lab: namespaces %s*, report into %s\n", l.Prefix(), o.Out)
	_, err = l.Run(ctx)
	fmt.Fprintf(os.Stderr, "lab: wrote %s\n", filepath.Join(o.Out, "lab.md"))
	return s.wrap(err)
}

// labHelper runs one of the hidden helpers inside a namespace.
func labHelper(name string, args []string) error {
	fs := flag.NewFlagSet("loadgen lab "+name, flag.ContinueOnError)
	listen := fs.String("listen", "", "probe-server: host:port to serve the RR probe on")
	connect := fs.String("connect", "", "probe: host:port of the probe server")
	count := fs.Int("count", 2000, "probe: timed exchanges")
	tcp := fs.String("tcp", "", "wait: host:port that must accept connections")
	url := fs.String("http", "", "wait: URL that must answer 200")
	aero := fs.String("aerospike", "", "wait: host:port of an Aerospike node that must serve clients (a partition map)")
	timeout := fs.Duration("timeout", 30*time.Second, "wait and probe: give up after this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch name {
	case "probe-server":
		if *listen == "" {
			return usageError{errors.New("--listen is required")}
		}
		return lab.ServeProbe(ctx, *listen)
	case "probe":
		if *connect == "" || *count < 1 {
			return usageError{errors.New("--connect and a positive --count are required")}
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		r, err := lab.Ping(ctx, *connect, *count)
		if err != nil {
			return err
		}
		return lab.WriteRTT(os.Stdout, r)
	case "wait":
		if *aero != "" {
			return lab.WaitAerospike(ctx, *aero, *timeout)
		}
		if (*tcp == "") == (*url == "") {
			return usageError{errors.New("one of --tcp, --http and --aerospike is required")}
		}
		return lab.Wait(ctx, *tcp, *url, *timeout)
	default: // gomaxprocs
		_, err := fmt.Println(strconv.Itoa(lab.GOMAXPROCS()))
		return err
	}
}
