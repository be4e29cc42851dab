package kube

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The files a node is started with decode, and say what the node needs:
// everything under its directory, its pod subnet and gateway, its
// address, the pause image, the CPU manager policy asked for.
func TestNodeFiles(t *testing.T) {
	dir := t.TempDir()
	n := NewNode(dir, 1)
	if n.IP != "10.243.0.3" || n.PodCIDR != "10.244.1.0/24" || n.Gateway() != "10.244.1.1" || n.Netns != "chf-node2" || n.Cgroup != "/chf-testbed/node2" {
		t.Fatalf("node 2: %+v", n)
	}
	for _, list := range []bool{true, false} {
		var conf map[string]any
		if err := json.Unmarshal([]byte(bridgeConf(n, list, 0)), &conf); err != nil {
			t.Fatalf("bridge conf (list %v) does not decode: %v\n%s", list, err, bridgeConf(n, list, 0))
		}
		plugin := conf
		if list {
			plugin = conf["plugins"].([]any)[0].(map[string]any)
		}
		ipam := plugin["ipam"].(map[string]any)
		if plugin["type"] != "bridge" || ipam["type"] != "host-local" || !strings.HasPrefix(ipam["dataDir"].(string), dir) ||
			!strings.Contains(bridgeConf(n, list, 0), `"subnet": "10.244.1.0/24", "gateway": "10.244.1.1"`) {
			t.Fatalf("bridge conf (list %v): %v", list, conf)
		}
	}
	pki, err := NewPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"none", "static"} {
		var kc map[string]any
		if err := yaml.Unmarshal([]byte(kubeletConfig(n, pki, policy)), &kc); err != nil {
			t.Fatalf("kubelet config does not decode: %v", err)
		}
		if kc["cgroupRoot"] != n.Cgroup || kc["address"] != n.IP || kc["resolvConf"] != "" || kc["failCgroupV1"] != false ||
			!strings.HasPrefix(kc["containerRuntimeEndpoint"].(string), "unix://"+dir) {
			t.Fatalf("kubelet config: %v", kc)
		}
		if got, static := kc["cpuManagerPolicy"], policy == "static"; static && (got != "static" || kc["reservedSystemCPUs"] != "0") || !static && got != nil {
			t.Fatalf("policy %s: cpuManagerPolicy %v reservedSystemCPUs %v", policy, got, kc["reservedSystemCPUs"])
		}
	}
	var kp map[string]any
	if err := yaml.Unmarshal([]byte(kubeProxyConfig(n, "/k")), &kp); err != nil || kp["mode"] != "iptables" || kp["bindAddress"] != n.IP {
		t.Fatalf("kube-proxy config %v: %v", kp, err)
	}
	cd := containerdConfig(n, "docker.io/chf-testbed/pause:1")
	for _, want := range []string{`sandbox_image = "docker.io/chf-testbed/pause:1"`, "restrict_oom_score_adj = true", "SystemdCgroup = false",
		`root = "` + n.Dir, `address = "` + n.Dir + `/containerd.sock"`, `conf_dir = "` + n.Dir} {
		if !strings.Contains(cd, want) {
			t.Errorf("containerd config lacks %q", want)
		}
	}
	var crd map[string]any
	if err := yaml.Unmarshal([]byte(NADCRD), &crd); err != nil || crd["kind"] != "CustomResourceDefinition" {
		t.Fatalf("NAD CRD: %v %v", crd["kind"], err)
	}
}

