package report

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// Provenance says where a result comes from: what measured it, with
// which arguments, on which machine, against what.
type Provenance struct {
	LoadgenVersion string `json:"loadgen_version"`
	// CHFVersion is the system under test's version when known
	// (`chf --version` of the binary loadgen local started).
	CHFVersion string `json:"chf_version,omitempty"`
	GoVersion  string `json:"go_version"`
	// CommandLine is loadgen's argv; Flags every flag's effective value.
	CommandLine []string          `json:"command_line"`
	Flags       map[string]string `json:"flags,omitempty"`
	// ScenarioHash identifies the (unsharded) scenario: scenario.Hash.
	ScenarioHash string `json:"scenario_hash"`
	Host         string `json:"host"`
	Kernel       string `json:"kernel"`
	CPUModel     string `json:"cpu_model"`
	CPUs         int    `json:"cpus"`
	// Cluster is set when the load came from pods of a Kubernetes
	// cluster (the collector that merged the shards fills it).
	Cluster *ClusterRun `json:"cluster,omitempty"`
	// Store is the CHF's store when loadgen started the CHF (loadgen
	// local, sweep --local, gate).
	Store *Store `json:"store,omitempty"`
	// RuntimeProfile is the CHF services' runtime profile (chf
	// --runtime-profile: production or lab): the one loadgen started
	// them with (loadgen local, sweep --local, gate, lab), else the one
	// its --runtime-profile states; empty = not known. Merged shards that
	// state different ones list them, comma-separated.
	RuntimeProfile string `json:"runtime_profile,omitempty"`
}

// Store names the store of the system under test.
type Store struct {
	// Kind is "aslite" (the project's stand-in) or "aerospike" (the
	// real server: started by loadgen, or an existing one).
	Kind      string   `json:"kind"`
	Hosts     []string `json:"hosts"`
	Namespace string   `json:"namespace"`
	// Build is the server's info "edition" and "build" (aslite: its
	// version).
	Build string `json:"build,omitempty"`
	// Nodes is the number of asd nodes loadgen started (0: aslite or an
	// existing Aerospike); External marks a store loadgen did not start.
	Nodes    int  `json:"nodes,omitempty"`
	External bool `json:"external,omitempty"`
}

// String reads "aerospike Aerospike Community Edition 8.1.1.2, 3 nodes
// started, namespace chf at 127.0.0.1:3000,...".
func (s *Store) String() string {
	if s == nil {
		return "n/a"
	}
	how := ""
	switch {
	case s.External:
		how = ", existing"
	case s.Nodes > 0:
		how = fmt.Sprintf(", %d node(s) started", s.Nodes)
	}
	return fmt.Sprintf("%s (%s%s), namespace %s at %s", s.Kind, orNA(s.Build), how, s.Namespace, strings.Join(s.Hosts, ","))
}

// ClusterRun says where a cluster run ran: the network model installed,
// its datapath, the nodes, the kubelets' CPU manager policy, and the
// node of every pod of the CHF and of the load generator.
type ClusterRun struct {
	Model string `json:"model"`
	// Datapath: "cni" (CNI plugins driven by a kubelet).
	Datapath   string            `json:"datapath"`
	Nodes      []string          `json:"nodes"`
	CPUManager string            `json:"cpu_manager"`
	Placement  map[string]string `json:"placement"` // pod name -> node
}

// HostProvenance fills the machine's part of a Provenance: host name,
// kernel release, CPU model and count, Go version.
func HostProvenance() Provenance {
	p := Provenance{GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	p.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		p.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	} else {
		p.Kernel = runtime.GOOS
	}
	p.CPUModel = cpuModel()
	return p
}

// cpuModel returns the first "model name" of /proc/cpuinfo, else the
// architecture.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// UnknownSubscriberClasses are the error classes of answers saying the
// subscriber is unknown: Nchf 404 (on a create, event or inquiry; an
// update or release only follows a successful create) and Diameter
// DIAMETER_USER_UNKNOWN.
var UnknownSubscriberClasses = []string{"http_404", "gy_5030"}

