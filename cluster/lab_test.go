package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cluster/kube"
)

// labBinaries builds loadgen, chf and cluster for `loadgen lab --cluster`.
func labBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range []string{"loadgen", "chf", "cluster"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, c), "../cmd/"+c).CombinedOutput(); err != nil {
			t.Fatalf("cannot build cmd/%s: %v\n%s", c, err, out)
		}
	}
	return dir
}

// labArgs: the emulated bare-metal and bridge models and the cluster's
// bare-metal and routed pod-network models on two nodes, one short trial.
func labArgs(bin, kubeBin string, imgs []string, helm, out string) []string {
	repo, _ := filepath.Abs(repoRoot())
	return []string{"lab", "--models", "baremetal,bridge", "--pin", "off", "--baseline", "baremetal,unpinned",
		"--trials", "1", "--rate", "100", "--duration", "3s", "--warmup", "0", "--accounts", "1000",
		"--iperf-time", "1s", "--probes", "200", "--out", out,
		"--cluster", "--cluster-models", "baremetal,pod-network", "--cluster-nodes", "2", "--cluster-shards", "2",
		"--cluster-bin", filepath.Join(bin, "cluster"), "--kube-bin", kubeBin, "--helm", helm, "--repo", repo,
		"--cluster-images", strings.Join(imgs, ",")}
}

// labRow is what the test reads of lab.json's rows.
type labRow struct {
	Model, Datapath, ClusterModel string `json:"-"`
	Trials                        []struct {
		TPS     float64 `json:"tps"`
		AuditOK bool    `json:"audit_ok"`
		Network struct {
			RTT struct {
				Median float64 `json:"median_us"`
			} `json:"rtt_us"`
		} `json:"network"`
	} `json:"trials"`
}

