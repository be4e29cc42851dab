package kube

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// NADCRD is the NetworkAttachmentDefinition CRD (k8s.cni.cncf.io/v1), as
// Multus v4.2.2's deployments/multus-daemonset.yml has it.
//
//go:embed nad-crd.yaml
var NADCRD string

// MacvlanMaster is each node's uplink for Multus's macvlan attachments
// (SR-IOV's stand-in): the node's end of a veth pair whose other end is on
// the host's SriovSwitch, so that a pod's net1 reaches the net1 of pods on
// other nodes, as VFs of NICs on one switch do.
const MacvlanMaster = "chfmv0"

// MacvlanNetwork is the attachment's name: the chart's NetworkAttachment
// Definition (network.multus.name) carries no config on a small node
// (charts/chf/values-small-pinned.yaml), so Multus reads the node's own
// file of that name, which gives the node its range of SriovCIDR.
const MacvlanNetwork = "sriov-chf"

// macvlanConf is node n's configuration of MacvlanNetwork: a macvlan in
// bridge mode on the node's uplink, host-local IPAM over SriovCIDR handing
// out only the node's range, kept in the node's directory, no gateway (the
// segment reaches nothing else).
func macvlanConf(n NodeState) string {
	first, last := n.MacvlanRange()
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "type": "macvlan",
  "master": %q,
  "mode": "bridge",
  "ipam": {
    "type": "host-local",
    "ranges": [[{"subnet": %q, "rangeStart": %q, "rangeEnd": %q}]],
    "dataDir": %q
  }
}
`, MacvlanNetwork, MacvlanMaster, SriovCIDR, first, last, filepath.Join(n.Dir, "cni", "ipam"))
}

// multusFiles makes the node's CNI configuration Multus's: the thin
// plugin as the only network containerd loads, the bridge network as its
// cluster network (outside containerd's conf_dir), its own identity.
func multusFiles(n NodeState, s *State, pki *PKI) error {
	bin := filepath.Join(s.Bin, "multus")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no multus in %s (cluster/build.sh --multus)", s.Bin)
	}
	dst := filepath.Join(cniBinDir(n), "multus")
	_ = os.Remove(dst)
	if err := os.Symlink(bin, dst); err != nil {
		return fmt.Errorf("cannot link multus: %w", err)
	}
	md := filepath.Join(n.Dir, "cni", "multus.d")
	if err := os.MkdirAll(md, 0o755); err != nil {
		return err
	}
	if err := pki.Issue("multus-"+n.Name, pkixName("multus", ""), nil, nil); err != nil {
		return err
	}
	kc, err := pki.Kubeconfig("multus-"+n.Name, s.APIServer)
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "multus-cni-network",
  "plugins": [
    {
      "type": "multus",
      "kubeconfig": %q,
      "clusterNetwork": %q,
      "confDir": %q,
      "cniDir": %q,
      "binDir": %q,
      "multusNamespace": "kube-system",
      "logFile": %q,
      "logLevel": "verbose"
    }
  ]
}
`, kc, filepath.Join(md, "10-chf-pods.conf"), md, filepath.Join(n.Dir, "cni", "multus-cache"), DebianCNI,
		filepath.Join(n.Dir, "logs", "multus.log"))
	if err := os.WriteFile(filepath.Join(md, "10-chf-pods.conf"), []byte(bridgeConf(n, false, 0)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(md, "20-"+MacvlanNetwork+".conf"), []byte(macvlanConf(n)), 0o644); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(n.Dir, "cni", "net.d", "10-chf-pods.conflist"))
	if err := os.WriteFile(filepath.Join(n.Dir, "cni", "net.d", "00-multus.conflist"), []byte(conf), 0o644); err != nil {
		return err
	}
	return nil
}

// multusAPI applies the NetworkAttachmentDefinition CRD and the RBAC the
// thin plugin uses (get pods, update pods/status, get the attachments,
// events), and waits until the CRD is served.
func multusAPI(ctx context.Context, dir string, c kubernetes.Interface) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(dir))
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(NADCRD), &obj); err != nil {
		return fmt.Errorf("cannot decode the NetworkAttachmentDefinition CRD: %w", err)
	}
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crd).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create the NetworkAttachmentDefinition CRD: %w", err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "multus"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create Multus's ClusterRole: %w", err)
	}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "multus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "multus"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "multus"}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, bind, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create Multus's ClusterRoleBinding: %w", err)
	}
	return waitFor(ctx, dir, "the NetworkAttachmentDefinition API", "", 30*time.Second, func() error {
		_, err := c.Discovery().ServerResourcesForGroupVersion("k8s.cni.cncf.io/v1")
		return err
	})
}
