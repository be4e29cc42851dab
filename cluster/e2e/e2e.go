// Package e2e installs the charts on the cluster `cluster up` started and
// drives them: for each network model, the chf chart (its small-node
// profile and the model's values file) installed with `helm install
// --wait`, the loadgen chart's Indexed Job run against the CGW from inside
// the cluster, each shard's result read from its log, the shards merged
// with their audit, and the run marked as a cluster run (model, nodes, pod
// placement). The SUT's CPU per transaction comes from the services'
// /metrics (process_cpu_seconds_total) around the run.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/cluster/kube"
	"github.com/chf-testbed/testbed/loadgen/lab"
	"github.com/chf-testbed/testbed/loadgen/report"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Model is one network model as the charts install it on a small node.
type Model struct {
	Name string
	// Values are the chf chart's values files (charts/chf/...), in order.
	Values []string
	// LoadValues are the loadgen chart's values files.
	LoadValues []string
	// Port is the CGW's port (the bare-metal models move it).
	Port int
	// Pinned: the model pins the CGW (needs the static CPU manager).
	Pinned bool
	// Multus: the model attaches a Multus network (SR-IOV's stand-in).
	Multus bool
	// Network is the pod network between nodes it needs
	// (kube.NetworkRouted when empty, or kube.NetworkFlannel): models
	// needing different ones run on clusters of their own.
	Network string
	// Level is the Pod Security level its namespace needs.
	Level string
	// StandsIn says what the model stands in for on this node.
	StandsIn string
	// Emulated is the loadgen lab model emulating the same datapath in
	// network namespaces (its counterpart in the lab's report); with
	// several nodes the pod network is routed between them, which is
	// the lab's bridge model.
	Emulated string
}

// Models are the network models the chf chart ships, as they install on a
// small node (charts/chf/README.md, "Small node"), each with the pod
// network it needs between nodes.
var Models = []Model{
	{Name: "pod-network", Values: []string{"values-small.yaml"}, LoadValues: []string{"values-small.yaml"}, Port: 8080, Level: "restricted",
		StandsIn: "Calico without encapsulation: the chart's pod-network values on the bridge CNI, each node's pod subnet routed to it by the others (Calico cannot be built here)", Emulated: "bridge"},
	{Name: "overlay", Values: []string{"values-small.yaml"}, LoadValues: []string{"values-small.yaml"}, Port: 8080, Level: "restricted", Network: kube.NetworkFlannel,
		StandsIn: "Calico VXLAN: the chart's pod-network values with flannel's VXLAN backend (flanneld) between the nodes, the bridge CNI on each node fed from flannel's subnet.env", Emulated: "calico-vxlan"},
	{Name: "baremetal", Values: []string{"values-small.yaml", "values-baremetal.yaml"}, LoadValues: []string{"values-small.yaml"}, Port: 18080, Level: "privileged",
		StandsIn: "bare metal: host-network pods (the node's namespace)", Emulated: "baremetal"},
	{Name: "baremetal-pinned", Values: []string{"values-small.yaml", "values-baremetal-pinned.yaml", "values-small-pinned.yaml"},
		LoadValues: []string{"values-small.yaml", "values-small-pinned.yaml"}, Port: 18080, Pinned: true, Level: "privileged",
		StandsIn: "bare metal with the CGW pinned by the static CPU manager", Emulated: "baremetal"},
	{Name: "calico-pinned", Values: []string{"values-small.yaml", "values-calico-pinned.yaml", "values-small-pinned.yaml"},
		LoadValues: []string{"values-small.yaml", "values-small-pinned.yaml"}, Port: 8080, Pinned: true, Level: "restricted",
		StandsIn: "Calico pinned: the pod network (bridge CNI) with the CGW pinned", Emulated: "bridge"},
	{Name: "sriov-pinned", Values: []string{"values-small.yaml", "values-sriov-pinned.yaml", "values-small-pinned.yaml"},
		LoadValues: []string{"values-small.yaml", "values-small-pinned.yaml"}, Port: 8080, Pinned: true, Multus: true, Level: "restricted",
		StandsIn: "SR-IOV: a Multus macvlan attachment (net1) on each node's uplink to one switch, the CGW pinned", Emulated: "sriov"},
}

