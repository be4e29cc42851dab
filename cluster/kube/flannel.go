package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The pod networks between nodes (Config.Network).
const (
	// NetworkRouted: each node routes the others' pod subnets to them
	// across the fabric, the pods' own addresses on the wire (a CNI
	// without encapsulation, Calico's BGP mode).
	NetworkRouted = "routed"
	// NetworkFlannel: flannel's daemon (flanneld, VXLAN backend) on each
	// node encapsulates pod-to-pod traffic between nodes, as Calico's
	// VXLAN mode does; the bridge plugin on each node is fed from the
	// subnet.env flannel writes (its own CNI plugin is not served here).
	NetworkFlannel = "flannel"
)

// flannelMTU is what the pods' MTU must be when flannel has not said: the
// fabric's 1500 less VXLAN's 50 bytes.
const flannelMTU = 1450

func flannelDir(n NodeState) string { return filepath.Join(n.Dir, "flannel") }

// flannelAPI gives flannel's identity (user flannel) what kube-flannel.yml
// gives its ServiceAccount: read pods and nodes, patch the nodes' status.
func flannelAPI(ctx context.Context, c kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "flannel"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	}}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create flannel's ClusterRole: %w", err)
	}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flannel"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "flannel"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "flannel"}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, bind, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create flannel's ClusterRoleBinding: %w", err)
	}
	return nil
}

// startFlannel starts flanneld in node n once the kubelet has registered
// it: the Node's spec.podCIDR set to the node's subnet (what the
// controller manager's --allocate-node-cidrs would do, with the subnet
// the node's files already name), flanneld started with the kube subnet
// manager and the VXLAN backend on the node's fabric link, and the pod
// network written from the subnet.env it produces. The node is NotReady
// until then, as with flannel anywhere.
func startFlannel(ctx context.Context, s *State, n NodeState, pki *PKI, c kubernetes.Interface, log func(string, ...any)) error {
	if err := waitFor(ctx, n.Dir, "node "+n.Name+" registered", "kubelet", 2*time.Minute, func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.CoreV1().Nodes().Get(cctx, n.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, n.PodCIDR, n.PodCIDR)
	if _, err := c.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cannot set node %s's pod subnet: %w", n.Name, err)
	}
	fd := flannelDir(n)
	if err := os.MkdirAll(fd, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf(`{"Network": %q, "Backend": {"Type": "vxlan"}}`+"\n", PodCIDR)
	if err := os.WriteFile(filepath.Join(fd, "net-conf.json"), []byte(conf), 0o644); err != nil {
		return err
	}
	if err := pki.Issue("flannel-"+n.Name, pkixName("flannel", ""), nil, nil); err != nil {
		return err
	}
	kc, err := pki.Kubeconfig("flannel-"+n.Name, s.APIServer)
	if err != nil {
		return err
	}
	subnetEnv := filepath.Join(fd, "subnet.env")
	log("%s: starting flanneld (VXLAN on eth0)", n.Name)
	// env sets the node's name (flannel reads NODE_NAME) and execs
	// flanneld under the same pid.
	if err := start(n.Dir, "flanneld", n.NetnsPath(), "env", "NODE_NAME="+n.Name, filepath.Join(s.Bin, "flanneld"),
		"--kube-subnet-mgr", "--kubeconfig-file="+kc, "--iface=eth0", "--ip-masq=false",
		"--subnet-file="+subnetEnv, "--net-config-path="+filepath.Join(fd, "net-conf.json")); err != nil {
		return err
	}
	var env map[string]string
	if err := waitFor(ctx, n.Dir, "flanneld's "+subnetEnv, "flanneld", time.Minute, func() error {
		b, err := os.ReadFile(subnetEnv)
		if err != nil {
			return err
		}
		env = parseEnv(string(b))
		if env["FLANNEL_SUBNET"] == "" {
			return fmt.Errorf("no FLANNEL_SUBNET in %s yet", subnetEnv)
		}
		return nil
	}); err != nil {
		return err
	}
	if want := n.Gateway() + "/24"; env["FLANNEL_SUBNET"] != want {
		return fmt.Errorf("flanneld leased %s to node %s, want %s (its spec.podCIDR)", env["FLANNEL_SUBNET"], n.Name, want)
	}
	mtu, err := strconv.Atoi(env["FLANNEL_MTU"])
	if err != nil || mtu < 576 {
		mtu = flannelMTU
	}
	log("%s: flannel leased %s, MTU %d", n.Name, env["FLANNEL_SUBNET"], mtu)
	return os.WriteFile(filepath.Join(n.Dir, "cni", "net.d", "10-chf-pods.conflist"), []byte(bridgeConf(n, true, mtu)), 0o644)
}

// parseEnv reads KEY=value lines (flannel's subnet.env).
func parseEnv(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			m[k] = v
		}
	}
	return m
}

// FlannelLink is the VXLAN device flanneld makes in each node.
const FlannelLink = "flannel.1"

// LinkTxBytes is the bytes link in node n has sent (its statistics).
func LinkTxBytes(ctx context.Context, n NodeState, link string) (uint64, error) {
	out, err := run(ctx, "ip", "-n", n.Netns, "-j", "-s", "link", "show", link)
	if err != nil {
		return 0, err
	}
	var ls []struct {
		Stats struct {
			TX struct {
				Bytes uint64 `json:"bytes"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 1 {
		return 0, fmt.Errorf("cannot read %s's statistics in %s: %v", link, n.Name, err)
	}
	return ls[0].Stats.TX.Bytes, nil
}
