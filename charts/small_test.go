package charts_test

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The small-node profiles: values files layered over a network model, not
// models of their own (TestValuesFilesCovered knows them from here).
var smallProfiles = []string{
	"chf/values-small.yaml",
	"chf/values-small-pinned.yaml",
	"loadgen/values-small.yaml",
	"loadgen/values-small-pinned.yaml",
}

// The fixed Service addresses of the small profiles, in the node's Service
// CIDR (10.0.0.0/24, 10.0.0.1 being the kubernetes Service).
var (
	smallServiceCIDR = netip.MustParsePrefix("10.0.0.0/24")
	smallStoreIP     = netip.MustParseAddr("10.0.0.20")
	smallCGWIP       = netip.MustParseAddr("10.0.0.21")
)

// The node the small profiles are for: 2 CPUs, one of which the kubelet
// may reserve (reservedSystemCPUs with the static CPU manager), so the
// requests of every pod must fit the other; a few GiB of memory.
var (
	smallAllocatableCPU = resource.MustParse("1")
	smallMemoryLimits   = resource.MustParse("4Gi")
)

// smallCombo is one documented install on a small node: the chf chart with
// values-small.yaml, a model file and, for a pinned model,
// values-small-pinned.yaml; the loadgen chart with its small profile(s).
type smallCombo struct {
	model  model
	pinned bool
}

func (c smallCombo) chfArgs() []string {
	args := []string{"-f", filepath.Join("chf", "values-small.yaml")}
	args = append(args, c.model.valuesArgs()...)
	if c.pinned {
		args = append(args, "-f", filepath.Join("chf", "values-small-pinned.yaml"))
	}
	return args
}

func (c smallCombo) loadgenArgs() []string {
	args := []string{"-f", filepath.Join("loadgen", "values-small.yaml")}
	if c.pinned {
		args = append(args, "-f", filepath.Join("loadgen", "values-small-pinned.yaml"))
	}
	if c.model.hostNetwork {
		// The bare-metal models move the CGW's port (README).
		args = append(args, "--set", "target=http://10.0.0.21:18080")
	}
	return args
}

func smallCombos() []smallCombo {
	var cs []smallCombo
	for _, m := range chfModels {
		cs = append(cs, smallCombo{model: m, pinned: m.pinned})
	}
	return cs
}