// NetworkOf is the pod network model m runs on.
func (m Model) NetworkOf() string {
	if m.Network == "" {
		return kube.NetworkRouted
	}
	return m.Network
}

// ModelByName finds a model.
func ModelByName(name string) (Model, bool) {
	for _, m := range Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}

// Options is one e2e run.
type Options struct {
	Dir     string // the cluster's directory (cluster up --dir)
	Repo    string // the repository root (charts/)
	Helm    string // the helm binary
	Out     string // where the results go
	Rate    int    // offered TPS, over all shards
	Shards  int
	Seconds int // the load's measured duration
	// Loadgen, when set, is the loadgen binary: each run then measures
	// the network alone (loadgen lab's probe, and iperf3 when IPerf3 is
	// set) between the CGW's pod and a pod on the load generator's node.
	Loadgen, IPerf3 string
	// Sweep (with Loadgen): each model's first trial also finds the
	// model's knee (sweepKnee), the chart then provisioning SweepAccounts
	// accounts; KneeP99 is the sweep's p99 limit.
	Sweep   bool
	KneeP99 time.Duration
	Log     func(format string, args ...any)
}

// Placement is where each part runs with several nodes, as in the lab's
// reference deployment: the CGW and the OCP on the first node, the store,
// the ABM and the load generator on the second, so that the client's
// requests to the CGW and the OCP's to the ABM cross the fabric.
var Placement = map[string]int{"cgw": 0, "ocp": 0, "aslite": 1, "abm": 1, "loadgen": 1}

// placementArgs are the helm --set flags that put the chf chart's
// components (chf) or the loadgen chart's Job (load) on their nodes;
// none on a single node.
func placementArgs(s *kube.State, chart string) []string {
	if len(s.Nodes) < 2 {
		return nil
	}
	host := func(role string) string { return s.Nodes[Placement[role]].Name }
	const key = `nodeSelector.kubernetes\.io/hostname=`
	if chart == "load" {
		return []string{"--set-string", key + host("loadgen")}
	}
	return []string{"--set-string", "cgw." + key + host("cgw"), "--set-string", "ocp." + key + host("ocp"),
		"--set-string", "abm." + key + host("abm"), "--set-string", "aerospike.aslite." + key + host("aslite")}
}

// Run is one model's run: what it measured and where its files are.
type Run struct {
	Model string `json:"model"`
	// Emulated, Pinned and StandsIn describe the model (Model's fields),
	// for a reader of runs.json such as loadgen lab --cluster.
	Emulated    string            `json:"emulated"`
	Pinned      bool              `json:"pinned"`
	StandsIn    string            `json:"stands_in"`
	Trial       int               `json:"trial"`
	ChartReadyS float64           `json:"chart_ready_s"`
	Merged      string            `json:"merged"` // merged.json
	TPS         float64           `json:"tps"`
	P50Ms       float64           `json:"p50_ms"`
	P99Ms       float64           `json:"p99_ms"`
	SUTUsTxn    float64           `json:"sut_cpu_us_per_txn"`
	AuditOK     bool              `json:"audit_ok"`
	Placement   map[string]string `json:"placement"`
	Discovered  bool              `json:"discovered"` // the CGW found the OCP through EndpointSlices
	// JobError: the loadgen Job failed although every shard's result was
	// read (a shard's thresholds failed, e.g. errors above 1%): the run's
	// figures stand, flagged.
	JobError string `json:"job_error,omitempty"`
	// Net1 (Multus models): the OCP's net1 address from its
	// network-status annotation, and how many connections the CGW's pod
	// had open to it after the run (the chassis chose net1).
	Net1      string `json:"net1,omitempty"`
	Net1Conns int    `json:"net1_conns,omitempty"`
	// ABMNet1, OCPToABMNet1: the ABM's net1 address, and how many
	// connections the OCP's pod had open to it (across the fabric when
	// they run on different nodes); Net1Bytes: what the CGW's node sent
	// through its macvlan uplink during the load (0 on one node, where
	// macvlan delivers between its own pods).
	ABMNet1      string `json:"abm_net1,omitempty"`
	OCPToABMNet1 int    `json:"ocp_to_abm_net1_conns,omitempty"`
	Net1Bytes    uint64 `json:"net1_bytes,omitempty"`
	// Network is the network alone between the CGW's pod and a pod on
	// the load generator's node (Options.Loadgen set).
	Network *lab.Network `json:"network,omitempty"`
	// Guard: where a pod's packets to the outside would go (asked, not
	// sent) and what the host's guard dropped; nil when no pod of the
	// model has an address on the pod network (all host network).
	Guard *kube.GuardCheck `json:"guard,omitempty"`
	// OverlayBytes (the overlay model): what the CGW's node sent through
	// flannel's VXLAN device during the load, the proof that the
	// requests crossed the fabric encapsulated.
	OverlayBytes uint64 `json:"overlay_bytes,omitempty"`
	// KneeTPS (Options.Sweep, first trial): the highest offered rate
	// of the knee sweep that met its SLO; KneeNotes its retried, void
	// or failed steps; Sweep its sweep.json (every step's result).
	KneeTPS   *float64 `json:"knee_tps,omitempty"`
	KneeNotes []string `json:"knee_notes,omitempty"`
	Sweep     string   `json:"sweep,omitempty"`
}

