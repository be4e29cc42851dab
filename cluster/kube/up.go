package kube

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Config is what `cluster up` starts.
type Config struct {
	// Dir holds everything the cluster keeps (absolute; made if missing).
	Dir string
	// Bin holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet and kube-proxy (cluster/build.sh).
	Bin string
	// Images are image archives imported into every node's containerd.
	Images []string
	// PauseImage is containerd's sandbox image (one of Images).
	PauseImage string
	// CPUManager is the kubelets' CPU manager policy: none or static.
	CPUManager string
	// Multus makes each node's network Multus (thin plugin) over the
	// bridge, with the NetworkAttachmentDefinition CRD, and gives each
	// node a macvlan uplink (MacvlanMaster) on the host's SriovSwitch
	// and its own range of the macvlan network (MacvlanNetwork).
	Multus bool
	// Nodes is how many nodes (1..MaxNodes), each a network namespace on
	// the fabric.
	Nodes int
	// Network is the pod network between nodes: NetworkRouted (the
	// default: each node routes the others' pod subnets to them across
	// the fabric, no encapsulation) or NetworkFlannel (flanneld's VXLAN
	// overlay, cluster/build.sh --flannel).
	Network string
	// Log prints progress.
	Log func(format string, args ...any)
}

// Up starts the control plane and the nodes and waits until every node is
// Ready. On any failure, and when ctx ends (SIGINT), it tears down what it
// made before returning.
func Up(ctx context.Context, c Config) (err error) {
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
	if c.Nodes == 0 {
		c.Nodes = 1
	}
	if c.CPUManager == "" {
		c.CPUManager = "none"
	}
	if c.Network == "" {
		c.Network = NetworkRouted
	}
	if err := Preflight(c); err != nil {
		return err
	}
	if st, err := LoadState(c.Dir); err == nil {
		return fmt.Errorf("a cluster state is already in %s (nodes %d): run `cluster down --dir %s` first", c.Dir, len(st.Nodes), c.Dir)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", c.Dir, err)
	}
	s := &State{Dir: c.Dir, Bin: c.Bin, CPUManager: c.CPUManager, Multus: c.Multus, Network: c.Network}
	s.PodNetnsBefore, _ = podNetns()
	s.Created = MissingFixedPaths()
	defer func() {
		if err != nil {
			c.Log("cluster up failed; tearing down what it made")
			if derr := Down(context.WithoutCancel(ctx), c.Dir, c.Log); derr != nil {
				err = fmt.Errorf("%w (and the tear-down: %v)", err, derr)
			}
		}
	}()
	for i := 0; i < c.Nodes; i++ {
		s.Nodes = append(s.Nodes, NewNode(c.Dir, i))
	}
	s.APIServer = fmt.Sprintf("https://%s:%d", FabricHost, APIPort)
	if err := s.save(); err != nil {
		return err
	}
	c.Log("fabric %s (%s) and the no-egress guard %s", Fabric, FabricCIDR, GuardChain)
	if err := hostNetwork(ctx, c.Multus); err != nil {
		return err
	}
	for _, n := range s.Nodes {
		if err := nodeNetwork(ctx, n, c.Multus); err != nil {
			return err
		}
	}
	if s.Network == NetworkRouted {
		if err := nodeRoutes(ctx, s.Nodes); err != nil {
			return err
		}
	}
	pki, client, err := startControlPlane(ctx, s, c.Log)
	if err != nil {
		return err
	}
	if c.Multus {
		c.Log("Multus: the NetworkAttachmentDefinition CRD and the plugin's RBAC")
		if err := multusAPI(ctx, c.Dir, client); err != nil {
			return err
		}
	}
	if s.Network == NetworkFlannel {
		c.Log("flannel: its RBAC (user flannel)")
		if err := flannelAPI(ctx, client); err != nil {
			return err
		}
	}
	for _, n := range s.Nodes {
		if err := startNode(ctx, s, n, pki, client, c.Images, c.PauseImage, c.Log); err != nil {
			return err
		}
	}
	start := time.Now()
	for _, n := range s.Nodes {
		if err := waitFor(ctx, n.Dir, "node "+n.Name+" Ready", "kubelet", 3*time.Minute, func() error {
			return nodeReady(ctx, client, n.Name)
		}); err != nil {
			return err
		}
	}
	c.Log("nodes Ready after %.1f s; kubeconfig %s", time.Since(start).Seconds(), Kubeconfig(c.Dir))
	return ctx.Err()
}

func nodeReady(ctx context.Context, c kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nd, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cd := range nd.Status.Conditions {
		if cd.Type == corev1.NodeReady {
			if cd.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("%s: %s", cd.Reason, cd.Message)
		}
	}
	return errors.New("no Ready condition yet")
}

