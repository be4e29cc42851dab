package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Models lists every network model in the order the report shows them.
var Models = []string{"host", "baremetal", "bridge", "calico-noencap", "calico-vxlan", "calico-ipip", "sriov"}

// ErrUnavailable is wrapped when this kernel cannot build a model (no
// ipip module for calico-ipip).
var ErrUnavailable = errors.New("lab: not available on this kernel")

// Describe says what each model emulates; every place that shows a model
// shows this with it.
var Describe = map[string]string{
	"host":           "emulation: every process on one loopback (in a namespace of its own): the floor, no network at all",
	"baremetal":      "emulation: node namespaces on one L2 fabric (veth pairs into a bridge), workloads in the node namespaces (hostNetwork)",
	"bridge":         "emulation: pod veths into a per-node Linux bridge (bridge CNI / docker0), pod subnets routed between nodes without NAT",
	"calico-noencap": "emulation: Calico without encapsulation: routed /32 pod veths, proxy ARP for 169.254.1.1, pod subnets routed between nodes (as BGP would)",
	"calico-vxlan":   "emulation: Calico VXLAN: as calico-noencap, pod traffic between nodes in VXLAN (VNI 4096, static FDB), pod MTU lowered by 50",
	"calico-ipip":    "emulation: Calico IP-in-IP: as calico-noencap, pod traffic between nodes in an IP-in-IP tunnel per peer, pod MTU lowered by 20",
	"sriov":          "emulation: SR-IOV VF stood in for by a macvlan child of the node uplink in each pod (the nearest kernel analogue of a VF: the pod bypasses the node's IP stack); not a real VF, no NIC offloads",
}

// Roles are the processes the lab places; Nodes says on which node each
// runs. The reference deployment: aslite and abm on one node, ocp and the
// cgw on the other, the client beside the store, so that client → cgw and
// ocp → abm cross the fabric.
var (
	Roles = []string{"cgw", "ocp", "aslite", "abm", "loadgen"}
	Nodes = map[string]int{"cgw": 1, "ocp": 1, "aslite": 2, "abm": 2, "loadgen": 2}
	// pods numbers each role's pod on its node.
	pods = map[string]int{"cgw": 1, "ocp": 2, "aslite": 1, "abm": 2, "loadgen": 3}
	// Ports of the services (one address per pod, or per node in
	// host and baremetal, so they differ).
	Ports = map[string]int{"aslite": 3000, "ocp": 8081, "abm": 8082, "cgw": 8080}
)

// Port numbers of the network probes, served next to the cgw.
const (
	iperfPort = 5201
	probePort = 7007
	nodes     = 2
)

// Place is where one role runs: its network namespace and address.
type Place struct {
	NS   string `json:"ns"`
	Addr string `json:"addr"`
}

// HostPort is the role's address with port.
func (p Place) HostPort(port int) string { return p.Addr + ":" + strconv.Itoa(port) }

// Topology is a built model.
type Topology struct {
	Model  string
	Places map[string]Place
	// Nodes are the node namespaces (empty for host).
	Nodes []string
	// Fabric is the fabric namespace and Legs its port towards each node
	// (where the shaping experiment puts its tbf: a bottleneck in the
	// switch, not in the sender's own qdisc).
	Fabric string
	Legs   []string
}

// builder creates namespaces under prefix and records them so that
// teardown removes exactly those.
type builder struct {
	prefix string
	mtu    int
	made   []string
}

func (b *builder) ns(name string) string { return b.prefix + name }

