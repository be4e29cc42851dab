// Command cluster starts and stops a real Kubernetes cluster on this
// machine for the charts: the control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) on the host, and a node (its
// own network namespace, containerd + runc, kubelet, kube-proxy, the
// bridge CNI) that runs the images built by `make images`. See
// cluster/README.md.
//
//	cluster up     [--dir D] [--bin B] [--images a.tar,b.tar] [--cpu-manager none|static]
//	cluster down   [--dir D]
//	cluster status [--dir D]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/cluster/image"
	"github.com/chf-testbed/testbed/cluster/kube"
)

var version = "dev"

const usage = `cluster: a real Kubernetes node on this machine, for the charts

  cluster up      start the control plane and a node, wait until it is Ready
  cluster down    tear down everything up made (also after a crash)
  cluster status  what runs, and what a tear-down would leave
  cluster e2e     up, the charts installed per network model and driven by
                  the loadgen Job (trials interleaved), a table, down
  cluster images  build the chf, loadgen and pause images as archives

Run "cluster <verb> -h" for a verb's flags. Needs root. See cluster/README.md.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	verb, args := args[0], args[1:]
	switch verb {
	case "up":
		return upCmd(ctx, args, stdout, stderr)
	case "down":
		return downCmd(ctx, args, stdout, stderr)
	case "status":
		return statusCmd(ctx, args, stdout, stderr)
	case "e2e":
		return e2eCmd(ctx, args, stdout, stderr)
	case "images":
		return image.Main(ctx, args, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "--version", "version":
		fmt.Fprintln(stdout, "cluster", version)
		return 0
	}
	fmt.Fprintf(stderr, "cluster: unknown verb %q\n\n%s", verb, usage)
	return 2
}

func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("cluster "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".cluster", "the cluster's directory: state, logs, the nodes' containerd and kubelet")
	return fs, dir
}

// nodesFlag is --nodes of up and e2e.
func nodesFlag(fs *flag.FlagSet) *int {
	return fs.Int("nodes", 1, fmt.Sprintf("nodes, each a network namespace with its own containerd, kubelet and kube-proxy on the fabric (1..%d)", kube.MaxNodes))
}

// parse parses fs and reports the exit code when the caller must stop.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}

func logTo(w io.Writer) func(string, ...any) {
	start := time.Now()
	return func(format string, args ...any) {
		fmt.Fprintf(w, "cluster: [%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
}

func upCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := newFlags("up", stderr)
	bin := fs.String("bin", "", "directory of etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy (cluster/build.sh prints it) (required)")
	images, pause := imageFlags(fs)
	cpuManager := fs.String("cpu-manager", "none", "the kubelet's CPU manager policy: none, or static (CPU 0 reserved, Guaranteed pods with integer CPUs pinned)")
	multus := fs.Bool("multus", false, "make the node's network Multus (thin plugin, cluster/build.sh --multus) over the bridge, for NetworkAttachmentDefinitions (the SR-IOV model's macvlan stand-in)")
	nodes := nodesFlag(fs)
	network := fs.String("network", kube.NetworkRouted, "the pod network between nodes: "+kube.NetworkRouted+" (each node routes the others' pod subnets, no encapsulation) or "+kube.NetworkFlannel+" (flanneld's VXLAN overlay, cluster/build.sh --flannel)")
	if code, done := parse(fs, args); done {
		return code
	}
	if *nodes < 1 || *nodes > kube.MaxNodes {
		fmt.Fprintf(stderr, "cluster up: --nodes must be 1..%d, got %d\n", kube.MaxNodes, *nodes)
		return 2
	}
	if *network != kube.NetworkRouted && *network != kube.NetworkFlannel {
		fmt.Fprintf(stderr, "cluster up: --network must be %s or %s, got %q\n", kube.NetworkRouted, kube.NetworkFlannel, *network)
		return 2
	}
	if *bin == "" {
		fmt.Fprintln(stderr, "cluster up: --bin is required (cluster/build.sh prints the directory)")
		return 2
	}
	if *cpuManager != "none" && *cpuManager != "static" {
		fmt.Fprintf(stderr, "cluster up: --cpu-manager must be none or static, got %q\n", *cpuManager)
		return 2
	}
	var imgs []string
	for _, i := range strings.Split(*images, ",") {
		if i = strings.TrimSpace(i); i != "" {
			abs, _ := filepath.Abs(i)
			imgs = append(imgs, abs)
		}
	}
	d, _ := filepath.Abs(*dir)
	b, _ := filepath.Abs(*bin)
	log := logTo(stderr)
	err := kube.Up(ctx, kube.Config{Dir: d, Bin: b, Images: imgs, PauseImage: *pause, CPUManager: *cpuManager, Multus: *multus, Nodes: *nodes, Network: *network, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "cluster up: %v\n", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	fmt.Fprintf(stdout, "export KUBECONFIG=%s\n", kube.Kubeconfig(d))
	return 0
}

func downCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs, dir := newFlags("down", stderr)
	if code, done := parse(fs, args); done {
		return code
	}
	d, _ := filepath.Abs(*dir)
	// The tear-down runs to its end even when interrupted: stopping
	// halfway would leave more behind.
	if err := kube.Down(context.WithoutCancel(ctx), d, logTo(stderr)); err != nil {
		fmt.Fprintf(stderr, "cluster down: %v\n", err)
		return 1
	}
	return 0
}

func statusCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := newFlags("status", stderr)
	if code, done := parse(fs, args); done {
		return code
	}
	d, _ := filepath.Abs(*dir)
	st, err := kube.LoadState(d)
	if errors.Is(err, kube.ErrNoCluster) {
		fmt.Fprintf(stdout, "no cluster in %s\n", d)
		if left := kube.Leftovers(d, nil, nil); len(left) > 0 {
			fmt.Fprintf(stdout, "left on the host: %s\n", strings.Join(left, "; "))
			return 1
		}
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "cluster status: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "cluster in %s: API server %s, CPU manager %s\nexport KUBECONFIG=%s\n", d, st.APIServer, st.CPUManager, kube.Kubeconfig(d))
	for _, n := range st.Nodes {
		fmt.Fprintf(stdout, "node %s: %s, pods %s, netns %s, cgroup %s\n", n.Name, n.IP, n.PodCIDR, n.Netns, n.Cgroup)
	}
	return 0
}

// imageFlags declares --images and --pause-image, defaulting to what
// `make images` writes: bin/images/{chf,loadgen,pause}.tar, the pause
// image tagged with the chart's appVersion.
func imageFlags(fs *flag.FlagSet) (*string, *string) {
	tag, err := image.DefaultTag(".")
	if err != nil {
		tag = "dev"
	}
	images := fs.String("images", "bin/images/chf.tar,bin/images/loadgen.tar,bin/images/pause.tar",
		"comma-separated image archives to import into the node (make images writes these)")
	pause := fs.String("pause-image", "docker.io/"+image.PauseRef(image.DefaultRepo, tag),
		"the node's sandbox (pause) image reference; it must be in --images")
	return images, pause
}