// unknownSubscriberShare is the share of transactions answered
// "subscriber unknown" above which the result warns.
const unknownSubscriberShare = 0.10

func (r *Result) unknownSubscriberWarning() string {
	if r.Transactions == 0 || float64(r.UnknownSubscriber) < unknownSubscriberShare*float64(r.Transactions) {
		return ""
	}
	return fmt.Sprintf("%d of %d transactions (%.1f%%) were answered \"subscriber unknown\" (%s): the subscriber range "+
		"(first %s, count %d) does not match what the CHF has provisioned; set --first and --subscribers (scenario subscribers.first/count) "+
		"to the provisioned range (loadgen local and sweep --local provision --accounts)",
		r.UnknownSubscriber, r.Transactions, 100*float64(r.UnknownSubscriber)/float64(r.Transactions),
		strings.Join(UnknownSubscriberClasses, ", "), r.Scenario.Subscribers.First, r.Scenario.Subscribers.Count)
}

// Verdict is the outcome of one threshold.
type Verdict struct {
	scenario.Threshold
	// Actual is the measured value (ms, fraction or TPS as the metric);
	// Limit what it was compared with. NA: the run has no such figure
	// (e.g. no transaction completed), which fails the threshold.
	Actual float64 `json:"actual"`
	Limit  float64 `json:"limit"`
	NA     bool    `json:"na,omitempty"`
	Pass   bool    `json:"pass"`
}

// String reads "p99<10ms: 12.301 (limit 10.000) FAIL".
func (v Verdict) String() string {
	res := "pass"
	if !v.Pass {
		res = "FAIL"
	}
	if v.NA {
		return fmt.Sprintf("%s: n/a (no data) %s", v.Expr, res)
	}
	return fmt.Sprintf("%s: %s (limit %s) %s", v.Expr, v.format(v.Actual), v.format(v.Limit), res)
}

func (v Verdict) format(x float64) string {
	switch v.Metric {
	case "errors", "late", "dropped":
		return fmt.Sprintf("%.3f%%", 100*x)
	case "tps":
		return fmt.Sprintf("%.1f TPS", x)
	case "jitter":
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.3f ms", x)
}

// metric returns the value a threshold metric reads, and whether the run
// has it.
func (r *Result) metric(name string) (float64, bool) {
	l := r.LatencyMs
	lat := map[string]float64{"p50": l.P50, "p90": l.P90, "p99": l.P99, "p99.9": l.P999, "max": l.Max, "mean": l.Mean}
	switch {
	case name == "tps":
		return r.TPS, r.DurationS > 0
	case name == "errors":
		return r.ErrorRate, r.Transactions > 0
	case name == "late":
		return float64(r.Late) / float64(max(r.Offered, 1)), r.Offered > 0
	case name == "dropped":
		return float64(r.Dropped) / float64(max(r.Offered, 1)), r.Offered > 0
	case name == "jitter":
		return r.JitterCV, r.Transactions > r.Errors
	}
	v, ok := lat[name]
	return v, ok && r.Transactions > r.Errors
}

// CheckThresholds evaluates ts against r, stores the verdicts in
// r.Thresholds and r.ThresholdsOK, and returns the failed ones.
func (r *Result) CheckThresholds(ts []scenario.Threshold) []Verdict {
	r.Thresholds = r.Thresholds[:0:0]
	var failed []Verdict
	for _, t := range ts {
		v := Verdict{Threshold: t, Limit: t.Limit(r.OfferedTPS)}
		var ok bool
		v.Actual, ok = r.metric(t.Metric)
		v.NA = !ok
		v.Pass = ok && t.Holds(v.Actual, r.OfferedTPS)
		r.Thresholds = append(r.Thresholds, v)
		if !v.Pass {
			failed = append(failed, v)
		}
	}
	r.ThresholdsOK = len(failed) == 0
	return failed
}

// thresholdList returns the thresholds r was checked against.
func (r *Result) thresholdList() []scenario.Threshold {
	out := make([]scenario.Threshold, len(r.Thresholds))
	for i, v := range r.Thresholds {
		out[i] = v.Threshold
	}
	return out
}