// run executes one command and returns its error with its output.
func run(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cannot run %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// ip runs `ip -n NS args...` (NS empty: the host's namespace).
func (b *builder) ip(ctx context.Context, ns string, args ...string) error {
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	return run(ctx, "ip", args...)
}

func (b *builder) sysctl(ctx context.Context, ns, kv string) error {
	return run(ctx, "ip", "netns", "exec", ns, "sysctl", "-qw", kv)
}

func (b *builder) newNS(ctx context.Context, name string) (string, error) {
	ns := b.ns(name)
	if err := run(ctx, "ip", "netns", "add", ns); err != nil {
		return "", err
	}
	b.made = append(b.made, ns)
	return ns, b.ip(ctx, ns, "link", "set", "lo", "up")
}

// steps runs each command in order, stopping at the first error.
func (b *builder) steps(ctx context.Context, ns string, cmds ...[]string) error {
	for _, c := range cmds {
		if err := b.ip(ctx, ns, c...); err != nil {
			return err
		}
	}
	return nil
}

func nodeAddr(i int) string { return "10.77.0." + strconv.Itoa(i) }

// podAddr is the address of pod j on node i in the routed models.
func podAddr(i, j int) string { return fmt.Sprintf("10.78.%d.%d", i, j+1) }

// fabric builds the shared L2 segment and the node namespaces on it.
func (b *builder) fabric(ctx context.Context, t *Topology) error {
	fab, err := b.newNS(ctx, "fab")
	if err != nil {
		return err
	}
	t.Fabric = fab
	m := strconv.Itoa(b.mtu)
	if err := b.steps(ctx, fab, []string{"link", "add", "br0", "type", "bridge"}, []string{"link", "set", "br0", "mtu", m, "up"}); err != nil {
		return err
	}
	for i := 1; i <= nodes; i++ {
		n, err := b.newNS(ctx, "n"+strconv.Itoa(i))
		if err != nil {
			return err
		}
		leg := "n" + strconv.Itoa(i)
		// Both ends of the pair at the fabric MTU: the node's eth0 too.
		if err := b.steps(ctx, fab,
			[]string{"link", "add", leg, "mtu", m, "type", "veth", "peer", "name", "eth0", "netns", n},
			[]string{"link", "set", leg, "master", "br0", "up"}); err != nil {
			return err
		}
		if err := b.steps(ctx, n,
			[]string{"link", "set", "eth0", "mtu", m},
			[]string{"addr", "add", nodeAddr(i) + "/24", "dev", "eth0"},
			[]string{"link", "set", "eth0", "up"}); err != nil {
			return err
		}
		if err := b.sysctl(ctx, n, "net.ipv4.ip_forward=1"); err != nil {
			return err
		}
		t.Nodes = append(t.Nodes, n)
		t.Legs = append(t.Legs, leg)
	}
	return nil
}

// calicoPods gives each role a pod behind a veth, Calico style: a /32
// address, a default route to 169.254.1.1 answered by proxy ARP (without
// proxy_delay, so the first packets do not wait), pod MTU = fabric MTU -
// overhead of the encapsulation.
func (b *builder) calicoPods(ctx context.Context, t *Topology, overhead int) error {
	m := strconv.Itoa(b.mtu - overhead)
	for i := 1; i <= nodes; i++ {
		node := b.ns("n" + strconv.Itoa(i))
		// Proxy ARP answers for the link-local gateway only if the node
		// routes it through another interface (a real node's default
		// route plays that part).
		if err := b.ip(ctx, node, "route", "add", "169.254.1.1/32", "dev", "eth0"); err != nil {
			return err
		}
		for _, role := range Roles {
			if Nodes[role] != i {
				continue
			}
			j := pods[role]
			pod, err := b.newNS(ctx, fmt.Sprintf("n%dp%d", i, j))
			if err != nil {
				return err
			}
			cali := "cali" + strconv.Itoa(j)
			addr := podAddr(i, j)
			if err := b.steps(ctx, node,
				[]string{"link", "add", cali, "mtu", m, "type", "veth", "peer", "name", "eth0", "netns", pod},
				[]string{"link", "set", cali, "up"}); err != nil {
				return err
			}
			for _, kv := range []string{"net.ipv4.conf." + cali + ".proxy_arp=1", "net.ipv4.neigh." + cali + ".proxy_delay=0"} {
				if err := b.sysctl(ctx, node, kv); err != nil {
					return err
				}
			}
			if err := b.ip(ctx, node, "route", "add", addr+"/32", "dev", cali); err != nil {
				return err
			}
			if err := b.steps(ctx, pod,
				[]string{"link", "set", "eth0", "mtu", m},
				[]string{"addr", "add", addr + "/32", "dev", "eth0"},
				[]string{"link", "set", "eth0", "up"},
				[]string{"route", "add", "169.254.1.1", "dev", "eth0"},
				[]string{"route", "add", "default", "via", "169.254.1.1", "dev", "eth0"}); err != nil {
				return err
			}
			t.Places[role] = Place{NS: pod, Addr: addr}
		}
	}
	return nil
}

// routes sends node k's pod subnet 10.78.k.0/24 straight over the fabric.
func (b *builder) routes(ctx context.Context) error {
	for i := 1; i <= nodes; i++ {
		for k := 1; k <= nodes; k++ {
			if k == i {
				continue
			}
			if err := b.ip(ctx, b.ns("n"+strconv.Itoa(i)), "route", "add", fmt.Sprintf("10.78.%d.0/24", k), "via", nodeAddr(k), "dev", "eth0"); err != nil {
				return err
			}
		}
	}
	return nil
}

// ipipRoutes sends node k's pod subnet through an IP-in-IP tunnel per peer.
func (b *builder) ipipRoutes(ctx context.Context) error {
	for i := 1; i <= nodes; i++ {
		n := b.ns("n" + strconv.Itoa(i))
		for k := 1; k <= nodes; k++ {
			if k == i {
				continue
			}
			dev := "ipip" + strconv.Itoa(k)
			if err := b.steps(ctx, n,
				[]string{"link", "add", dev, "type", "ipip", "local", nodeAddr(i), "remote", nodeAddr(k)},
				[]string{"link", "set", dev, "mtu", strconv.Itoa(b.mtu - 20), "up"},
				[]string{"route", "add", fmt.Sprintf("10.78.%d.0/24", k), "dev", dev}); err != nil {
				return err
			}
		}
	}
	return nil
}

// vxlanRoutes gives each node a VXLAN device (VNI 4096, as Calico's
// vxlan.calico) at fabric MTU - 50, and routes node k's pod subnet via its
// VTEP with static neighbour and FDB entries, as Calico programs them.
func (b *builder) vxlanRoutes(ctx context.Context) error {
	macs := map[int]string{}
	for i := 1; i <= nodes; i++ {
		n := b.ns("n" + strconv.Itoa(i))
		if err := b.steps(ctx, n,
			[]string{"link", "add", "vxlan0", "type", "vxlan", "id", "4096", "dev", "eth0", "local", nodeAddr(i), "dstport", "4789", "nolearning"},
			[]string{"link", "set", "vxlan0", "mtu", strconv.Itoa(b.mtu - 50)},
			[]string{"addr", "add", fmt.Sprintf("10.79.0.%d/24", i), "dev", "vxlan0"},
			[]string{"link", "set", "vxlan0", "up"}); err != nil {
			return err
		}
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", n, "cat", "/sys/class/net/vxlan0/address").Output()
		if err != nil {
			return fmt.Errorf("cannot read the MAC of vxlan0 in %s: %w", n, err)
		}
		macs[i] = strings.TrimSpace(string(out))
	}
	for i := 1; i <= nodes; i++ {
		n := b.ns("n" + strconv.Itoa(i))
		for k := 1; k <= nodes; k++ {
			if k == i {
				continue
			}
			vtep := fmt.Sprintf("10.79.0.%d", k)
			if err := b.steps(ctx, n,
				[]string{"neigh", "add", vtep, "lladdr", macs[k], "dev", "vxlan0", "nud", "permanent"},
				[]string{"route", "add", fmt.Sprintf("10.78.%d.0/24", k), "via", vtep, "dev", "vxlan0", "onlink"}); err != nil {
				return err
			}
			if err := run(ctx, "ip", "netns", "exec", n, "bridge", "fdb", "append", macs[k], "dev", "vxlan0", "dst", nodeAddr(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// bridgePods puts each pod's veth into a bridge per node that holds the
// node's pod gateway 10.78.i.1; pods have /24 addresses.
func (b *builder) bridgePods(ctx context.Context, t *Topology) error {
	m := strconv.Itoa(b.mtu)
	for i := 1; i <= nodes; i++ {
		node := b.ns("n" + strconv.Itoa(i))
		gw := fmt.Sprintf("10.78.%d.1", i)
		if err := b.steps(ctx, node,
			[]string{"link", "add", "cni0", "type", "bridge"},
			[]string{"link", "set", "cni0", "mtu", m, "up"},
			[]string{"addr", "add", gw + "/24", "dev", "cni0"}); err != nil {
			return err
		}
		for _, role := range Roles {
			if Nodes[role] != i {
				continue
			}
			j := pods[role]
			pod, err := b.newNS(ctx, fmt.Sprintf("n%dp%d", i, j))
			if err != nil {
				return err
			}
			veth := "veth" + strconv.Itoa(j)
			addr := podAddr(i, j)
			if err := b.steps(ctx, node,
				[]string{"link", "add", veth, "mtu", m, "type", "veth", "peer", "name", "eth0", "netns", pod},
				[]string{"link", "set", veth, "master", "cni0", "up"}); err != nil {
				return err
			}
			if err := b.steps(ctx, pod,
				[]string{"link", "set", "eth0", "mtu", m},
				[]string{"addr", "add", addr + "/24", "dev", "eth0"},
				[]string{"link", "set", "eth0", "up"},
				[]string{"route", "add", "default", "via", gw}); err != nil {
				return err
			}
			t.Places[role] = Place{NS: pod, Addr: addr}
		}
	}
	return nil
}

// macvlanPods gives each pod a macvlan child (bridge mode) of its node's
// uplink, on the fabric's segment, as a VF of the node's NIC. A macvlan
// parent cannot talk to its own children, whereas a PF reaches its VFs
// through the NIC's switch: the node's address moves to a macvlan child
// (mv0) of its own, so the node reaches its pods as on real SR-IOV.
func (b *builder) macvlanPods(ctx context.Context, t *Topology) error {
	for i := 1; i <= nodes; i++ {
		node := b.ns("n" + strconv.Itoa(i))
		if err := b.steps(ctx, node,
			[]string{"addr", "del", nodeAddr(i) + "/24", "dev", "eth0"},
			[]string{"link", "add", "mv0", "link", "eth0", "type", "macvlan", "mode", "bridge"},
			[]string{"addr", "add", nodeAddr(i) + "/24", "dev", "mv0"},
			[]string{"link", "set", "mv0", "up"}); err != nil {
			return err
		}
		for _, role := range Roles {
			if Nodes[role] != i {
				continue
			}
			j := pods[role]
			pod, err := b.newNS(ctx, fmt.Sprintf("n%dp%d", i, j))
			if err != nil {
				return err
			}
			vf := "vf" + strconv.Itoa(j)
			addr := fmt.Sprintf("10.77.0.%d", 100+10*i+j)
			if err := b.steps(ctx, node,
				[]string{"link", "add", vf, "link", "eth0", "type", "macvlan", "mode", "bridge"},
				[]string{"link", "set", vf, "netns", pod}); err != nil {
				return err
			}
			if err := b.steps(ctx, pod,
				[]string{"link", "set", vf, "name", "net1"},
				[]string{"addr", "add", addr + "/24", "dev", "net1"},
				[]string{"link", "set", "net1", "up"}); err != nil {
				return err
			}
			t.Places[role] = Place{NS: pod, Addr: addr}
		}
	}
	return nil
}

// nodePlaces puts every role in its node's namespace (hostNetwork).
func (b *builder) nodePlaces(t *Topology) {
	for _, role := range Roles {
		i := Nodes[role]
		t.Places[role] = Place{NS: b.ns("n" + strconv.Itoa(i)), Addr: nodeAddr(i)}
	}
}

// Build creates model under prefix. On error the namespaces it made are
// still returned by the builder's made list for the caller to remove.
func (b *builder) build(ctx context.Context, model string) (*Topology, error) {
	t := &Topology{Model: model, Places: map[string]Place{}}
	switch model {
	case "host":
		ns, err := b.newNS(ctx, "host")
		if err != nil {
			return nil, err
		}
		for _, role := range Roles {
			t.Places[role] = Place{NS: ns, Addr: "127.0.0.1"}
		}
		return t, nil
	case "calico-ipip":
		if !HasIPIP(ctx) {
			return nil, fmt.Errorf("%w: calico-ipip needs the ipip module", ErrUnavailable)
		}
	}
	// Every other model is the node fabric, then its pods, then the routes
	// between nodes (the pod MTU lowered by the encapsulation's overhead).
	pods := func(mtuLess int) func(context.Context) error {
		return func(ctx context.Context) error { return b.calicoPods(ctx, t, mtuLess) }
	}
	var steps []func(context.Context) error
	switch model {
	case "baremetal":
		steps = []func(context.Context) error{func(context.Context) error { b.nodePlaces(t); return nil }}
	case "bridge":
		steps = []func(context.Context) error{func(ctx context.Context) error { return b.bridgePods(ctx, t) }, b.routes}
	case "calico-noencap":
		steps = []func(context.Context) error{pods(0), b.routes}
	case "calico-vxlan":
		steps = []func(context.Context) error{pods(50), b.vxlanRoutes}
	case "calico-ipip":
		steps = []func(context.Context) error{pods(20), b.ipipRoutes}
	case "sriov":
		steps = []func(context.Context) error{func(ctx context.Context) error { return b.macvlanPods(ctx, t) }}
	default:
		return nil, fmt.Errorf("BUG: unknown model %q", model)
	}
	if err := b.fabric(ctx, t); err != nil {
		return nil, err
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// HasIPIP reports whether this kernel can create an IP-in-IP device (tried
// in a scratch namespace, which is removed).
func HasIPIP(ctx context.Context) bool {
	ns := fmt.Sprintf("chflab-ipip-probe-%d", pid)
	if run(ctx, "ip", "netns", "add", ns) != nil {
		return false
	}
	defer run(context.WithoutCancel(ctx), "ip", "netns", "del", ns)
	return run(ctx, "ip", "-n", ns, "link", "add", "t0", "type", "ipip", "local", "10.0.0.1", "remote", "10.0.0.2") == nil
}

// removeNamespaces deletes every namespace whose name starts with prefix
// (all their interfaces, routes and tunnels go with them).
func removeNamespaces(prefix string) error {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("cannot list namespaces: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		if err := run(context.Background(), "ip", "netns", "del", f[0]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeStale deletes the namespaces of labs whose process is gone
// (chfl<pid>-…, the process no longer a loadgen): the children die with
// their lab (Pdeathsig), the namespaces of a SIGKILLed lab stay.
func removeStale() error {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("cannot list namespaces: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		rest, ok := strings.CutPrefix(f[0], "chfl")
		num, _, ok2 := strings.Cut(rest, "-")
		owner, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || owner == pid {
			continue
		}
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", owner)); err == nil && strings.TrimSpace(string(comm)) == "loadgen" {
			continue // a lab still running
		}
		if err := run(context.Background(), "ip", "netns", "del", f[0]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
