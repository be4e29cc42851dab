package charts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// strictJSON decodes YAML or JSON into v, refusing unknown and duplicate
// fields.
func strictJSON(t *testing.T, what string, doc []byte, v any) {
	t.Helper()
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestDeployManifests decodes every manifest under deploy/ strictly and
// checks the values the network models depend on.
func TestDeployManifests(t *testing.T) {
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "deploy", p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	var kc kubeletCPUManagerConfig
	strictJSON(t, "kubelet-cpu-manager.yaml", read("cpu-manager/kubelet-cpu-manager.yaml"), &kc)
	if kc.Kind != "KubeletConfiguration" || kc.APIVersion != "kubelet.config.k8s.io/v1beta1" ||
		kc.CPUManagerPolicy != "static" || kc.ReservedSystemCPUs == "" ||
		kc.TopologyManagerPolicy != "single-numa-node" || kc.CPUManagerPolicyOptions["full-pcpus-only"] != "true" {
		t.Errorf("kubelet config: %+v", kc)
	}

	for file, mode := range map[string]string{"ippool-ipip-crosssubnet.yaml": "CrossSubnet", "ippool-no-encap.yaml": "Never"} {
		var p calicoIPPool
		strictJSON(t, file, read("calico/"+file), &p)
		if p.Kind != "IPPool" || p.APIVersion != "projectcalico.org/v3" || p.Spec.IPIPMode != mode || p.Spec.VXLANMode != "Never" || p.Spec.CIDR == "" {
			t.Errorf("%s: %+v", file, p)
		}
	}

	manifest := append(read("sriov/device-plugin-configmap.yaml"), []byte("\n---\n")...)
	manifest = append(manifest, read("node-tuning/daemonset.yaml")...)
	o := decodeStrict(t, manifest)
	cm := o.configMaps["sriovdp-config"]
	if cm == nil {
		t.Fatal("no sriovdp-config ConfigMap")
	}
	var dp sriovDevicePluginConfig
	strictJSON(t, "sriovdp config.json", []byte(cm.Data["config.json"]), &dp)
	if len(dp.ResourceList) != 1 || dp.ResourceList[0].ResourcePrefix+"/"+dp.ResourceList[0].ResourceName != "intel.com/sriov_chf" {
		t.Errorf("device plugin pool is not intel.com/sriov_chf (the chart's resourceName): %+v", dp)
	}

	var nad networkAttachmentDefinition
	strictJSON(t, "networkattachmentdefinition.yaml", read("sriov/networkattachmentdefinition.yaml"), &nad)
	var cni sriovCNIConfig
	strictJSON(t, "NAD config", []byte(nad.Spec.Config), &cni)
	if nad.Annotations["k8s.v1.cni.cncf.io/resourceName"] != "intel.com/sriov_chf" || cni.Type != "sriov" || cni.Name != nad.Name {
		t.Errorf("NAD example: %+v %+v", nad, cni)
	}

	// The DaemonSet embeds tune.sh: the copy must match the script.
	var ds *appsv1.DaemonSet
	var script *corev1.ConfigMap
	for _, obj := range o.all {
		if d, ok := obj.(*appsv1.DaemonSet); ok {
			ds = d
		}
	}
	script = o.configMaps["chf-node-tuning-script"]
	if ds == nil || script == nil {
		t.Fatal("node-tuning DaemonSet or script ConfigMap missing")
	}
	if want := string(read("node-tuning/tune.sh")); script.Data["tune.sh"] != want {
		t.Errorf("deploy/node-tuning/daemonset.yaml embeds a stale copy of tune.sh: copy the script into the ConfigMap")
	}
}

// runTune runs tune.sh against a fake /proc tree.
func runTune(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join("..", "deploy", "node-tuning", "tune.sh")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tune.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestNodeTuningReversible applies tune.sh twice to a fake /proc (sysctls
// and IRQ affinities), checks the tuned values, reverts, and checks that
// every original value is back and the state is gone.
func TestNodeTuningReversible(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root := t.TempDir()
	sys := filepath.Join(root, "sys")
	irq := filepath.Join(root, "irq")
	write := func(p, v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	orig := map[string]string{
		"net/core/rmem_max":                         "212992",
		"net/core/wmem_max":                         "212992",
		"net/ipv4/tcp_rmem":                         "4096\t131072\t6291456",
		"net/ipv4/tcp_wmem":                         "4096\t16384\t4194304",
		"net/ipv4/tcp_congestion_control":           "cubic",
		"net/ipv4/tcp_mtu_probing":                  "0",
		"net/ipv4/tcp_available_congestion_control": "reno cubic htcp",
	}
	for k, v := range orig {
		write(filepath.Join(sys, k), v)
	}
	write(filepath.Join(irq, "40", "smp_affinity_list"), "0-95")
	write(filepath.Join(irq, "41", "smp_affinity_list"), "0-95")
	write(filepath.Join(irq, "50", "smp_affinity_list"), "0-95")
	interrupts := filepath.Join(root, "interrupts")
	write(interrupts, "           CPU0       CPU1\n"+
		"  40:       1000          0  IR-PCI-MSI 1-edge      ens1f0-TxRx-0\n"+
		"  41:          0       1000  IR-PCI-MSI 2-edge      ens1f0-TxRx-1\n"+
		"  50:          5          5  IR-PCI-MSI 3-edge      nvme0q1")
	state := filepath.Join(root, "state")
	env := []string{"PROC_SYS=" + sys, "PROC_IRQ=" + irq, "PROC_INTERRUPTS=" + interrupts, "STATE_DIR=" + state,
		// No systemctl in the fake: irqbalance counts as inactive.
		"HOST_EXEC=true"}

	get := func(k string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(sys, k))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	getIRQ := func(n string) string {
		b, err := os.ReadFile(filepath.Join(irq, n, "smp_affinity_list"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}

	runTune(t, env, "apply", "-i", "ens1f0", "-q", "0-1")
	runTune(t, env, "apply", "-i", "ens1f0", "-q", "0-1") // originals must survive a second apply
	for k, want := range map[string]string{
		"net/core/rmem_max":               "67108864",
		"net/core/wmem_max":               "67108864",
		"net/ipv4/tcp_rmem":               "4096 87380 67108864",
		"net/ipv4/tcp_wmem":               "4096 65536 67108864",
		"net/ipv4/tcp_congestion_control": "htcp",
		"net/ipv4/tcp_mtu_probing":        "1",
	} {
		if got := get(k); got != want {
			t.Errorf("after apply %s = %q, want %q", k, got, want)
		}
	}
	if getIRQ("40") != "0-1" || getIRQ("41") != "0-1" || getIRQ("50") != "0-95" {
		t.Errorf("IRQ affinity after apply: 40=%s 41=%s 50=%s (want the NIC's on 0-1, others untouched)", getIRQ("40"), getIRQ("41"), getIRQ("50"))
	}
	if out := runTune(t, env, "show"); !strings.Contains(out, "saved originals") {
		t.Errorf("show does not report the saved state:\n%s", out)
	}

	runTune(t, env, "revert")
	for k, v := range orig {
		want := strings.Join(strings.Fields(v), " ")
		if got := strings.Join(strings.Fields(get(k)), " "); got != want {
			t.Errorf("after revert %s = %q, want the original %q", k, got, want)
		}
	}
	if getIRQ("40") != "0-95" || getIRQ("41") != "0-95" {
		t.Errorf("IRQ affinity not restored: 40=%s 41=%s", getIRQ("40"), getIRQ("41"))
	}
	if _, err := os.Stat(filepath.Join(state, "saved")); !os.IsNotExist(err) {
		t.Errorf("state file left after revert: %v", err)
	}
	if out := runTune(t, env, "revert"); !strings.Contains(out, "nothing to revert") {
		t.Errorf("second revert: %s", out)
	}
}

// TestNodeTuningMTU applies and reverts tune.sh's MTU (and, where ethtool
// and the driver allow, ring) settings on a veth pair in a network
// namespace of its own. Skipped when not root or without ip.
func TestNodeTuningMTU(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespace)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2")
	}
	ns := fmt.Sprintf("chft%d-tune", os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	if out, err := exec.Command("ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1").CombinedOutput(); err != nil {
		t.Fatalf("veth: %v %s", err, out)
	}
	root := t.TempDir()
	sys := filepath.Join(root, "sys")
	for k, v := range map[string]string{"net/core/rmem_max": "212992", "net/ipv4/tcp_mtu_probing": "0"} {
		os.MkdirAll(filepath.Dir(filepath.Join(sys, k)), 0o755)
		os.WriteFile(filepath.Join(sys, k), []byte(v+"\n"), 0o644)
	}
	env := []string{"PROC_SYS=" + sys, "STATE_DIR=" + filepath.Join(root, "state")}
	script, _ := filepath.Abs(filepath.Join("..", "deploy", "node-tuning", "tune.sh"))
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, "bash", script}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tune.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	mtu := func() string {
		out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/v0/mtu").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	before := mtu()
	run("apply", "-i", "v0", "-m", "9000", "-r")
	if got := mtu(); got != "9000" {
		t.Errorf("mtu after apply = %s, want 9000", got)
	}
	run("revert")
	if got := mtu(); got != before {
		t.Errorf("mtu after revert = %s, want %s", got, before)
	}
}