// RunModel installs model m, drives it, collects and merges, uninstalls.
func RunModel(ctx context.Context, o Options, c kubernetes.Interface, s *kube.State, m Model, trial int) (*Run, error) {
	ns := "chf-" + m.Name
	out := filepath.Join(o.Out, fmt.Sprintf("%s-%d", m.Name, trial))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	r := &Run{Model: m.Name, Emulated: m.Emulated, Pinned: m.Pinned, StandsIn: m.StandsIn, Trial: trial}
	if err := createNamespace(ctx, c, ns, m.Level); err != nil {
		return nil, err
	}
	defer func() {
		if ctx.Err() != nil {
			return // interrupted: the tear-down that follows removes it all
		}
		if fail := r.JobError != "" || !r.AuditOK; fail {
			saveLogs(context.WithoutCancel(ctx), c, ns, out)
		}
		o.Log("%s: uninstalling", m.Name)
		if err := deleteNamespace(context.WithoutCancel(ctx), o, c, ns); err != nil {
			o.Log("%s: %v", m.Name, err)
		}
	}()
	chart := filepath.Join(o.Repo, "charts", "chf")
	args := []string{"install", "chf", chart, "-n", ns, "--wait", "--timeout", "5m"}
	for _, v := range m.Values {
		args = append(args, "-f", filepath.Join(chart, v))
	}
	args = append(args, placementArgs(s, "chf")...)
	sweep := o.Sweep && o.Loadgen != "" && trial == 1
	if sweep {
		args = append(args, "--set", fmt.Sprintf("provision.accounts=%d", SweepAccounts))
	}
	o.Log("%s: helm install chf (%s)", m.Name, strings.Join(m.Values, " "))
	t0 := time.Now()
	if _, err := kube.Helm(ctx, o.Dir, o.Helm, 6*time.Minute, args...); err != nil {
		if ctx.Err() == nil {
			saveLogs(context.WithoutCancel(ctx), c, ns, out)
			err = fmt.Errorf("%w\npods (their logs in %s):\n%s", err, filepath.Join(out, "logs"), podStates(context.WithoutCancel(ctx), c, ns))
		}
		return r, err
	}
	// helm --wait counts a Deployment whose rollout allows an
	// unavailable pod (the bare-metal models' maxUnavailable 1 of 1)
	// as ready: wait for every service pod's Ready condition too.
	if err := podsReady(ctx, c, ns, 3*time.Minute); err != nil {
		return r, err
	}
	r.ChartReadyS = time.Since(t0).Seconds()
	o.Log("%s: chart Ready in %.1f s", m.Name, r.ChartReadyS)
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	targets := metricsTargets(pods.Items)
	for _, p := range pods.Items {
		if !p.Spec.HostNetwork && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			for _, n := range s.Nodes {
				if n.Name == p.Spec.NodeName {
					g, err := kube.CheckGuard(ctx, s, n, p.Status.PodIP)
					r.Guard = g
					if err != nil {
						return r, fmt.Errorf("the no-egress guard, from pod %s: %w", p.Name, err)
					}
				}
			}
			break
		}
	}
	if o.Loadgen != "" {
		n, err := measureNetwork(ctx, o, s, pods.Items, m.Multus)
		if err != nil {
			return r, fmt.Errorf("the network alone: %w", err)
		}
		r.Network = &n
		o.Log("%s: network alone: probe RTT p50 %.0f µs, p99 %.0f µs; iperf3 %.2f Gbit/s (1 stream)", m.Name, n.RTTUs.MedianUs, n.RTTUs.P99Us, n.IPerf3Gbps.Single)
	}
	before := scrapeCPU(ctx, targets)
	// What the CGW's node sends through the link the model's traffic
	// between nodes must take: flannel's VXLAN device, the macvlan uplink.
	link := ""
	switch {
	case m.NetworkOf() == kube.NetworkFlannel:
		link = kube.FlannelLink
	case m.Multus:
		link = kube.MacvlanMaster
	}
	txBytes := func() uint64 {
		if link == "" {
			return 0
		}
		b, err := kube.LinkTxBytes(ctx, s.Nodes[0], link)
		if err != nil {
			o.Log("%s: %v", m.Name, err)
		}
		return b
	}
	tx0 := txBytes()

	lchart := filepath.Join(o.Repo, "charts", "loadgen")
	largs := []string{"install", "load", lchart, "-n", ns,
		"--set", fmt.Sprintf("target=http://10.0.0.21:%d", m.Port), "--set", "startDelay=5s",
		"--set", fmt.Sprintf("rate=%d", o.Rate), "--set", fmt.Sprintf("shards=%d", o.Shards),
		"--set", fmt.Sprintf("duration=%ds", o.Seconds), "--set", "label=" + m.Name}
	for _, v := range m.LoadValues {
		largs = append(largs, "-f", filepath.Join(lchart, v))
	}
	largs = append(largs, placementArgs(s, "load")...)
	o.Log("%s: loadgen Job, %d shards, %d TPS for %d s", m.Name, o.Shards, o.Rate, o.Seconds)
	if _, err := kube.Helm(ctx, o.Dir, o.Helm, 2*time.Minute, largs...); err != nil {
		return r, err
	}
	job := "load-loadgen"
	jobErr := kube.WaitJob(ctx, c, ns, job, time.Duration(o.Seconds)*time.Second+5*time.Minute)
	after := scrapeCPU(ctx, targets)
	if link != "" {
		sent := max(txBytes(), tx0) - tx0
		o.Log("%s: %s on %s sent %d bytes during the load", m.Name, link, s.Nodes[0].Name, sent)
		if m.Multus {
			r.Net1Bytes = sent
		} else {
			r.OverlayBytes = sent
		}
	}
	if m.Multus {
		if err := checkNet1(ctx, c, s, ns, r); err != nil {
			return r, err
		}
		o.Log("%s: the CGW had %d connections to the OCP's net1 address %s, the OCP %d to the ABM's %s", m.Name, r.Net1Conns, r.Net1, r.OCPToABMNet1, r.ABMNet1)
	}
	shards, err := collect(ctx, c, ns, job, out)
	if err != nil {
		return r, errors.Join(jobErr, err)
	}
	merged, err := report.Merge(report.MergeOptions{}, shards...)
	if err != nil {
		return r, fmt.Errorf("cannot merge the shards: %w", err)
	}
	all, _ := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	r.Placement = map[string]string{}
	for _, p := range all.Items {
		r.Placement[p.Name] = p.Spec.NodeName
	}
	var nodes []string
	for _, n := range s.Nodes {
		nodes = append(nodes, n.Name)
	}
	merged.Label = m.Name
	merged.Provenance.Cluster = &report.ClusterRun{Model: m.Name, Datapath: "cni", Nodes: nodes, CPUManager: s.CPUManager, Placement: r.Placement}
	applyCPU(merged, before, after)
	r.Merged = filepath.Join(out, "merged.json")
	if err := writeJSON(r.Merged, merged); err != nil {
		return r, err
	}
	r.TPS, r.P50Ms, r.P99Ms, r.SUTUsTxn, r.AuditOK = merged.TPS, merged.LatencyMs.P50, merged.LatencyMs.P99, merged.SUTCPUUsTxn, merged.Audit.OK
	r.Discovered = after["cgw"].endpoints > 0
	if !merged.Audit.OK {
		return r, fmt.Errorf("%s: the audit failed across the shards: %s", m.Name, merged.Audit.Reason)
	}
	if jobErr != nil {
		r.JobError = jobErr.Error()
		o.Log("%s: %v (every shard's result read: the run is kept, flagged)", m.Name, jobErr)
	}
	if sweep {
		if err := sweepKnee(ctx, o, s, m, r, out); err != nil {
			return r, fmt.Errorf("the knee sweep: %w", err)
		}
	}
	return r, nil
}