func pkixName(cn, org string) pkix.Name {
	n := pkix.Name{CommonName: cn}
	if org != "" {
		n.Organization = []string{org}
	}
	return n
}

// Client returns a client of the cluster in dir (admin).
func Client(dir string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(dir))
	if err != nil {
		return nil, fmt.Errorf("cannot load the cluster's kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = 50, 100, 30*time.Second
	return kubernetes.NewForConfig(cfg)
}

// startControlPlane starts etcd, kube-apiserver (on the fabric's address,
// where pods reach it through the kubernetes Service), the controller
// manager and the scheduler, on the host.
func startControlPlane(ctx context.Context, s *State, log func(string, ...any)) (*PKI, *kubernetes.Clientset, error) {
	dir, bin := s.Dir, s.Bin
	pki, err := NewPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, nil, err
	}
	ips := []net.IP{net.ParseIP(FabricHost), net.ParseIP("10.0.0.1"), net.ParseIP("127.0.0.1")}
	if err := pki.Issue("apiserver", pkix.Name{CommonName: "kube-apiserver"}, ips, APIServerNames); err != nil {
		return nil, nil, err
	}
	for _, id := range []struct{ file, cn, org string }{
		{"admin", "admin", "system:masters"},
		{"kcm", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
	} {
		name := pkix.Name{CommonName: id.cn}
		if id.org != "" {
			name.Organization = []string{id.org}
		}
		if err := pki.Issue(id.file, name, nil, nil); err != nil {
			return nil, nil, err
		}
	}
	etcdPort, peerPort, err := freePorts()
	if err != nil {
		return nil, nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	log("starting etcd, kube-apiserver (%s), kube-controller-manager, kube-scheduler", s.APIServer)
	if err := start(dir, "etcd", "", filepath.Join(bin, "etcd"), EtcdArgs("chf-testbed", filepath.Join(dir, "etcd"), etcdURL, peerURL)...); err != nil {
		return nil, nil, err
	}
	if err := waitFor(ctx, dir, "etcd", "etcd", 30*time.Second, func() error { return EtcdHealthy(etcdURL) }); err != nil {
		return nil, nil, err
	}
	if err := start(dir, "kube-apiserver", "", filepath.Join(bin, "kube-apiserver"),
		"--bind-address="+FabricHost, "--advertise-address="+FabricHost, "--secure-port="+strconv.Itoa(APIPort),
		"--etcd-servers="+etcdURL,
		"--tls-cert-file="+pki.File("apiserver.crt"), "--tls-private-key-file="+pki.File("apiserver.key"),
		"--client-ca-file="+pki.File("ca.crt"),
		"--kubelet-client-certificate="+pki.File("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+pki.File("apiserver-kubelet-client.key"),
		// the node's address, never its name: a name would be looked up
		// in the host's resolver, off this machine
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki.File("sa.pub"), "--service-account-signing-key-file="+pki.File("sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR, "--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction", "--allow-privileged=true", "--v=0"); err != nil {
		return nil, nil, err
	}
	if _, err := pki.Kubeconfig("admin", s.APIServer); err != nil {
		return nil, nil, err
	}
	client, err := Client(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := waitFor(ctx, dir, "kube-apiserver /readyz", "kube-apiserver", 2*time.Minute, func() error {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := client.RESTClient().Get().AbsPath("/readyz").DoRaw(c)
		return err
	}); err != nil {
		return nil, nil, err
	}
	kcm, err := pki.Kubeconfig("kcm", s.APIServer)
	if err != nil {
		return nil, nil, err
	}
	if err := start(dir, "kube-controller-manager", "", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+kcm, "--bind-address=127.0.0.1", "--secure-port=0",
		"--service-account-private-key-file="+pki.File("sa.key"), "--root-ca-file="+pki.File("ca.crt"),
		"--use-service-account-credentials=true", "--service-cluster-ip-range="+ServiceCIDR,
		"--leader-elect=false", "--v=0"); err != nil {
		return nil, nil, err
	}
	sch, err := pki.Kubeconfig("scheduler", s.APIServer)
	if err != nil {
		return nil, nil, err
	}
	if err := start(dir, "kube-scheduler", "", filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+sch, "--authentication-kubeconfig="+sch, "--authorization-kubeconfig="+sch,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false", "--v=0"); err != nil {
		return nil, nil, err
	}
	// The default ServiceAccount proves the controllers run (pods need it).
	if err := waitFor(ctx, dir, "kube-controller-manager (default ServiceAccount)", "kube-controller-manager", 2*time.Minute, func() error {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := client.CoreV1().ServiceAccounts("default").Get(c, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, nil, err
	}
	return pki, client, nil
}

func freePorts() (int, int, error) {
	p, err := FreePorts(2)
	if err != nil {
		return 0, 0, err
	}
	return p[0], p[1], nil
}

// FreePorts finds n loopback ports free now, below the kernel's ephemeral
// range (ip_local_port_range, 32768 and up by default): a port taken from
// that range and released can be handed to any process's outgoing
// connection before the server it was found for binds it, which on a busy
// machine made etcd exit at start.
func FreePorts(n int) ([]int, error) {
	lo := 20000 + os.Getpid()%8000 // apart from another process's search
	var out []int
	for p := lo; p < 32768 && len(out) < n; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		out = append(out, p)
	}
	if len(out) < n {
		return nil, fmt.Errorf("cannot find %d free ports in %d..32767", n, lo)
	}
	return out, nil
}

// Preflight checks, before anything is made, what a node needs: root,
// Linux with network namespaces, bridge netfilter, the binaries, the
// fabric's names free. Each failure says what to do.
func Preflight(c Config) error {
	var errs []string
	if os.Geteuid() != 0 {
		errs = append(errs, "not root: a node needs root (network namespaces, mounts, cgroups)")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(c.Bin, b)); err != nil {
			errs = append(errs, fmt.Sprintf("no %s in %s (run cluster/build.sh)", b, c.Bin))
		}
	}
	for _, b := range []string{"containerd", "runc", "ctr", "nsenter", "ip", "iptables"} {
		if _, err := exec.LookPath(b); err != nil {
			errs = append(errs, fmt.Sprintf("no %s on PATH (apt-get install containerd runc iptables iproute2 util-linux)", b))
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(DebianCNI, p)); err != nil {
			errs = append(errs, fmt.Sprintf("no CNI plugin %s in %s (apt-get install containernetworking-plugins)", p, DebianCNI))
		}
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		errs = append(errs, "no bridge netfilter (/proc/sys/net/bridge): load br_netfilter (modprobe br_netfilter)")
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		errs = append(errs, "no /sys/fs/cgroup (cgroup v1 or v2 must be mounted)")
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "overlay") {
		errs = append(errs, "no overlay filesystem (containerd's snapshotter): modprobe overlay")
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		errs = append(errs, "no network namespaces (/proc/self/ns/net)")
	}
	for _, img := range c.Images {
		if _, err := os.Stat(img); err != nil {
			errs = append(errs, fmt.Sprintf("no image archive %s (run `make images`)", img))
		}
	}
	if c.Multus {
		if _, err := os.Stat(filepath.Join(c.Bin, "multus")); err != nil {
			errs = append(errs, fmt.Sprintf("no multus in %s (cluster/build.sh --multus)", c.Bin))
		}
	}
	switch c.Network {
	case NetworkRouted, "":
	case NetworkFlannel:
		if _, err := os.Stat(filepath.Join(c.Bin, "flanneld")); err != nil {
			errs = append(errs, fmt.Sprintf("no flanneld in %s (cluster/build.sh --flannel)", c.Bin))
		}
		if c.Multus {
			errs = append(errs, "--multus with --network flannel: Multus's cluster network is the routed bridge here (not wired to flannel's subnet.env)")
		}
	default:
		errs = append(errs, fmt.Sprintf("--network must be %s or %s, got %q", NetworkRouted, NetworkFlannel, c.Network))
	}
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		errs = append(errs, fmt.Sprintf("--nodes must be 1..%d, got %d", MaxNodes, c.Nodes))
	}
	if c.CPUManager != "none" && c.CPUManager != "static" {
		errs = append(errs, fmt.Sprintf("--cpu-manager must be none or static, got %q", c.CPUManager))
	}
	for _, l := range []string{Fabric, SriovSwitch} {
		if _, err := net.InterfaceByName(l); err == nil {
			errs = append(errs, fmt.Sprintf("the link %s already exists: a cluster is up or was not torn down (cluster down)", l))
		}
	}
	if out, err := exec.Command("iptables", "-w", "-S").Output(); err == nil && strings.Contains(string(out), "KUBE-") {
		// someone's kube-proxy or kubelet runs in the host's namespace:
		// ours keep theirs in the nodes' namespaces, but say it.
		c.Log("note: the host has KUBE-* iptables chains (another Kubernetes?); the nodes' rules stay in their own namespaces")
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot start a node here:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// CgroupVersion says which cgroup hierarchy the host has (v1 hybrid, v2).
func CgroupVersion() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "v2"
	}
	return "v1"
}

// EtcdArgs are the flags of a one-member etcd named name, its data in
// dataDir, serving clients at clientURL and its peer at peerURL.
func EtcdArgs(name, dataDir, clientURL, peerURL string) []string {
	return []string{"--name=" + name, "--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + name + "=" + peerURL, "--log-level=warn"}
}

// EtcdHealthy asks etcd at clientURL for its /health.
func EtcdHealthy(clientURL string) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(clientURL + "/health")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd /health: status %d", resp.StatusCode)
	}
	return nil
}
