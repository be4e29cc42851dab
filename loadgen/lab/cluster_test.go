package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportCNI: the cluster's rows sit beside their emulated
// counterparts, are compared with them, and say whether the routed pod
// network differs from the host's network, with the spread.
func TestReportCNI(t *testing.T) {
	trial := func(p50, sut, rtt, gbps float64) Trial {
		comp := map[string]float64{"cgw": sut / 3, "ocp": sut / 3, "abm": sut / 3}
		if p50 < 1.5 { // the emulated rows, and one cni row, also measure the store
			comp["aslite"] = 40
		}
		return Trial{TPS: 100, P50Ms: p50, P99Ms: 3 * p50, SUTUsTxn: sut, AuditOK: true, CompUsTxn: comp,
			Network: Network{IPerf3Gbps: Pair{gbps, gbps}, RTTUs: RTT{MedianUs: rtt, P99Us: 2 * rtt}}, raw: []byte(`{}`)}
	}
	rep := &Report{Kind: "lab", Baseline: "baremetal/unpinned", Rows: []*Row{
		{Model: "baremetal", Datapath: DatapathEmulated, Trials: []Trial{trial(1.0, 200, 30, 20), trial(1.1, 210, 32, 21)},
			GOMAXPROCS: map[string]int{"cgw": 1, "ocp": 1, "abm": 1, "aslite": 1}},
		{Model: "bridge", Datapath: DatapathEmulated, Trials: []Trial{trial(1.2, 220, 40, 18), trial(1.3, 225, 41, 19)},
			GOMAXPROCS: map[string]int{"cgw": 1, "ocp": 1, "abm": 1, "aslite": 1}},
		{Model: "baremetal", Datapath: DatapathCNI, ClusterModel: "baremetal", Trials: []Trial{trial(1.05, 300, 31, 20), trial(1.08, 310, 33, 22)}},
		{Model: "bridge", Datapath: DatapathCNI, ClusterModel: "pod-network", Trials: []Trial{trial(2.0, 400, 60, 9), trial(2.1, 410, 62, 10)}},
	}}
	rep.finish(Options{MTU: 1500})
	// the bare-metal cni row is compared with its emulation, not the baseline
	if v := rep.Rows[2].Versus["sut_cpu_us_per_txn"]; !strings.HasPrefix(v, "worse") {
		t.Errorf("cni baremetal SUT vs its emulation: %q, want worse", v)
	}
	if v := rep.Rows[2].Versus["p50_ms"]; v != "no measurable difference" {
		t.Errorf("cni baremetal p50 vs its emulation: %q", v)
	}
	all := strings.Join(rep.Verdicts, "\n")
	for _, want := range []string{
		"cni vs emulation, bridge/unpinned: p50 2.050 (2.000–2.100) vs 1.250 (1.200–1.300) ms (worse",
		"cni, unpinned: no encapsulation (routed pod network) vs the host's network: p50 worse",
		"iperf3 1 stream worse",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("verdicts lack %q:\n%s", want, all)
		}
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "no overlay model ran on the cluster") {
		t.Errorf("notes: %v", rep.Notes)
	}
	got := rep.ordered()
	if got[0] != rep.Rows[0] || got[1] != rep.Rows[2] || got[2] != rep.Rows[1] || got[3] != rep.Rows[3] {
		t.Errorf("each model's cni row must follow its emulated row")
	}
	md := rep.Markdown()
	if !strings.Contains(md, "| bridge | cni (pod-network) | unpinned |") {
		t.Errorf("lab.md lacks the cni row:\n%s", md)
	}
	// Per-component CPU: a cni row names its datapath, and what it did
	// not measure (the store's CPU, GOMAXPROCS) is n/a, not 0.
	for _, want := range []string{
		"| bridge | emulated | unpinned | 74 (73–75) | 74 (73–75) | 74 (73–75) | 40 | 1/1/1/1 |",
		"| bridge | cni (pod-network) | unpinned | 135 (133–137) | 135 (133–137) | 135 (133–137) | n/a | n/a/n/a/n/a/n/a |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("per-component table lacks %q:\n%s", want, md[strings.Index(md, "## Per-component"):])
		}
	}
}

// TestClusterRuns runs a stand-in for the cluster binary that writes
// runs.json the way cluster e2e does, and checks the arguments the lab
// gives it and the rows it makes of the runs.
func TestClusterRuns(t *testing.T) {
	dir := t.TempDir()
	merged := filepath.Join(dir, "merged.json")
	if err := os.WriteFile(merged, []byte(`{"tps":99.5,"transactions":300,"latency_ms":{"p50":1.5,"p99":4},"sut_cpu_us_per_txn":321,"audit":{"ok":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "cluster-fake")
	script := `#!/bin/sh
echo "$@" > "` + dir + `/args"
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
mkdir -p "$out"
cat > "$out/runs.json" <<JSON
[{"model":"pod-network","emulated":"bridge","pinned":false,"stands_in":"routed","trial":1,"merged":"` + merged + `","network":{"rtt_us":{"median_us":55}},"knee_tps":4000,"knee_notes":["5000 TPS missed 3 times"]},
 {"model":"pod-network","emulated":"bridge","pinned":false,"stands_in":"routed","trial":2,"merged":""}]
JSON
echo "cluster: [  1.0s] pod-network: chart Ready in 1.0 s" >&2
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	l := New(Options{Out: dir, Trials: 2, Rate: 100, Duration: 3 * time.Second, Loadgen: "/x/loadgen", Sweep: true, KneeP99: 50 * time.Millisecond,
		Cluster: &ClusterOptions{Bin: fake, KubeBin: "/k", Helm: "/h", Repo: dir, Nodes: 2, Shards: 1, Models: []string{"pod-network"}}})
	rep := &Report{}
	if err := l.cluster(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	for _, want := range []string{"e2e ", "--nodes 2", "--trials 2", "--rate 100", "--duration 3", "--models pod-network", "--loadgen /x/loadgen", "--bin /k", "--sweep --knee-slo-p99 50ms"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("cluster args %q lack %q", args, want)
		}
	}
	if len(rep.Rows) != 1 {
		t.Fatalf("rows %+v, want one cni row", rep.Rows)
	}
	r := rep.Rows[0]
	if r.Model != "bridge" || r.Datapath != DatapathCNI || r.ClusterModel != "pod-network" || len(r.Trials) != 1 || r.Trials[0].TPS != 99.5 ||
		r.Trials[0].SUTUsTxn != 321 || r.Trials[0].Network.RTTUs.MedianUs != 55 || len(r.Failures) != 1 ||
		r.KneeTPS == nil || *r.KneeTPS != 4000 || len(r.KneeRetried) != 1 {
		t.Errorf("row %+v", r)
	}
}