// renderWith renders a chart with exactly the given values files.
func renderWith(t *testing.T, chart string, args ...string) *objects {
	t.Helper()
	all := append([]string{"template", release, chart, "--namespace", namespace,
		"--kube-version", kubeVersion, "--api-versions", nadAPI}, args...)
	out, err := helm(t, all...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeStrict(t, out)
}

// podWorkload is a workload's pod spec and how many pods run it: replicas,
// or a Job's parallelism.
type podWorkload struct {
	what string
	n    int64
	spec corev1.PodSpec
}

func workloads(o *objects) []podWorkload {
	var ws []podWorkload
	for c, d := range o.deployments {
		n := int64(1)
		if d.Spec.Replicas != nil {
			n = int64(*d.Spec.Replicas)
		}
		ws = append(ws, podWorkload{"deployment " + c, n, d.Spec.Template.Spec})
	}
	for _, s := range o.statefulSets {
		ws = append(ws, podWorkload{"statefulset " + s.Name, int64(*s.Spec.Replicas), s.Spec.Template.Spec})
	}
	for _, j := range o.jobs {
		n := int64(1)
		if j.Spec.Parallelism != nil {
			n = int64(*j.Spec.Parallelism)
		}
		ws = append(ws, podWorkload{"job " + j.Name, n, j.Spec.Template.Spec})
	}
	return ws
}

// TestSmallProfiles renders every documented small-node install (each
// model file with the small profile, and the loadgen small profile beside
// it) and checks what a 2-CPU node without DNS or registry needs.
func TestSmallProfiles(t *testing.T) {
	helmBin(t)
	for _, c := range smallCombos() {
		t.Run(c.model.name(), func(t *testing.T) {
			t.Parallel()
			lintArgs := append([]string{"lint", "--strict", "--kube-version", kubeVersion, "chf"}, c.chfArgs()...)
			if _, err := helm(t, lintArgs...); err != nil {
				t.Fatal(err)
			}
			o := renderWith(t, "chf", c.chfArgs()...)
			lg := renderWith(t, "loadgen", c.loadgenArgs()...)
			checkSmallChf(t, c, o)
			checkSmallLoadgen(t, c, o, lg)
			checkSmallBudget(t, c, o, lg)
		})
	}
}

func checkSmallChf(t *testing.T, c smallCombo, o *objects) {
	t.Helper()
	if len(o.statefulSets) != 0 || len(o.hpas) != 0 || len(o.pvcs) != 0 {
		t.Errorf("%d StatefulSets, %d HPAs, %d claims: want none on a small node", len(o.statefulSets), len(o.hpas), len(o.pvcs))
	}
	for _, comp := range []string{"cgw", "ocp", "abm", "aslite"} {
		d, ok := o.deployments[comp]
		if !ok {
			t.Fatalf("no Deployment for %s", comp)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("%s: replicas %v, want 1", comp, d.Spec.Replicas)
		}
		spec := d.Spec.Template.Spec
		checkHardened(t, "deployment "+d.Name, spec)
		ctr := spec.Containers[0]
		// GOMAXPROCS from a CPU limit of 1.
		if lim := ctr.Resources.Limits[corev1.ResourceCPU]; lim.Cmp(resource.MustParse("1")) != 0 {
			t.Errorf("%s: cpu limit %s, want 1 (CHF_GOMAXPROCS follows it)", comp, lim.String())
		}
		if !slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
			return e.Name == "CHF_GOMAXPROCS" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.cpu"
		}) {
			t.Errorf("%s: CHF_GOMAXPROCS does not follow limits.cpu", comp)
		}
		// No env value names a Service by DNS (there is none).
		for _, e := range ctr.Env {
			if strings.Contains(e.Value, ".svc") {
				t.Errorf("%s: %s=%q needs cluster DNS", comp, e.Name, e.Value)
			}
		}
		if comp == "cgw" || comp == "ocp" {
			if v, _ := envValue(ctr, "CHF_DISCOVERY"); v != "kubernetes" {
				t.Errorf("%s: CHF_DISCOVERY=%q: only EndpointSlice discovery works without DNS", comp, v)
			}
		}
	}
	checkChfImages(t, o)

	// The store: aslite, by its fixed address.
	as := o.deployments["aslite"]
	actr := as.Spec.Template.Spec.Containers[0]
	if !slices.Equal(actr.Command, []string{"/usr/local/bin/aslite"}) || !slices.Contains(actr.Args, "--listen") || !slices.Contains(actr.Args, "--namespace") {
		t.Errorf("aslite: command %q args %q", actr.Command, actr.Args)
	}
	if as.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("aslite: strategy %q, want Recreate (never two stores)", as.Spec.Strategy.Type)
	}
	if p := actr.ReadinessProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port.String() != "service" ||
		len(actr.Ports) != 1 || actr.Ports[0].Name != "service" || actr.Ports[0].ContainerPort != 3000 {
		t.Errorf("aslite: readiness probe %+v on ports %+v, want a TCP check of 3000", p, actr.Ports)
	}
	svc, ok := o.services[release+"-aslite"]
	if !ok {
		t.Fatalf("no Service %s-aslite", release)
	}
	if svc.Spec.ClusterIP != smallStoreIP.String() || !selects(svc.Spec.Selector, as.Spec.Template.Labels) || svc.Spec.Ports[0].Port != 3000 {
		t.Errorf("aslite Service: clusterIP %q selector %v port %d", svc.Spec.ClusterIP, svc.Spec.Selector, svc.Spec.Ports[0].Port)
	}
	abm := o.deployments["abm"].Spec.Template.Spec.Containers[0]
	hosts, _ := envValue(abm, "CHF_AEROSPIKE")
	ap, err := netip.ParseAddrPort(hosts)
	if err != nil || ap.Addr() != smallStoreIP || ap.Port() != 3000 {
		t.Errorf("abm CHF_AEROSPIKE=%q, want the store's address %s:3000 (%v)", hosts, smallStoreIP, err)
	}
	checkProvision(t, o, hosts)
	if v, _ := envValue(o.jobs[0].Spec.Template.Spec.Containers[0], "CHF_ACCOUNTS"); len(v) != 4 {
		t.Errorf("provision CHF_ACCOUNTS=%q, want a few thousand", v)
	}

	// The CGW by its fixed address; its Location names that address too.
	cgwSvc := o.services[release+"-cgw"]
	if cgwSvc == nil || cgwSvc.Spec.ClusterIP != smallCGWIP.String() {
		t.Fatalf("cgw Service: %+v, want clusterIP %s", cgwSvc, smallCGWIP)
	}
	cgw := o.deployments["cgw"].Spec.Template.Spec.Containers[0]
	if v, _ := envValue(cgw, "CHF_ADVERTISE"); v != "http://"+netip.AddrPortFrom(smallCGWIP, uint16(cgw.Ports[0].ContainerPort)).String() {
		t.Errorf("cgw CHF_ADVERTISE=%q, want its fixed address", v)
	}
	if o.configMaps[release+"-config"].Data["aerospike-hosts"] != hosts {
		t.Errorf("the ConfigMap's aerospike-hosts differs from CHF_AEROSPIKE")
	}
	for _, ip := range []netip.Addr{smallStoreIP, smallCGWIP} {
		if !smallServiceCIDR.Contains(ip) || ip == smallServiceCIDR.Addr().Next() {
			t.Errorf("%s is outside the Service CIDR %s or is the kubernetes Service", ip, smallServiceCIDR)
		}
	}

	// NetworkPolicies still allow abm and provision to reach the store.
	policy := func(name string) *networkingv1.NetworkPolicy {
		t.Helper()
		for _, np := range o.netpols {
			if np.Name == name {
				return np
			}
		}
		t.Fatalf("no NetworkPolicy %s", name)
		return nil
	}
	in := policy(release + "-aerospike")
	if !selects(in.Spec.PodSelector.MatchLabels, as.Spec.Template.Labels) || len(in.Spec.Ingress) != 1 || in.Spec.Ingress[0].Ports[0].Port.IntVal != 3000 {
		t.Errorf("store ingress policy %+v does not admit port 3000 of the aslite pods (and only that)", in.Spec)
	}
	exprs := in.Spec.Ingress[0].From[0].PodSelector.MatchExpressions
	if len(exprs) != 2 || !slices.Equal(exprs[1].Values, []string{"abm", "provision"}) {
		t.Errorf("store ingress admits %+v, want abm and provision", exprs)
	}
	eg := policy(release + "-aerospike-clients-egress")
	if to := eg.Spec.Egress[0].To; len(to) != 1 || !selects(to[0].PodSelector.MatchLabels, as.Spec.Template.Labels) {
		t.Errorf("abm/provision egress %+v does not reach the aslite pods", eg.Spec.Egress)
	}

	// The pinned models on 2 CPUs: the CGW alone is pinned.
	pinned := 0
	for comp, d := range o.deployments {
		if guaranteedIntegerCPUs(d.Spec.Template.Spec) == nil {
			pinned++
			if comp != "cgw" {
				t.Errorf("%s is pinned; only the cgw fits", comp)
			}
		}
	}
	if want := map[bool]int{true: 1, false: 0}[c.pinned]; pinned != want {
		t.Errorf("%d pinned Deployments, want %d", pinned, want)
	}
	// The SR-IOV model: an attachment without config (each node's own
	// file of its name gives the macvlan and the node's range), no VF
	// resource.
	if c.model.sriov {
		if len(o.nads) != 1 {
			t.Fatalf("%d NetworkAttachmentDefinitions, want 1", len(o.nads))
		}
		if o.nads[0].Spec.Config != "" || o.nads[0].Annotations["k8s.v1.cni.cncf.io/resourceName"] != "" {
			t.Errorf("SR-IOV on a small node needs an attachment without config (the node's file) and without a device resource: config %q, annotations %v",
				o.nads[0].Spec.Config, o.nads[0].Annotations)
		}
	}
	for _, w := range workloads(o) {
		for _, ctr := range w.spec.Containers {
			for r := range ctr.Resources.Requests {
				if strings.Contains(string(r), "/") {
					t.Errorf("%s requests the extended resource %s, which a small node lacks", w.what, r)
				}
			}
		}
	}
}