// Each node's macvlan network (SR-IOV's stand-in) decodes, hangs on the
// node's uplink, keeps its leases in the node's directory, and hands out
// a range of the shared segment no other node hands out.
func TestMacvlanConf(t *testing.T) {
	dir := t.TempDir()
	_, segment, _ := net.ParseCIDR(SriovCIDR)
	seen := map[string]string{}
	for i := 0; i < MaxNodes; i++ {
		n := NewNode(dir, i)
		var conf struct {
			Name, Type, Master, Mode string
			IPAM                     struct {
				Type    string
				DataDir string `json:"dataDir"`
				Ranges  [][]struct {
					Subnet, RangeStart, RangeEnd string
				}
			}
		}
		if err := json.Unmarshal([]byte(macvlanConf(n)), &conf); err != nil {
			t.Fatalf("%s: %v\n%s", n.Name, err, macvlanConf(n))
		}
		if conf.Name != MacvlanNetwork || conf.Type != "macvlan" || conf.Master != MacvlanMaster || conf.Mode != "bridge" ||
			conf.IPAM.Type != "host-local" || !strings.HasPrefix(conf.IPAM.DataDir, n.Dir) || len(conf.IPAM.Ranges) != 1 || len(conf.IPAM.Ranges[0]) != 1 {
			t.Fatalf("%s: %+v", n.Name, conf)
		}
		r := conf.IPAM.Ranges[0][0]
		lo, hi := net.ParseIP(r.RangeStart).To4(), net.ParseIP(r.RangeEnd).To4()
		if r.Subnet != SriovCIDR || lo == nil || hi == nil || !segment.Contains(lo) || !segment.Contains(hi) || lo[3] > hi[3] {
			t.Fatalf("%s: range %+v outside %s", n.Name, r, SriovCIDR)
		}
		for a := int(lo[3]); a <= int(hi[3]); a++ {
			if other, ok := seen[fmt.Sprint(a)]; ok {
				t.Fatalf("%s and %s both hand out 10.99.0.%d", other, n.Name, a)
			}
			seen[fmt.Sprint(a)] = n.Name
		}
		if len(n.Uplink()) > 15 {
			t.Errorf("%s: uplink name %q is longer than a link name may be", n.Name, n.Uplink())
		}
	}
}

// Mount points with spaces or tabs are escaped in mountinfo.
func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a/b`: "/a/b", `/a\040b`: "/a b", `/x\011y\134z`: "/x\ty\\z", `/bad\9`: `/bad\9`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// A process is ours while its command line holds the cluster's directory;
// the caller and its ancestors never are.
func TestOursSparesAncestors(t *testing.T) {
	self := os.Getpid()
	cl, _ := os.ReadFile("/proc/self/cmdline")
	word := strings.Split(string(cl), "\x00")[0]
	if !ours(self, word) {
		t.Fatalf("ours(self, %q) = false: the command line match is broken", word)
	}
	for _, pid := range oursAll(word) {
		if pid == self || pid == os.Getppid() {
			t.Fatalf("oursAll lists this process or its parent (%d)", pid)
		}
	}
	if !ancestors()[self] || !ancestors()[os.Getppid()] {
		t.Fatal("ancestors() lacks this process or its parent")
	}
}

// Down on a directory without a cluster state (a start that failed
// before writing it) works from the fixed names, and LoadState says so.
func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadState(dir); err != ErrNoCluster {
		t.Fatalf("LoadState on an empty dir: %v, want ErrNoCluster", err)
	}
	s := &State{Dir: dir, Bin: "/b", Nodes: []NodeState{NewNode(dir, 0)}, CPUManager: "static", Multus: true, PodNetnsBefore: []string{"cni-x"}}
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(dir)
	if err != nil || got.Nodes[0] != s.Nodes[0] || !got.Multus || got.CPUManager != "static" || got.PodNetnsBefore[0] != "cni-x" {
		t.Fatalf("state %+v: %v", got, err)
	}
	if err := os.WriteFile(statePath(dir), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadState(dir); err == nil || !strings.Contains(err.Error(), "state.json") {
		t.Fatalf("a corrupt state: %v, want an error naming the file", err)
	}
}

// SharedCPUs reads the static policy's shared pool from the kubelet's
// checkpoint, and refuses another policy's or a missing file.
func TestSharedCPUs(t *testing.T) {
	n := NewNode(t.TempDir(), 0)
	if _, err := SharedCPUs(n); err == nil {
		t.Fatal("no checkpoint: no error")
	}
	if err := os.MkdirAll(filepath.Join(n.Dir, "kubelet"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{`{"policyName":"static","defaultCpuSet":"0,2-3","entries":{"4f1c":{"cgw":"1"}},"checksum":1}`, "0,2-3"},
		{`{"policyName":"none","defaultCpuSet":"","checksum":1}`, ""},
		{`{`, ""},
	} {
		if err := os.WriteFile(filepath.Join(n.Dir, "kubelet", "cpu_manager_state"), []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := SharedCPUs(n)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%s: %q, %v; want %q", c.file, got, err, c.want)
		}
	}
}