// TestLabCluster runs `loadgen lab --cluster` on two real nodes: the
// emulated rows and the cni rows of bare metal and the routed pod network
// side by side in lab.json, each cni row measured through real pods (the
// audit passing, the network alone measured between pods on different
// nodes), and nothing left on the host after it, nor after SIGINT while
// the cluster runs.
func TestLabCluster(t *testing.T) {
	kubeBin := nodeBin(t)
	imgs, _ := images(t)
	created := kube.MissingFixedPaths()
	bin := labBinaries(t)
	helm := helmPath(t)
	env := os.Environ()

	t.Run("two-nodes", func(t *testing.T) {
		before := podNetnsNow()
		out := t.TempDir()
		cmd := exec.Command(filepath.Join(bin, "loadgen"), labArgs(bin, kubeBin, imgs, helm, out)...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("loadgen lab --cluster: %v\n%s", err, tailOf(string(b), 60))
		}
		var rep struct {
			Rows []struct {
				Model        string `json:"model"`
				Datapath     string `json:"datapath"`
				ClusterModel string `json:"cluster_model"`
				labRow
			} `json:"rows"`
			Verdicts []string `json:"verdicts"`
		}
		raw, err := os.ReadFile(filepath.Join(out, "lab.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range rep.Rows {
			key := r.Model + "/" + r.Datapath
			got[key] = true
			if len(r.Trials) != 1 || r.Trials[0].TPS == 0 || !r.Trials[0].AuditOK {
				t.Errorf("row %s: trials %+v: want one measured trial with the audit passed", key, r.Trials)
			}
			if len(r.Trials) == 1 && r.Trials[0].Network.RTT.Median <= 0 {
				t.Errorf("row %s: no network-alone probe RTT", key)
			}
		}
		for _, want := range []string{"baremetal/emulated", "baremetal/cni", "bridge/emulated", "bridge/cni"} {
			if !got[want] {
				t.Errorf("lab.json has no row %s (rows %v)", want, got)
			}
		}
		md, _ := os.ReadFile(filepath.Join(out, "lab.md"))
		if !strings.Contains(string(md), "cni (pod-network)") || !strings.Contains(string(md), "no encapsulation (routed pod network) vs the host's network") {
			t.Errorf("lab.md lacks the cni rows or the no-encapsulation finding:\n%s", md)
		}
		var runs []struct {
			Model      string            `json:"model"`
			Placement  map[string]string `json:"placement"`
			Discovered bool              `json:"discovered"`
			Guard      *kube.GuardCheck  `json:"guard"`
		}
		raw, err = os.ReadFile(filepath.Join(out, "cluster", "runs.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &runs); err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			nodes := map[string]bool{}
			for pod, n := range r.Placement {
				nodes[n] = true
				want := "node2"
				if strings.Contains(pod, "-cgw-") || strings.Contains(pod, "-ocp-") {
					want = "node1"
				}
				if (strings.HasPrefix(pod, "chf-cgw") || strings.HasPrefix(pod, "chf-ocp") || strings.HasPrefix(pod, "chf-abm") || strings.HasPrefix(pod, "load-")) && n != want {
					t.Errorf("%s: pod %s on %s, want %s (the lab's placement)", r.Model, pod, n, want)
				}
			}
			if len(nodes) != 2 || !r.Discovered {
				t.Errorf("%s: placement %v, discovered %v: want pods on both nodes and the OCP found by the CGW", r.Model, r.Placement, r.Discovered)
			}
			if g := r.Guard; r.Model == "pod-network" && (g == nil || !g.GuardFirst || g.NodeRoute != "unreachable" || !strings.Contains(g.ServiceRoute, "dev cni0") || g.Drops != 0) {
				t.Errorf("pod-network guard %+v: want the pod's route to stop at its node, FORWARD guarded first, nothing dropped", g)
			}
			if len(r.Placement) < 6 {
				t.Errorf("%s: placement %v: want the chf pods and both loadgen shards", r.Model, r.Placement)
			}
		}
		t.Logf("verdicts:\n%s", strings.Join(rep.Verdicts, "\n"))
		assertClean(t, filepath.Join(out, "cluster-state"), before, created)
	})

	t.Run("sigint", func(t *testing.T) {
		before := podNetnsNow()
		out := t.TempDir()
		cmd := exec.Command(filepath.Join(bin, "loadgen"), labArgs(bin, kubeBin, imgs, helm, out)...)
		cmd.Env = env
		// Interrupt once the cluster's first model is installed: its
		// nodes, pods and chart are all up.
		took := interruptAt(t, cmd, "chart Ready", 8*time.Minute, 4*time.Minute)
		t.Logf("SIGINT while the cluster ran: exit 130, torn down in %v", took.Round(time.Millisecond))
		assertClean(t, filepath.Join(out, "cluster-state"), before, created)
	})

	// The overlay: flanneld on two nodes (cluster/build.sh --flannel), the
	// chart's pod network driven through it, the CGW's node sending the
	// requests through flannel's VXLAN device.
	t.Run("overlay", func(t *testing.T) {
		needBinary(t, kubeBin, "flanneld", "--flannel")
		r := clusterE2E(t, env, bin, kubeBin, helm, imgs, created, "overlay")
		if r.Emulated != "calico-vxlan" {
			t.Errorf("overlay run %+v: want calico-vxlan's counterpart", r)
		}
		// 3 s at 100 TPS: ~300 requests and their answers, each well
		// over 100 bytes on the wire, from the CGW's node to the ABM's.
		if r.OverlayBytes < 30000 {
			t.Errorf("flannel.1 on the CGW's node sent %d bytes during the load: the requests did not cross the overlay", r.OverlayBytes)
		}
		t.Logf("overlay: %.0f TPS, flannel.1 sent %d bytes, probe RTT p50 %.0f µs", r.TPS, r.OverlayBytes, r.Network.RTT.Median)
	})

	// SR-IOV's stand-in on two nodes: Multus's macvlan net1 on each
	// node's uplink, the uplinks on one switch, a range per node; the OCP
	// (node 1) reaches the ABM (node 2) over net1, the CGW pinned.
	t.Run("sriov-pinned", func(t *testing.T) {
		needBinary(t, kubeBin, "multus", "--multus")
		r := clusterE2E(t, env, bin, kubeBin, helm, imgs, created, "sriov-pinned")
		if r.Emulated != "sriov" || !r.Pinned {
			t.Errorf("sriov-pinned run %+v: want sriov's pinned counterpart", r)
		}
		n2 := kube.NewNode("", 1)
		lo, hi := n2.MacvlanRange()
		if !inRange(r.ABMNet1, lo, hi) || r.OCPToABMNet1 == 0 || r.Net1Conns == 0 {
			t.Errorf("sriov-pinned: the ABM's net1 %q (want in node2's range %s-%s), OCP->ABM net1 connections %d, CGW->OCP %d: want the chassis on net1 across nodes",
				r.ABMNet1, lo, hi, r.OCPToABMNet1, r.Net1Conns)
		}
		// ~300 charging exchanges between the OCP (node 1) and the ABM
		// (node 2), each well over 100 bytes, through node 1's uplink.
		if r.Net1Bytes < 30000 {
			t.Errorf("%s on the CGW's node sent %d bytes during the load: the OCP's calls did not cross the switch", kube.MacvlanMaster, r.Net1Bytes)
		}
		t.Logf("sriov-pinned: %.0f TPS, OCP net1 %s -> ABM net1 %s (%d connections), %s sent %d bytes",
			r.TPS, r.Net1, r.ABMNet1, r.OCPToABMNet1, kube.MacvlanMaster, r.Net1Bytes)
	})
}

// needBinary skips the test without dir/name (cluster/build.sh's flag
// builds it), or fails it under CI, where make test builds it.
func needBinary(t *testing.T, dir, name, flag string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		msg := fmt.Sprintf("no %s in %s (cluster/build.sh %s)", name, dir, flag)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// inRange: ip is an IPv4 address from lo to hi (the same /24).
func inRange(ip, lo, hi string) bool {
	a, l, h := net.ParseIP(ip).To4(), net.ParseIP(lo).To4(), net.ParseIP(hi).To4()
	return a != nil && l != nil && h != nil && bytes.Equal(a[:3], l[:3]) && a[3] >= l[3] && a[3] <= h[3]
}

// e2eRun is what a test reads of one run in cluster e2e's runs.json.
type e2eRun struct {
	Model        string            `json:"model"`
	Emulated     string            `json:"emulated"`
	Pinned       bool              `json:"pinned"`
	AuditOK      bool              `json:"audit_ok"`
	TPS          float64           `json:"tps"`
	OverlayBytes uint64            `json:"overlay_bytes"`
	Net1         string            `json:"net1"`
	Net1Conns    int               `json:"net1_conns"`
	ABMNet1      string            `json:"abm_net1"`
	OCPToABMNet1 int               `json:"ocp_to_abm_net1_conns"`
	Net1Bytes    uint64            `json:"net1_bytes"`
	Placement    map[string]string `json:"placement"`
	Network      *struct {
		RTT struct {
			Median float64 `json:"median_us"`
		} `json:"rtt_us"`
	} `json:"network"`
}

// clusterE2E runs `cluster e2e` on two nodes with one model for one short
// trial at 100 TPS and returns its run, failing unless the audit passed,
// the network alone was probed and nothing is left behind.
func clusterE2E(t *testing.T, env []string, bin, kubeBin, helm string, imgs, created []string, model string) e2eRun {
	t.Helper()
	before := podNetnsNow()
	out, dir := t.TempDir(), t.TempDir()
	repo, _ := filepath.Abs(repoRoot())
	cmd := exec.Command(filepath.Join(bin, "cluster"), "e2e", "--dir", dir, "--bin", kubeBin, "--helm", helm, "--repo", repo,
		"--out", out, "--nodes", "2", "--models", model, "--trials", "1", "--rate", "100", "--duration", "3", "--shards", "1",
		"--loadgen", filepath.Join(bin, "loadgen"), "--images", strings.Join(imgs, ","))
	cmd.Env = env
	cmd.Dir = repo // the images' tag is the chart's appVersion
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cluster e2e --models %s: %v\n%s", model, err, tailOf(string(b), 60))
	}
	var runs []e2eRun
	raw, err := os.ReadFile(filepath.Join(out, "runs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("runs %+v: want one run of %s", runs, model)
	}
	r := runs[0]
	if !r.AuditOK || r.TPS == 0 || r.Network == nil || r.Network.RTT.Median <= 0 {
		t.Errorf("%s run %+v: want the audit passed, the network alone probed", model, r)
	}
	assertClean(t, dir, before, created)
	return r
}

func tailOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