// checkChfImages: every container of the chf chart runs the chf image,
// used when present.
func checkChfImages(t *testing.T, o *objects) {
	t.Helper()
	for _, w := range workloads(o) {
		for _, ctr := range w.spec.Containers {
			if ctr.Image != "chf-testbed/chf:0.1.0" {
				t.Errorf("%s/%s: image %q, want chf-testbed/chf:0.1.0 (the imported one)", w.what, ctr.Name, ctr.Image)
			}
			if ctr.ImagePullPolicy != corev1.PullIfNotPresent && ctr.ImagePullPolicy != corev1.PullNever {
				t.Errorf("%s/%s: imagePullPolicy %q would pull", w.what, ctr.Name, ctr.ImagePullPolicy)
			}
		}
	}
}

func checkSmallLoadgen(t *testing.T, c smallCombo, chf, o *objects) {
	t.Helper()
	if len(o.jobs) != 1 || len(o.pvcs) != 0 {
		t.Fatalf("loadgen: %d Jobs and %d claims, want 1 and 0", len(o.jobs), len(o.pvcs))
	}
	j := o.jobs[0]
	if *j.Spec.Parallelism != 2 || j.Annotations["chf-testbed/results-mode"] != "log" {
		t.Errorf("loadgen: %d shards, results mode %q, want 2 and log", *j.Spec.Parallelism, j.Annotations["chf-testbed/results-mode"])
	}
	spec := j.Spec.Template.Spec
	checkHardened(t, "job "+j.Name, spec)
	if len(spec.Containers) != 1 || len(spec.Volumes) != 1 || spec.Volumes[0].Name != "tmp" {
		t.Errorf("log mode: %d containers and volumes %+v, want the loadgen alone with its /tmp", len(spec.Containers), spec.Volumes)
	}
	ctr := spec.Containers[0]
	if ctr.Image != "chf-testbed/loadgen:0.1.0" || (ctr.ImagePullPolicy != corev1.PullIfNotPresent && ctr.ImagePullPolicy != corev1.PullNever) {
		t.Errorf("loadgen image %q pull policy %q", ctr.Image, ctr.ImagePullPolicy)
	}
	args := strings.Join(ctr.Args, " ")
	if !strings.Contains(args, "--result-log") || strings.Contains(args, "--json") || strings.Contains(args, "--cpu") || strings.Contains(args, ".svc") {
		t.Errorf("loadgen args %q: want --result-log, no --json, no --cpu, no DNS name", args)
	}
	// The target is the cgw Service's fixed address and port.
	target, _ := argValue(ctr.Args, "--target")
	svc := chf.services[release+"-cgw"]
	if want := "http://" + netip.AddrPortFrom(smallCGWIP, uint16(svc.Spec.Ports[0].Port)).String(); target != want {
		t.Errorf("loadgen --target %q, want the cgw Service %q", target, want)
	}
	subs, _ := argValue(ctr.Args, "--subscribers")
	accounts, _ := envValue(chf.jobs[0].Spec.Template.Spec.Containers[0], "CHF_ACCOUNTS")
	ns, err1 := strconv.Atoi(subs)
	na, err2 := strconv.Atoi(accounts)
	if err1 != nil || err2 != nil || ns <= 0 || ns > na {
		t.Errorf("loadgen --subscribers %q, want within the %q provisioned accounts", subs, accounts)
	}
}

