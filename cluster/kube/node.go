package kube

import (
	"context"
	"fmt"
	"k8s.io/client-go/kubernetes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The node's configuration files. Everything a node's containerd and
// kubelet keep is under the node's directory (root, state, sockets, runc
// state, CNI configuration and IP allocations, pod logs, volumes).

func containerdConfig(n NodeState, pauseImage string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # No CAP_SYS_RESOURCE in some VMs: a negative oom_score_adj is refused
  # and every sandbox fails; keep the adjustment at or above containerd's.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
    max_conf_num = 1
`, filepath.Join(n.Dir, "containerd", "root"), filepath.Join(n.Dir, "containerd", "state"),
		containerdSock(n), containerdSock(n)+".ttrpc", filepath.Join(n.Dir, "containerd", "opt"),
		pauseImage, filepath.Join(n.Dir, "runc"), cniBinDir(n), filepath.Join(n.Dir, "cni", "net.d"))
}

func containerdSock(n NodeState) string { return filepath.Join(n.Dir, "containerd.sock") }

// cniBinDir holds the CNI plugins the node uses: Debian's, and Multus
// when it is installed (a directory of links, so both are found).
func cniBinDir(n NodeState) string { return filepath.Join(n.Dir, "cni", "bin") }

// DebianCNI is where Debian's containernetworking-plugins installs.
const DebianCNI = "/usr/lib/cni"

// bridgeConf is the node's pod network: Debian's bridge plugin with
// host-local addresses from the node's pod subnet (kept in its directory).
// With list, a conflist (what containerd loads); else a single network
// configuration, which is how Multus gets it as its cluster network (the
// thin plugin v4.2.2 deletes a conflist delegate with only the plugins'
// types, and the bridge's host-local then fails: "no IP ranges specified").
// mtu, when not 0, is the pods' MTU (flannel's, under its encapsulation).
func bridgeConf(n NodeState, list bool, mtu int) string {
	m := ""
	if mtu > 0 {
		m = fmt.Sprintf("\n  \"mtu\": %d,", mtu)
	}
	plugin := fmt.Sprintf(`"type": "bridge",
  "bridge": "cni0",`+m+`
  "isGateway": true,
  "ipMasq": false,
  "hairpinMode": true,
  "ipam": {
    "type": "host-local",
    "ranges": [[{"subnet": %q, "gateway": %q}]],
    "routes": [{"dst": "0.0.0.0/0"}],
    "dataDir": %q
  }`, n.PodCIDR, n.Gateway(), filepath.Join(n.Dir, "cni", "ipam"))
	if list {
		return "{\n\"cniVersion\": \"0.4.0\",\n\"name\": \"chf-pods\",\n\"plugins\": [{\n  " + plugin + "\n}]\n}\n"
	}
	return "{\n  \"cniVersion\": \"0.4.0\",\n  \"name\": \"chf-pods\",\n  " + plugin + "\n}\n"
}

func kubeletConfig(n NodeState, pki *PKI, cpuManager string) string {
	cpu := ""
	if cpuManager == "static" {
		// One CPU kept for the system; Guaranteed pods with integer
		// CPUs get the others exclusively.
		cpu = "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
failSwapOn: false
containerRuntimeEndpoint: %[2]q
staticPodPath: %[3]q
podLogsDir: %[4]q
address: %[5]q
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[6]q}
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
makeIPTablesUtilChains: false
serializeImagePulls: false
maxPods: 50
# no resolver in pods: the host's would be off this machine (and no
# cluster DNS runs); the charts address Services by IP
resolvConf: ""
nodeStatusReportFrequency: 10s
%[7]s`, n.Cgroup, "unix://"+containerdSock(n), filepath.Join(n.Dir, "manifests"), filepath.Join(n.Dir, "pod-logs"),
		n.IP, pki.File("ca.crt"), cpu)
}

func kubeProxyConfig(n NodeState, kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: iptables
clusterCIDR: %q
hostnameOverride: %q
bindAddress: %q
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, PodCIDR, n.Name, n.IP)
}