func createNamespace(ctx context.Context, c kubernetes.Interface, ns, level string) error {
	lv := map[string]string{}
	for _, k := range []string{"enforce", "warn", "audit"} {
		lv["pod-security.kubernetes.io/"+k] = level
	}
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: lv}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cannot create namespace %s: %w", ns, err)
	}
	return nil
}

// deleteNamespace uninstalls the releases and deletes the namespace,
// waiting until its pods are gone (the fixed Service addresses and the
// node's CPUs are free for the next model).
func deleteNamespace(ctx context.Context, o Options, c kubernetes.Interface, ns string) error {
	for _, rel := range []string{"load", "chf"} {
		_, _ = kube.Helm(ctx, o.Dir, o.Helm, 2*time.Minute, "uninstall", rel, "-n", ns, "--wait", "--ignore-not-found")
	}
	grace := int64(0)
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not gone after 3 min", ns)
		case <-time.After(time.Second):
		}
	}
}

// collect reads every shard's result from its pod's log and writes it as
// shard-<i>.json.
func collect(ctx context.Context, c kubernetes.Interface, ns, job, out string) ([]*report.Result, error) {
	pods, err := kube.JobPods(ctx, c, ns, job)
	if err != nil {
		return nil, err
	}
	byIndex := map[string]corev1.Pod{}
	for _, p := range pods {
		i := p.Annotations["batch.kubernetes.io/job-completion-index"]
		if q, ok := byIndex[i]; !ok || p.CreationTimestamp.After(q.CreationTimestamp.Time) {
			byIndex[i] = p
		}
	}
	var res []*report.Result
	var errs []error
	idx := make([]string, 0, len(byIndex))
	for i := range byIndex {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		p := byIndex[i]
		log, err := kube.Logs(ctx, c, ns, p.Name, "loadgen", report.MaxFileBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// the shard's whole log beside its result, for a failed shard
		// (its error) as for a passed one
		if err := os.WriteFile(filepath.Join(out, "shard-"+i+".log"), []byte(log), 0o644); err != nil {
			return nil, err
		}
		r, err := report.ParseResultLog(strings.NewReader(log))
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %s (pod %s, log in %s): %w: %s", i, p.Name, filepath.Join(out, "shard-"+i+".log"), err, lastLines(log, 3)))
			continue
		}
		if err := writeJSON(filepath.Join(out, "shard-"+i+".json"), r); err != nil {
			return nil, err
		}
		res = append(res, r)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no shard result: %w", errors.Join(errs...))
	}
	return res, errors.Join(errs...)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// target is one service's /metrics.
type target struct{ component, url string }

// metricsTargets finds the cgw, ocp and abm pods' /metrics (their first
// container port, on the pod's address).
func metricsTargets(pods []corev1.Pod) []target {
	var out []target
	for _, p := range pods {
		comp := p.Labels["app.kubernetes.io/component"]
		if comp != "cgw" && comp != "ocp" && comp != "abm" || p.Status.PodIP == "" || len(p.Spec.Containers) == 0 {
			continue
		}
		for _, port := range p.Spec.Containers[0].Ports {
			if port.Name == "http" || port.ContainerPort >= 8080 && port.ContainerPort <= 18082 && port.Name != "diameter" {
				out = append(out, target{comp, fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, port.ContainerPort)})
				break
			}
		}
	}
	return out
}

