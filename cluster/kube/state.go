package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
)

// The cluster's fixed addresses. The nodes and the API server meet on a
// bridge of the host's (Fabric), each node a network namespace of its
// own with one veth on it and no default route, so that no pod's packet
// can leave the machine; the API server listens on the fabric's address.
const (
	Fabric       = "chf-fabric"    // the host bridge the nodes hang on
	FabricCIDR   = "10.243.0.0/24" // the host is .1, node i is .(i+2)
	FabricHost   = "10.243.0.1"
	PodCIDR      = "10.244.0.0/16" // node i has 10.244.i.0/24
	ServiceCIDR  = "10.0.0.0/24"   // 10.0.0.1 is the kubernetes Service
	APIPort      = 6443
	GuardChain   = "CHF-TESTBED-GUARD" // the host's FORWARD guard
	CgroupParent = "chf-testbed"       // under every cgroup hierarchy
	netnsDir     = "/run/netns"
	MaxNodes     = 3 // the fabric and the pod subnets have room for more; a 2-CPU box has not
	// SriovSwitch (Multus clusters) is the host bridge, without an
	// address, that joins every node's macvlan uplink (MacvlanMaster):
	// the switch an SR-IOV NIC's VFs would meet on.
	SriovSwitch = "chf-sriov"
	// SriovCIDR is the macvlan network's subnet: one L2 segment across
	// the nodes, each node handing out its own range (MacvlanRange).
	SriovCIDR = "10.99.0.0/24"
)

// State is what `cluster up` made, in <dir>/state.json, so that `cluster
// down` (another process, after a crash or an interrupt too) undoes it.
// It is written before each step, so a failed start leaves a state that
// names everything the step may have made.
type State struct {
	Dir       string `json:"dir"`
	Bin       string `json:"bin"`
	APIServer string `json:"apiServer,omitempty"`
	// Nodes made (or being made).
	Nodes []NodeState `json:"nodes"`
	// PodNetnsBefore: the cni-* network namespaces that existed before
	// the first node started (someone else's); the others are the pods'.
	PodNetnsBefore []string `json:"podNetnsBefore"`
	// Created: fixed paths outside Dir that did not exist before and that
	// containerd, runc or the kubelet create (removed by down).
	Created []string `json:"created"`
	// CPUManager: the kubelets' CPU manager policy (none or static).
	CPUManager string `json:"cpuManager"`
	// Multus: the nodes' network is Multus over the bridge.
	Multus bool `json:"multus"`
	// Network: the pod network between nodes (NetworkRouted, NetworkFlannel).
	Network string `json:"network"`
}

// NodeState is one node: a network namespace with its containerd,
// kubelet and kube-proxy, its directory, addresses and cgroup parent.
type NodeState struct {
	Name    string `json:"name"`
	Index   int    `json:"index"`
	Dir     string `json:"dir"`
	IP      string `json:"ip"`      // on the fabric
	PodCIDR string `json:"podCIDR"` // its pods' subnet
	Netns   string `json:"netns"`   // under /run/netns
	Veth    string `json:"veth"`    // the host's end on the fabric
	Cgroup  string `json:"cgroup"`  // the kubelet's cgroup root
}

// NewNode returns node i of the cluster in dir.
func NewNode(dir string, i int) NodeState {
	name := fmt.Sprintf("node%d", i+1)
	return NodeState{
		Name: name, Index: i, Dir: filepath.Join(dir, "nodes", name),
		IP:      fmt.Sprintf("10.243.0.%d", i+2),
		PodCIDR: fmt.Sprintf("10.244.%d.0/24", i),
		Netns:   "chf-" + name, Veth: "chf-" + name,
		Cgroup: "/" + CgroupParent + "/" + name,
	}
}

// Gateway is the pods' gateway on the node (the bridge's address).
func (n NodeState) Gateway() string {
	ip, _, _ := net.ParseCIDR(n.PodCIDR)
	ip = ip.To4()
	return net.IPv4(ip[0], ip[1], ip[2], 1).String()
}

// Uplink is the host's end of the veth pair whose node end is the node's
// macvlan uplink (MacvlanMaster), on SriovSwitch.
func (n NodeState) Uplink() string { return n.Veth + "-sr" }

// MacvlanRange is the part of SriovCIDR node n's host-local IPAM hands
// out: 40 addresses from .10 + 40·index, so that no two nodes give out
// the same address on the shared segment.
func (n NodeState) MacvlanRange() (first, last string) {
	ip, _, _ := net.ParseCIDR(SriovCIDR)
	ip = ip.To4()
	lo := byte(10 + 40*n.Index)
	return net.IPv4(ip[0], ip[1], ip[2], lo).String(), net.IPv4(ip[0], ip[1], ip[2], lo+39).String()
}

// NetnsPath is the node's network namespace file.
func (n NodeState) NetnsPath() string { return filepath.Join(netnsDir, n.Netns) }

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

func (s *State) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(s.Dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("cannot write the cluster state: %w", err)
	}
	return os.Rename(tmp, statePath(s.Dir))
}

// ErrNoCluster: the directory holds no cluster state.
var ErrNoCluster = errors.New("no cluster state")

// LoadState reads the state `cluster up` left in dir.
func LoadState(dir string) (*State, error) {
	b, err := os.ReadFile(statePath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoCluster
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the cluster state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("cannot decode %s: %w", statePath(dir), err)
	}
	return &s, nil
}

// Kubeconfig is the admin kubeconfig of the cluster in dir.
func Kubeconfig(dir string) string { return filepath.Join(dir, "pki", "admin.kubeconfig") }
