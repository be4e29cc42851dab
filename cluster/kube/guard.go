package kube

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Probe is an address outside every network of the cluster and of this
// machine (TEST-NET-3, RFC 5737): `ip route get` asks where a packet to it
// would go, and nothing is ever sent to it.
const Probe = "203.0.113.1"

// GuardCheck is what CheckGuard found: how a packet to the outside, and
// to a Service address with no rule, would be routed from a pod; whether
// the host's guard is in place; and what it has dropped.
type GuardCheck struct {
	PodNetns     string `json:"podNetns"`     // the pod namespace asked
	PodRoute     string `json:"podRoute"`     // ip route get Probe, in the pod
	NodeRoute    string `json:"nodeRoute"`    // the node, for a packet from the pod
	ServiceRoute string `json:"serviceRoute"` // the node, to an unused Service address
	GuardFirst   bool   `json:"guardFirst"`   // FORWARD jumps to the guard first
	Drops        int64  `json:"drops"`        // packets the guard dropped
}

// CheckGuard asks, without sending anything, where a pod's packets to the
// outside would go: the pod's own route leads to its node, and the node has
// no route beyond the fabric (and a Service address that kube-proxy has no
// rule for is routed back onto the pods' bridge); the host's FORWARD guard is the first
// rule and reports what it dropped. podIP is a running pod's address on
// node n. It fails when any of that does not hold.
func CheckGuard(ctx context.Context, s *State, n NodeState, podIP string) (*GuardCheck, error) {
	g := &GuardCheck{}
	ns, err := PodNetns(ctx, s, podIP)
	if err != nil {
		return g, err
	}
	g.PodNetns = ns
	out, err := run(ctx, "ip", "-n", ns, "route", "get", Probe)
	g.PodRoute = strings.TrimSpace(out)
	if err != nil || !strings.Contains(out, "via "+n.Gateway()) {
		return g, fmt.Errorf("a pod's packet to %s is not routed to its node (%s): %q %v", Probe, n.Gateway(), out, err)
	}
	out, err = run(ctx, "ip", "-n", n.Netns, "route", "get", Probe, "from", podIP, "iif", "cni0")
	g.NodeRoute = strings.TrimSpace(out)
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		return g, fmt.Errorf("node %s routes a pod's packet to %s: %q %v", n.Name, Probe, out, err)
	}
	g.NodeRoute = "unreachable"
	// A Service address that kube-proxy has no rule for goes back onto
	// the pods' bridge, inside the node, not to the fabric.
	out, err = run(ctx, "ip", "-n", n.Netns, "route", "get", "10.0.0.250", "from", podIP, "iif", "cni0")
	g.ServiceRoute = strings.TrimSpace(out)
	if err != nil || !strings.Contains(out, "dev cni0") || strings.Contains(out, "dev eth0") {
		return g, fmt.Errorf("node %s routes a packet to an unused Service address out of the node: %q %v", n.Name, out, err)
	}
	out, err = run(ctx, "iptables", "-w", "-S", "FORWARD")
	if err != nil {
		return g, err
	}
	rules := strings.Split(strings.TrimSpace(out), "\n")
	g.GuardFirst = len(rules) >= 3 && strings.Contains(rules[1], "-j "+GuardChain) && strings.Contains(rules[2], "-j "+GuardChain)
	if !g.GuardFirst {
		return g, fmt.Errorf("the host's FORWARD chain does not start with the guard:\n%s", out)
	}
	if g.Drops, err = GuardDrops(ctx); err != nil {
		return g, err
	}
	return g, nil
}

// PodNetns finds the network namespace (under /run/netns) holding podIP.
func PodNetns(ctx context.Context, s *State, podIP string) (string, error) {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, "cni-") || slices.Contains(s.PodNetnsBefore, n) {
			continue
		}
		if out, err := run(ctx, "ip", "-n", n, "-4", "-o", "addr", "show"); err == nil && strings.Contains(out, " "+podIP+"/") {
			return n, nil
		}
	}
	return "", fmt.Errorf("no pod network namespace holds %s", podIP)
}

// PodConnections counts the established TCP connections, in the network
// namespace of the pod with address podIP, to the address dst.
func PodConnections(ctx context.Context, s *State, podIP, dst string) (int, error) {
	ns, err := PodNetns(ctx, s, podIP)
	if err != nil {
		return 0, err
	}
	out, err := run(ctx, "ip", "netns", "exec", ns, "ss", "-tnH", "state", "established", "dst", dst)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n, nil
}