type sample struct {
	cpu       float64
	endpoints float64
	at        time.Time
}

// scrapeCPU reads process_cpu_seconds_total (and the CGW's healthy OCP
// endpoints) of each target.
func scrapeCPU(ctx context.Context, ts []target) map[string]sample {
	out := map[string]sample{}
	cl := &http.Client{Timeout: 5 * time.Second}
	for _, t := range ts {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
		resp, err := cl.Do(req)
		if err != nil {
			continue
		}
		s := sample{at: time.Now()}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			f := strings.Fields(l)
			if len(f) != 2 {
				continue
			}
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				continue
			}
			switch {
			case f[0] == "process_cpu_seconds_total":
				s.cpu = v
			case strings.HasPrefix(f[0], `chf_client_endpoints{`) && strings.Contains(f[0], `peer_service="ocp"`) && strings.Contains(f[0], `state="healthy"`):
				s.endpoints = v
			}
		}
		resp.Body.Close()
		out[t.component] = s
	}
	return out
}

// applyCPU puts the services' CPU over the run into the merged result:
// CPU seconds and percent per component, and the SUT's µs per transaction.
func applyCPU(r *report.Result, before, after map[string]sample) {
	if r.CPUSeconds == nil {
		r.CPUSeconds = map[string]float64{}
	}
	if r.CPUPercent == nil {
		r.CPUPercent = map[string]float64{}
	}
	var sum float64
	for comp, a := range after {
		b, ok := before[comp]
		if !ok {
			continue
		}
		d := a.cpu - b.cpu
		r.CPUSeconds[comp] = d
		if wall := a.at.Sub(b.at).Seconds(); wall > 0 {
			r.CPUPercent[comp] = 100 * d / wall
		}
		sum += d
	}
	if r.Transactions > 0 && sum > 0 {
		r.SUTCPUUsTxn = sum * 1e6 / float64(r.Transactions)
	}
}