// startNode starts the node's containerd (imports the images), kubelet
// and kube-proxy in its network namespace.
func startNode(ctx context.Context, s *State, n NodeState, pki *PKI, c kubernetes.Interface, images []string, pauseImage string, log func(string, ...any)) error {
	for _, d := range []string{"containerd", "runc", "cni/net.d", "cni/ipam", "cni/bin", "manifests", "pod-logs", "kubelet", "certs"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return fmt.Errorf("cannot create the node's directory: %w", err)
		}
	}
	if err := linkCNI(n); err != nil {
		return err
	}
	files := map[string]string{
		"containerd/config.toml": containerdConfig(n, pauseImage),
		"kubelet-config.yaml":    kubeletConfig(n, pki, s.CPUManager),
	}
	if s.Network != NetworkFlannel { // flannel's is written from its subnet.env
		files["cni/net.d/10-chf-pods.conflist"] = bridgeConf(n, true, 0)
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, f), []byte(body), 0o644); err != nil {
			return fmt.Errorf("cannot write %s: %w", f, err)
		}
	}
	if s.Multus {
		if err := multusFiles(n, s, pki); err != nil {
			return err
		}
	}
	log("%s: starting containerd", n.Name)
	if err := start(n.Dir, "containerd", n.NetnsPath(), "containerd", "--config", filepath.Join(n.Dir, "containerd", "config.toml")); err != nil {
		return err
	}
	if err := waitFor(ctx, n.Dir, "containerd", "containerd", 30*time.Second, func() error {
		_, err := run(ctx, "ctr", "--address", containerdSock(n), "version")
		return err
	}); err != nil {
		return err
	}
	for _, img := range images {
		log("%s: importing %s", n.Name, filepath.Base(img))
		if _, err := run(ctx, "ctr", "--address", containerdSock(n), "-n", "k8s.io", "images", "import", "--no-unpack=false", img); err != nil {
			return fmt.Errorf("cannot import %s: %w", img, err)
		}
	}
	// Without its sandbox image no pod starts, and the kubelet says so
	// only in its log (pods stay ContainerCreating): say it now.
	if refs, err := run(ctx, "ctr", "--address", containerdSock(n), "-n", "k8s.io", "images", "ls", "-q"); err == nil &&
		!slices.Contains(strings.Fields(refs), pauseImage) {
		return fmt.Errorf("the sandbox image %s is not among the imported images (%s): give the pause image's reference (--pause-image) or its archive (--images)", pauseImage, strings.Join(strings.Fields(refs), ", "))
	}

	// The kubelet's identity (the Node authorizer's form) and kube-proxy's.
	if err := pki.Issue("kubelet-"+n.Name, pkixName("system:node:"+n.Name, "system:nodes"), nil, nil); err != nil {
		return err
	}
	kc, err := pki.Kubeconfig("kubelet-"+n.Name, s.APIServer)
	if err != nil {
		return err
	}
	if err := makeCgroup(n.Cgroup); err != nil {
		return err
	}
	log("%s: starting the kubelet", n.Name)
	if err := start(n.Dir, "kubelet", n.NetnsPath(), filepath.Join(s.Bin, "kubelet"),
		"--config="+filepath.Join(n.Dir, "kubelet-config.yaml"), "--kubeconfig="+kc,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"), "--cert-dir="+filepath.Join(n.Dir, "certs"),
		"--hostname-override="+n.Name, "--node-ip="+n.IP, "--oom-score-adj=0", "--v=1"); err != nil {
		return err
	}
	if err := pki.Issue("kube-proxy-"+n.Name, pkixName("system:kube-proxy", "system:node-proxier"), nil, nil); err != nil {
		return err
	}
	pkc, err := pki.Kubeconfig("kube-proxy-"+n.Name, s.APIServer)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "kube-proxy.yaml"), []byte(kubeProxyConfig(n, pkc)), 0o644); err != nil {
		return fmt.Errorf("cannot write the kube-proxy configuration: %w", err)
	}
	log("%s: starting kube-proxy", n.Name)
	if err := start(n.Dir, "kube-proxy", n.NetnsPath(), filepath.Join(s.Bin, "kube-proxy"),
		"--config="+filepath.Join(n.Dir, "kube-proxy.yaml"), "--v=0"); err != nil {
		return err
	}
	if s.Network == NetworkFlannel {
		return startFlannel(ctx, s, n, pki, c, log)
	}
	return nil
}

// linkCNI fills the node's CNI binary directory with links to Debian's
// plugins (and to Multus when it was built beside the kube binaries).
func linkCNI(n NodeState) error {
	ents, err := os.ReadDir(DebianCNI)
	if err != nil {
		return fmt.Errorf("cannot read %s (apt-get install containernetworking-plugins): %w", DebianCNI, err)
	}
	for _, e := range ents {
		dst := filepath.Join(cniBinDir(n), e.Name())
		_ = os.Remove(dst)
		if err := os.Symlink(filepath.Join(DebianCNI, e.Name()), dst); err != nil {
			return fmt.Errorf("cannot link the CNI plugin %s: %w", e.Name(), err)
		}
	}
	return nil
}