// checkSmallBudget: the CPU requests of every pod (services, store,
// provisioning Job, load shards) fit the CPU left when the other is
// reserved; their memory limits fit a few GiB.
func checkSmallBudget(t *testing.T, c smallCombo, chf, lg *objects) {
	t.Helper()
	var cpu, mem resource.Quantity
	var lines []string
	for _, w := range append(workloads(chf), workloads(lg)...) {
		for _, ctr := range w.spec.Containers {
			for i := int64(0); i < w.n; i++ {
				cpu.Add(ctr.Resources.Requests[corev1.ResourceCPU])
				mem.Add(ctr.Resources.Limits[corev1.ResourceMemory])
			}
			if _, ok := ctr.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s/%s: no memory limit", w.what, ctr.Name)
			}
			r := ctr.Resources.Requests[corev1.ResourceCPU]
			lines = append(lines, w.what+"/"+ctr.Name+" × "+resource.NewQuantity(w.n, resource.DecimalSI).String()+": cpu "+r.String())
		}
	}
	if cpu.Cmp(smallAllocatableCPU) > 0 {
		t.Errorf("CPU requests sum to %s, more than the %s a 2-CPU node with one reserved CPU allocates:\n%s", cpu.String(), smallAllocatableCPU.String(), strings.Join(lines, "\n"))
	}
	if mem.Cmp(smallMemoryLimits) > 0 {
		t.Errorf("memory limits sum to %s, more than %s", mem.String(), smallMemoryLimits.String())
	}
	t.Logf("small profile on %s (pinned %v): CPU requests %s, memory limits %s", c.model.name(), c.pinned, cpu.String(), mem.String())
}