// RunAll runs every model trials times, interleaved (model A, B, ...,
// then again), and returns every run made; it stops at the first failure.
func RunAll(ctx context.Context, o Options, models []Model, trials int) ([]*Run, error) {
	s, err := kube.LoadState(o.Dir)
	if err != nil {
		return nil, err
	}
	c, err := kube.Client(o.Dir)
	if err != nil {
		return nil, err
	}
	var runs []*Run
	for t := 1; t <= trials; t++ {
		for _, m := range models {
			o.Log("%s: trial %d of %d", m.Name, t, trials)
			r, err := RunModel(ctx, o, c, s, m, t)
			if r != nil {
				runs = append(runs, r)
			}
			if err != nil {
				return runs, fmt.Errorf("%s trial %d: %w", m.Name, t, err)
			}
		}
	}
	return runs, nil
}

// lastLines is the end of a log, for an error message.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// podsReady waits until every pod of ns that no Job owns is Ready.
func podsReady(ctx context.Context, c kubernetes.Interface, ns string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last string
	for {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			last = ""
			for _, p := range pods.Items {
				if len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Kind == "Job" {
					continue
				}
				ready := false
				for _, cd := range p.Status.Conditions {
					if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
						ready = true
					}
				}
				if !ready {
					last = p.Name + " not Ready"
				}
			}
			if last == "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the chart's pods in %s not Ready after %v: %s (%v)", ns, d, last, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkNet1 finds the OCP's and the ABM's net1 addresses (Multus's
// network-status annotation) and counts the established connections the
// CGW's pod has to the OCP's and the OCP's pod to the ABM's.
func checkNet1(ctx context.Context, c kubernetes.Interface, s *kube.State, ns string, r *Run) error {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	podIP, net1 := map[string]string{}, map[string]string{}
	for _, p := range pods.Items {
		comp := p.Labels["app.kubernetes.io/component"]
		if comp != "cgw" && comp != "ocp" && comp != "abm" {
			continue
		}
		podIP[comp] = p.Status.PodIP
		if comp == "cgw" {
			continue
		}
		a, err := net1Addr(p)
		if err != nil {
			return err
		}
		net1[comp] = a
	}
	r.Net1, r.ABMNet1 = net1["ocp"], net1["abm"]
	if r.Net1 == "" || r.ABMNet1 == "" || podIP["cgw"] == "" || podIP["ocp"] == "" {
		return fmt.Errorf("no net1 address on the OCP or the ABM pod (or no CGW or OCP pod): Multus did not attach it")
	}
	if r.Net1Conns, err = kube.PodConnections(ctx, s, podIP["cgw"], r.Net1); err != nil {
		return err
	}
	r.OCPToABMNet1, err = kube.PodConnections(ctx, s, podIP["ocp"], r.ABMNet1)
	return err
}

// net1Addr is pod p's net1 address from Multus's network-status
// annotation ("" when it has none).
func net1Addr(p corev1.Pod) (string, error) {
	var st []struct {
		Interface string   `json:"interface"`
		IPs       []string `json:"ips"`
	}
	if err := json.Unmarshal([]byte(p.Annotations["k8s.v1.cni.cncf.io/network-status"]), &st); err != nil {
		return "", fmt.Errorf("the %s pod's network-status annotation: %w", p.Labels["app.kubernetes.io/component"], err)
	}
	for _, n := range st {
		if n.Interface == "net1" && len(n.IPs) > 0 {
			return n.IPs[0], nil
		}
	}
	return "", nil
}

// podStates says, a line per pod of ns, where it runs and why it is not
// Ready: its phase, conditions that are false, and each container's
// waiting or terminated reason.
func podStates(ctx context.Context, c kubernetes.Interface, ns string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "  cannot list them: " + err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cd := range p.Status.Conditions {
			if cd.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, "; %s %s %s", cd.Type, cd.Reason, cd.Message)
			}
		}
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			switch {
			case cs.State.Waiting != nil:
				fmt.Fprintf(&b, "; %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
				fmt.Fprintf(&b, "; %s exited %d: %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
			case !cs.Ready && cs.State.Running != nil:
				fmt.Fprintf(&b, "; %s running, not ready (restarts %d)", cs.Name, cs.RestartCount)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// saveLogs keeps every container's log of ns in out/logs (a failed run's
// evidence, before the namespace goes).
func saveLogs(ctx context.Context, c kubernetes.Interface, ns, out string) {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	dir := filepath.Join(out, "logs")
	_ = os.MkdirAll(dir, 0o755)
	for _, p := range pods.Items {
		for _, ct := range p.Spec.Containers {
			if l, err := kube.Logs(ctx, c, ns, p.Name, ct.Name, 8<<20); err == nil {
				_ = os.WriteFile(filepath.Join(dir, p.Name+"_"+ct.Name+".log"), []byte(l), 0o644)
			}
		}
	}
}

// measureNetwork measures the network alone from a pod on the load
// generator's node (the ABM's: the Job has not started yet) to the CGW's
// pod, in their network namespaces (a host-network pod's is its node's);
// on a Multus model between their net1 addresses, the path the CHF's own
// hops take.
func measureNetwork(ctx context.Context, o Options, s *kube.State, pods []corev1.Pod, multus bool) (lab.Network, error) {
	place := func(comp string) (lab.Place, error) {
		for _, p := range pods {
			if p.Labels["app.kubernetes.io/component"] != comp || p.Status.PodIP == "" {
				continue
			}
			if multus {
				// The CHF's hops take net1 here (CHF_NETWORK): so
				// does the probe, to the server's net1 address.
				a, err := net1Addr(p)
				if err != nil || a == "" {
					return lab.Place{}, fmt.Errorf("pod %s has no net1 address (%v)", p.Name, err)
				}
				ns, err := kube.PodNetns(ctx, s, p.Status.PodIP)
				return lab.Place{NS: ns, Addr: a}, err
			}
			if p.Spec.HostNetwork {
				for _, n := range s.Nodes {
					if n.Name == p.Spec.NodeName {
						return lab.Place{NS: n.Netns, Addr: p.Status.PodIP}, nil
					}
				}
				return lab.Place{}, fmt.Errorf("pod %s is on an unknown node %q", p.Name, p.Spec.NodeName)
			}
			ns, err := kube.PodNetns(ctx, s, p.Status.PodIP)
			return lab.Place{NS: ns, Addr: p.Status.PodIP}, err
		}
		return lab.Place{}, fmt.Errorf("no running %s pod", comp)
	}
	srv, err := place("cgw")
	if err != nil {
		return lab.Network{}, err
	}
	cli, err := place("abm")
	if err != nil {
		return lab.Network{}, err
	}
	return lab.MeasureNetwork(ctx, lab.NetworkConfig{Server: srv, Client: cli, Loadgen: o.Loadgen, IPerf3: o.IPerf3})
}