// nodeNetwork makes node n's network namespace: its end of a veth pair on
// the fabric (named eth0 inside), loopback, forwarding and bridge netfilter
// on; no default route, so nothing in it reaches beyond the fabric. With
// multus, a second veth pair joins the node's macvlan uplink
// (MacvlanMaster, no address) to the host's SriovSwitch.
func nodeNetwork(ctx context.Context, n NodeState, multus bool) error {
	steps := [][]string{
		{"ip", "netns", "add", n.Netns},
		{"ip", "link", "add", n.Veth, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
		{"ip", "link", "set", n.Veth, "master", Fabric, "up"},
		{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
		{"ip", "-n", n.Netns, "addr", "add", n.IP + "/24", "dev", "eth0"},
		{"ip", "-n", n.Netns, "link", "set", "eth0", "up"},
		{"ip", "route", "replace", n.PodCIDR, "via", n.IP, "dev", Fabric},
		// The pods' bridge, made before the bridge plugin (which takes
		// it as it is), so that the Service range can be routed onto it:
		// host-network processes need a route to a Service address
		// before kube-proxy's DNAT, and one without a rule stays in the
		// node instead of leaving it.
		{"ip", "-n", n.Netns, "link", "add", "cni0", "type", "bridge"},
		{"ip", "-n", n.Netns, "addr", "add", n.Gateway() + "/24", "dev", "cni0"},
		{"ip", "-n", n.Netns, "link", "set", "cni0", "up"},
		{"ip", "-n", n.Netns, "route", "add", ServiceCIDR, "dev", "cni0", "src", n.Gateway()},
	}
	if multus {
		steps = append(steps,
			[]string{"ip", "link", "add", n.Uplink(), "type", "veth", "peer", "name", MacvlanMaster, "netns", n.Netns},
			[]string{"ip", "link", "set", n.Uplink(), "master", SriovSwitch, "up"},
			[]string{"ip", "-n", n.Netns, "link", "set", MacvlanMaster, "up"})
	}
	for _, s := range steps {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("cannot make node %s's network: %w", n.Name, err)
		}
	}
	for _, sc := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"} {
		if _, err := run(ctx, "nsenter", "--net="+n.NetnsPath(), "--", "sh", "-c", "echo 1 > /proc/sys/"+sc); err != nil {
			return fmt.Errorf("cannot set %s in node %s: %w", sc, n.Name, err)
		}
	}
	return nil
}

// nodeRoutes routes each node's pod subnet from every other node to it
// across the fabric: native routing, as a CNI without encapsulation (or
// Calico's BGP) sets it up, with the pods' own addresses on the wire.
func nodeRoutes(ctx context.Context, nodes []NodeState) error {
	for _, n := range nodes {
		for _, m := range nodes {
			if m.Name == n.Name {
				continue
			}
			if _, err := run(ctx, "ip", "-n", n.Netns, "route", "replace", m.PodCIDR, "via", m.IP, "dev", "eth0"); err != nil {
				return fmt.Errorf("cannot route %s's pods from %s: %w", m.Name, n.Name, err)
			}
		}
	}
	return nil
}

// hostNetwork makes the fabric bridge and the guard: whatever reaches the
// host from the fabric and would be forwarded (not to the host itself) is
// dropped and counted, before any node or pod exists. With multus it also
// makes SriovSwitch, a bridge without an address under the same guard.
func hostNetwork(ctx context.Context, multus bool) error {
	bridges := []string{Fabric}
	if multus {
		bridges = append(bridges, SriovSwitch)
	}
	steps := [][]string{
		{"ip", "link", "add", Fabric, "type", "bridge"},
		{"ip", "addr", "add", FabricHost + "/24", "dev", Fabric},
		{"ip", "link", "set", Fabric, "up"},
		{"iptables", "-w", "-N", GuardChain},
	}
	if multus {
		steps = append(steps, []string{"ip", "link", "add", SriovSwitch, "type", "bridge"},
			[]string{"ip", "link", "set", SriovSwitch, "up"})
	}
	for _, b := range bridges {
		// Frames a bridge forwards from one node to another (bridge
		// netfilter shows them to FORWARD) stay on that bridge.
		steps = append(steps, []string{"iptables", "-w", "-A", GuardChain, "-i", b, "-o", b, "-j", "ACCEPT"})
	}
	steps = append(steps, []string{"iptables", "-w", "-A", GuardChain, "-j", "DROP"})
	for _, b := range bridges {
		steps = append(steps, []string{"iptables", "-w", "-I", "FORWARD", "1", "-i", b, "-j", GuardChain},
			[]string{"iptables", "-w", "-I", "FORWARD", "1", "-o", b, "-j", GuardChain})
	}
	for _, s := range steps {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("cannot make the cluster's fabric and guard: %w", err)
		}
	}
	return nil
}

// GuardDrops is the packet count of the guard's DROP rule: what pods or
// nodes tried to send beyond the fabric.
func GuardDrops(ctx context.Context) (int64, error) {
	out, err := run(ctx, "iptables", "-w", "-L", GuardChain, "-v", "-x", "-n")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[2] == "DROP" {
			var n int64
			_, err := fmt.Sscan(f[0], &n)
			return n, err
		}
	}
	return 0, fmt.Errorf("no DROP rule in %s:\n%s", GuardChain, out)
}