// TestSmallPinnedNeedsItsLayer: a pinned model over values-small.yaml alone
// keeps the model's whole CPUs and does not fit; the README says to add
// values-small-pinned.yaml.
func TestSmallPinnedNeedsItsLayer(t *testing.T) {
	helmBin(t)
	o := renderWith(t, "chf", "-f", filepath.Join("chf", "values-small.yaml"), "-f", filepath.Join("chf", "values-calico-pinned.yaml"))
	var cpu resource.Quantity
	for _, w := range workloads(o) {
		for _, ctr := range w.spec.Containers {
			cpu.Add(ctr.Resources.Requests[corev1.ResourceCPU])
		}
	}
	if cpu.Cmp(resource.MustParse("2")) <= 0 {
		t.Errorf("calico-pinned over values-small.yaml requests %s CPUs: the README's warning is stale", cpu.String())
	}
}

// TestSmallStoreFlagsAccepted: the aslite container's args and environment
// are accepted by the store's own flag parsing (`chf aslite`, the same
// command as /usr/local/bin/aslite).
func TestSmallStoreFlagsAccepted(t *testing.T) {
	helmBin(t)
	if testing.Short() {
		t.Skip("builds ./cmd/chf; skipped with -short")
	}
	o := renderWith(t, "chf", "-f", filepath.Join("chf", "values-small.yaml"))
	bin := buildChf(t)
	spec := o.deployments["aslite"].Spec.Template.Spec
	ctr := *spec.Containers[0].DeepCopy()
	ctr.Args = append([]string{"aslite"}, ctr.Args...)
	checkFlags(t, bin, o, spec, ctr)
	for _, c := range []string{"cgw", "ocp", "abm"} {
		spec := o.deployments[c].Spec.Template.Spec
		checkFlags(t, bin, o, spec, spec.Containers[0])
	}
	spec = o.jobs[0].Spec.Template.Spec
	checkFlags(t, bin, o, spec, spec.Containers[0])
}

// TestSmallLoadgenFlagsAccepted: loadgen run accepts the small profile's
// Job arguments (--result-log among them).
func TestSmallLoadgenFlagsAccepted(t *testing.T) {
	helmBin(t)
	bin := buildLoadgen(t)
	o := renderWith(t, "loadgen", "-f", filepath.Join("loadgen", "values-small.yaml"), "--set", "startDelay=1m")
	var args []string
	for _, a := range o.jobs[0].Spec.Template.Spec.Containers[0].Args {
		args = append(args, strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", "1"))
	}
	code, out := runCheckFlags(t, bin, append(args, "--check-flags")...)
	if code != 0 {
		t.Fatalf("loadgen %q --check-flags: exit %d\n%s", args, code, out)
	}
}

// TestAsliteWithoutClusterIP: without a fixed address the store is named
// by its Service's DNS name (a cluster with DNS), and no StatefulSet or
// Aerospike PDB is rendered.
func TestAsliteWithoutClusterIP(t *testing.T) {
	helmBin(t)
	o := renderWith(t, "chf", "--set", "aerospike.aslite.enabled=true")
	if len(o.statefulSets) != 0 || slices.ContainsFunc(o.pdbs, func(p *policyv1.PodDisruptionBudget) bool { return p.Name == release+"-aerospike" }) {
		t.Errorf("aslite still renders the Aerospike StatefulSet or its PDB")
	}
	want := release + "-aslite." + namespace + ".svc:3000"
	for what, ctr := range map[string]corev1.Container{"abm": o.deployments["abm"].Spec.Template.Spec.Containers[0], "provision": o.jobs[0].Spec.Template.Spec.Containers[0]} {
		if v, _ := envValue(ctr, "CHF_AEROSPIKE"); v != want {
			t.Errorf("%s CHF_AEROSPIKE=%q, want %q", what, v, want)
		}
	}
	if svc := o.services[release+"-aslite"]; svc == nil || svc.Spec.ClusterIP != "" {
		t.Errorf("aslite Service %+v: want a cluster-assigned address", svc)
	}
}
