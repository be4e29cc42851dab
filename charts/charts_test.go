// Package charts_test checks the Helm charts in this directory with a real
// helm binary: lint, render for every network model, decode every rendered
// object strictly with client-go's scheme (custom resources into the
// project's own structs), assert what each model promises, and check that
// the schema rejects bad values with a clear message.
//
// helm is found at $HELM, else <repo>/.tools/bin/helm (`make tools`
// installs it), else on PATH. Without it the tests skip, except under CI
// (CI=true), where they fail.
package charts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	kubeVersion = "1.33.0"
	// nadAPI makes helm render as if Multus' CRD were installed.
	nadAPI = "k8s.cni.cncf.io/v1/NetworkAttachmentDefinition"
	// release and namespace mirror the documented install commands.
	release   = "chf"
	namespace = "chf"
)

// helmBin returns the helm binary to use, skipping the test when there is
// none outside CI.
func helmBin(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if h := os.Getenv("HELM"); h != "" {
			helmPath = h
			return
		}
		if p, err := filepath.Abs(filepath.Join("..", ".tools", "bin", "helm")); err == nil {
			if _, err := os.Stat(p); err == nil {
				helmPath = p
				return
			}
		}
		if p, err := exec.LookPath("helm"); err == nil {
			helmPath = p
		}
	})
	if helmPath == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("helm not found ($HELM, ../.tools/bin/helm, PATH); `make tools` installs it")
		}
		t.Skip("helm not found ($HELM, ../.tools/bin/helm, PATH); run `make tools` to install it")
	}
	return helmPath
}

var (
	helmOnce sync.Once
	helmPath string
)

// helm runs the helm binary and returns its stdout, or an error carrying
// stderr.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin(t), args...)
	// Keep helm away from the user's repositories and caches.
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.Bytes(), nil
}

// model is one values file of a chart.
type model struct {
	chart                      string
	values                     string // file name inside the chart; "" for values.yaml alone
	hostNetwork, pinned, sriov bool
	cgwPort                    int32
}

var chfModels = []model{
	{chart: "chf", values: "", cgwPort: 8080},
	{chart: "chf", values: "values-baremetal.yaml", hostNetwork: true, cgwPort: 18080},
	{chart: "chf", values: "values-baremetal-pinned.yaml", hostNetwork: true, pinned: true, cgwPort: 18080},
	{chart: "chf", values: "values-calico-pinned.yaml", pinned: true, cgwPort: 8080},
	{chart: "chf", values: "values-sriov-pinned.yaml", pinned: true, sriov: true, cgwPort: 8080},
}

var loadgenModels = []model{
	{chart: "loadgen", values: ""},
	{chart: "loadgen", values: "values-baremetal.yaml", hostNetwork: true},
	{chart: "loadgen", values: "values-sriov.yaml", sriov: true},
}

func (m model) name() string {
	if m.values == "" {
		return m.chart + "/values.yaml"
	}
	return m.chart + "/" + m.values
}

func (m model) valuesArgs() []string {
	if m.values == "" {
		return nil
	}
	return []string{"-f", filepath.Join(m.chart, m.values)}
}

// TestValuesFilesCovered fails when a values file is added beside a chart
// without being added to the model tables above.
func TestValuesFilesCovered(t *testing.T) {
	known := map[string]bool{}
	for _, m := range append(slices.Clone(chfModels), loadgenModels...) {
		known[filepath.Join(m.chart, m.values)] = true
	}
	for _, p := range smallProfiles {
		known[filepath.FromSlash(p)] = true
	}
	for _, chart := range []string{"chf", "loadgen"} {
		files, err := filepath.Glob(filepath.Join(chart, "values-*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !known[f] {
				t.Errorf("%s has no entry in the test's model tables (or smallProfiles)", f)
			}
		}
		if _, err := os.Stat(filepath.Join(chart, "values.schema.json")); err != nil {
			t.Errorf("chart %s has no values.schema.json: %v", chart, err)
		}
	}
}

func TestLint(t *testing.T) {
	helmBin(t)
	for _, m := range append(slices.Clone(chfModels), loadgenModels...) {
		t.Run(m.name(), func(t *testing.T) {
			t.Parallel()
			args := append([]string{"lint", "--strict", "--kube-version", kubeVersion, m.chart}, m.valuesArgs()...)
			if _, err := helm(t, args...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// render runs helm template for a model with extra --set arguments.
func render(t *testing.T, m model, extra ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, m.chart, "--namespace", namespace,
		"--kube-version", kubeVersion, "--api-versions", nadAPI}
	args = append(args, m.valuesArgs()...)
	args = append(args, extra...)
	return helm(t, args...)
}

// objects is a rendered chart, decoded.
type objects struct {
	all          []runtime.Object
	deployments  map[string]*appsv1.Deployment // by component label
	services     map[string]*corev1.Service    // by name
	configMaps   map[string]*corev1.ConfigMap  // by name
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	pdbs         []*policyv1.PodDisruptionBudget
	jobs         []*batchv1.Job
	statefulSets []*appsv1.StatefulSet
	roles        []*rbacv1.Role
	roleBindings []*rbacv1.RoleBinding
	clusterRoles int
	serviceAccts []*corev1.ServiceAccount
	netpols      []*networkingv1.NetworkPolicy
	nads         []*networkAttachmentDefinition
	svcMonitors  []*serviceMonitor
	podMonitors  []*podMonitor
	pvcs         []*corev1.PersistentVolumeClaim
	pods         []*corev1.Pod
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes every document of a helm template output: built-in
// kinds with client-go's scheme and a strict serializer (unknown and
// duplicate fields are errors), custom resources into the project's structs
// with unknown fields disallowed.
func decodeStrict(t *testing.T, manifest []byte) *objects {
	t.Helper()
	ser := serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory,
		scheme.Scheme, scheme.Scheme, serializerjson.SerializerOptions{Yaml: true, Strict: true})
	o := &objects{
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		configMaps:  map[string]*corev1.ConfigMap{},
	}
	for i, doc := range docSep.Split(string(manifest), -1) {
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Fatalf("document %d is not strict YAML: %v\n%s", i, err, doc)
		}
		if string(js) == "null" {
			continue // comments only
		}
		var tm struct{ APIVersion, Kind string }
		if err := json.Unmarshal(js, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if tm.APIVersion == "k8s.cni.cncf.io/v1" && tm.Kind == "NetworkAttachmentDefinition" {
			var nad networkAttachmentDefinition
			dec := json.NewDecoder(bytes.NewReader(js))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&nad); err != nil {
				t.Fatalf("NetworkAttachmentDefinition: %v\n%s", err, doc)
			}
			o.nads = append(o.nads, &nad)
			continue
		}
		if tm.APIVersion == "monitoring.coreos.com/v1" && (tm.Kind == "ServiceMonitor" || tm.Kind == "PodMonitor") {
			dec := json.NewDecoder(bytes.NewReader(js))
			dec.DisallowUnknownFields()
			var err error
			if tm.Kind == "ServiceMonitor" {
				var sm serviceMonitor
				err = dec.Decode(&sm)
				o.svcMonitors = append(o.svcMonitors, &sm)
			} else {
				var pm podMonitor
				err = dec.Decode(&pm)
				o.podMonitors = append(o.podMonitors, &pm)
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", tm.Kind, err, doc)
			}
			continue
		}
		obj, gvk, err := ser.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("document %d (%s %s) does not decode strictly: %v\n%s", i, tm.APIVersion, tm.Kind, err, doc)
		}
		o.all = append(o.all, obj)
		switch v := obj.(type) {
		case *appsv1.Deployment:
			o.deployments[v.Labels["app.kubernetes.io/component"]] = v
		case *corev1.Service:
			o.services[v.Name] = v
		case *corev1.ConfigMap:
			o.configMaps[v.Name] = v
		case *autoscalingv2.HorizontalPodAutoscaler:
			o.hpas = append(o.hpas, v)
		case *policyv1.PodDisruptionBudget:
			o.pdbs = append(o.pdbs, v)
		case *batchv1.Job:
			o.jobs = append(o.jobs, v)
		case *appsv1.StatefulSet:
			o.statefulSets = append(o.statefulSets, v)
		case *rbacv1.Role:
			o.roles = append(o.roles, v)
		case *rbacv1.RoleBinding:
			o.roleBindings = append(o.roleBindings, v)
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			o.clusterRoles++
		case *corev1.ServiceAccount:
			o.serviceAccts = append(o.serviceAccts, v)
		case *networkingv1.NetworkPolicy:
			o.netpols = append(o.netpols, v)
		case *corev1.PersistentVolumeClaim:
			o.pvcs = append(o.pvcs, v)
		case *corev1.Pod:
			o.pods = append(o.pods, v)
		case *corev1.Namespace, *appsv1.DaemonSet:
			// deploy/ manifests only
		default:
			t.Fatalf("document %d: unexpected kind %v in the chart", i, gvk)
		}
	}
	return o
}

func renderDecoded(t *testing.T, m model, extra ...string) *objects {
	t.Helper()
	out, err := render(t, m, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeStrict(t, out)
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// checkHardened asserts the container security every CHF and loadgen pod
// must have: non-root, read-only root filesystem, no privilege escalation,
// every capability dropped.
func checkHardened(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s/%s: no securityContext", what, c.Name)
			continue
		}
		nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		uid := sc.RunAsUser
		if uid == nil && psc != nil {
			uid = psc.RunAsUser
		}
		if !nonRoot || (uid != nil && *uid == 0) {
			t.Errorf("%s/%s: may run as root", what, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: root filesystem is writable", what, c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: allows privilege escalation", what, c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
			t.Errorf("%s/%s: capabilities not all dropped: %+v", what, c.Name, sc.Capabilities)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s/%s: privileged", what, c.Name)
		}
	}
}

// guaranteedIntegerCPUs reports why a pod would not get exclusive CPUs from
// the static CPU manager: it must be Guaranteed QoS (every container with
// cpu and memory limits equal to requests) and ask for whole CPUs.
func guaranteedIntegerCPUs(spec corev1.PodSpec) error {
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okR := c.Resources.Requests[r]
			lim, okL := c.Resources.Limits[r]
			if !okR || !okL || req.Cmp(lim) != 0 {
				return fmt.Errorf("container %s: %s request %v != limit %v (not Guaranteed QoS)", c.Name, r, req.String(), lim.String())
			}
		}
		cpu := c.Resources.Limits[corev1.ResourceCPU]
		if cpu.MilliValue()%1000 != 0 {
			return fmt.Errorf("container %s: cpu %s is not an integer number of CPUs", c.Name, cpu.String())
		}
	}
	return nil
}

func TestChfModels(t *testing.T) {
	helmBin(t)
	for _, m := range chfModels {
		t.Run(m.name(), func(t *testing.T) {
			t.Parallel()
			o := renderDecoded(t, m)
			checkChf(t, m, o)
		})
	}
}

func checkChf(t *testing.T, m model, o *objects) {
	t.Helper()
	components := []string{"cgw", "ocp", "abm"}
	ports := map[string]int32{}
	for _, c := range components {
		d, ok := o.deployments[c]
		if !ok {
			t.Fatalf("no Deployment for %s", c)
		}
		spec := d.Spec.Template.Spec
		what := "deployment " + d.Name
		checkHardened(t, what, spec)
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", what, len(spec.Containers))
		}
		ctr := spec.Containers[0]
		if !slices.Equal(ctr.Args, []string{c}) {
			t.Errorf("%s: args %q, want [%s]", what, ctr.Args, c)
		}
		if len(ctr.Ports) == 0 || ctr.Ports[0].Name != "http" {
			t.Fatalf("%s: first port must be named http: %+v", what, ctr.Ports)
		}
		port := ctr.Ports[0].ContainerPort
		ports[c] = port
		if c == "cgw" && port != m.cgwPort {
			t.Errorf("%s: cgw port %d, want %d", what, port, m.cgwPort)
		}
		if v, _ := envValue(ctr, "CHF_LISTEN"); v != fmt.Sprintf(":%d", port) {
			t.Errorf("%s: CHF_LISTEN=%q does not listen on container port %d", what, v, port)
		}
		// The ABM calls no peer service: it has no discovery flags, so the
		// chart must not set them (chf abm would ignore them).
		peerless := c == "abm"
		if peerless {
			for _, e := range ctr.Env {
				if e.Name == "CHF_DISCOVERY" || e.Name == "CHF_K8S_NAMESPACE" || e.Name == "CHF_NETWORK" {
					t.Errorf("%s: sets %s, but the ABM has no peer to discover", what, e.Name)
				}
			}
		} else {
			if v, _ := envValue(ctr, "CHF_DISCOVERY"); v != "kubernetes" {
				t.Errorf("%s: CHF_DISCOVERY=%q, want kubernetes", what, v)
			}
			nsFromField := false
			for _, e := range ctr.Env {
				if e.Name == "CHF_K8S_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
					nsFromField = true
				}
			}
			if !nsFromField {
				t.Errorf("%s: CHF_K8S_NAMESPACE not from fieldRef metadata.namespace", what)
			}
		}
		// Probes on the chassis endpoints.
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"liveness", ctr.LivenessProbe, "/healthz"}, {"readiness", ctr.ReadinessProbe, "/readyz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
				t.Errorf("%s: %s probe must GET %s on port http: %+v", what, p.name, p.path, p.probe)
			}
		}
		// Service account with API access only where discovery needs it.
		if spec.ServiceAccountName == "" || spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken {
			t.Errorf("%s: needs its service account token for Kubernetes discovery", what)
		}
		// A headless Service selecting exactly these pods.
		svc, ok := o.services[d.Name]
		if !ok {
			t.Errorf("%s: no Service %s", what, d.Name)
		} else {
			if svc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("service %s: clusterIP %q, want None (headless)", svc.Name, svc.Spec.ClusterIP)
			}
			if !selects(svc.Spec.Selector, d.Spec.Template.Labels) || !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
				t.Errorf("service %s: selector %v does not select the pods %v", svc.Name, svc.Spec.Selector, d.Spec.Template.Labels)
			}
			if svc.Spec.Ports[0].Port != port {
				t.Errorf("service %s: port %d, want %d (same as the target, so either reading works)", svc.Name, svc.Spec.Ports[0].Port, port)
			}
		}
		// Fixed replicas (no HPA: a benchmark's system under test must not
		// change mid-run; values.yaml says why), with a disruption budget.
		if slices.ContainsFunc(o.hpas, func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
			return h.Spec.ScaleTargetRef.Kind == "Deployment" && h.Spec.ScaleTargetRef.Name == d.Name
		}) {
			t.Errorf("%s: a HorizontalPodAutoscaler, want none by default in a benchmark chart", what)
		} else if d.Spec.Replicas == nil {
			t.Errorf("%s: no replicas and no HPA", what)
		}
		if !slices.ContainsFunc(o.pdbs, func(p *policyv1.PodDisruptionBudget) bool {
			return p.Spec.Selector != nil && selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}) {
			t.Errorf("%s: no PodDisruptionBudget", what)
		}

		// Network model.
		if spec.HostNetwork != m.hostNetwork {
			t.Errorf("%s: hostNetwork %v, want %v", what, spec.HostNetwork, m.hostNetwork)
		}
		if m.hostNetwork {
			if spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				t.Errorf("%s: dnsPolicy %q, want ClusterFirstWithHostNet", what, spec.DNSPolicy)
			}
			for _, p := range ctr.Ports {
				if p.HostPort != p.ContainerPort {
					t.Errorf("%s: host network port %s: hostPort %d != containerPort %d", what, p.Name, p.HostPort, p.ContainerPort)
				}
			}
			if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
				t.Errorf("%s: host network pods need required anti-affinity (one per node)", what)
			}
		}
		err := guaranteedIntegerCPUs(spec)
		if m.pinned && err != nil {
			t.Errorf("%s: pinned model: %v", what, err)
		}
		if !m.pinned && err == nil {
			t.Errorf("%s: unpinned model unexpectedly Guaranteed with integer CPUs", what)
		}
		netAnn := d.Spec.Template.Annotations["k8s.v1.cni.cncf.io/networks"]
		chfNetwork, hasNetwork := envValue(ctr, "CHF_NETWORK")
		if m.sriov {
			var sel []multusNetworkSelection
			dec := json.NewDecoder(strings.NewReader(netAnn))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&sel); err != nil || len(sel) != 1 {
				t.Fatalf("%s: networks annotation %q: %v", what, netAnn, err)
			}
			if sel[0].Name != "sriov-chf" || sel[0].Namespace != namespace || sel[0].Interface != "net1" {
				t.Errorf("%s: networks annotation selects %+v", what, sel[0])
			}
			if !peerless && chfNetwork != sel[0].Name {
				t.Errorf("%s: CHF_NETWORK=%q, want the attached network %q", what, chfNetwork, sel[0].Name)
			}
			vf := corev1.ResourceName("intel.com/sriov_chf")
			req, lim := ctr.Resources.Requests[vf], ctr.Resources.Limits[vf]
			if req.Value() != 1 || lim.Value() != 1 {
				t.Errorf("%s: SR-IOV resource %s request %v limit %v, want 1 and 1", what, vf, req.String(), lim.String())
			}
		} else if netAnn != "" || hasNetwork {
			t.Errorf("%s: secondary network set outside the SR-IOV model (annotation %q, CHF_NETWORK %q)", what, netAnn, chfNetwork)
		}
	}
	// Ports never collide (host network puts them side by side).
	if ports["cgw"] == ports["ocp"] || ports["ocp"] == ports["abm"] || ports["cgw"] == ports["abm"] {
		t.Errorf("ports collide: %v", ports)
	}
	// The hops point at the peer Services on their ports.
	cgw, ocp, abm := o.deployments["cgw"].Spec.Template.Spec.Containers[0], o.deployments["ocp"].Spec.Template.Spec.Containers[0], o.deployments["abm"].Spec.Template.Spec.Containers[0]
	if v, _ := envValue(cgw, "CHF_OCP"); v != fmt.Sprintf("%s-ocp:%d", release, ports["ocp"]) {
		t.Errorf("cgw: CHF_OCP=%q", v)
	}
	// A create's Location names the CGW's Service, never the request's Host.
	if v, _ := envValue(cgw, "CHF_ADVERTISE"); !strings.Contains(v, "://"+release+"-cgw.") || !strings.HasSuffix(v, fmt.Sprintf(".svc:%d", ports["cgw"])) {
		t.Errorf("cgw: CHF_ADVERTISE=%q, want the cgw Service's DNS name and port", v)
	}
	if v, _ := envValue(ocp, "CHF_ABM"); v != fmt.Sprintf("%s-abm:%d", release, ports["abm"]) {
		t.Errorf("ocp: CHF_ABM=%q", v)
	}
	for _, p := range o.pods {
		checkHardened(t, "pod "+p.Name, p.Spec)
	}
	asHosts, _ := envValue(abm, "CHF_AEROSPIKE")
	checkAerospike(t, o, asHosts)
	checkRBAC(t, o)
	checkProvision(t, o, asHosts)
	checkNetworkPolicies(t, m, o)
	if m.sriov {
		if len(o.nads) != 1 {
			t.Fatalf("SR-IOV model renders %d NetworkAttachmentDefinitions, want 1", len(o.nads))
		}
		nad := o.nads[0]
		if nad.Name != "sriov-chf" || nad.Annotations["k8s.v1.cni.cncf.io/resourceName"] != "intel.com/sriov_chf" {
			t.Errorf("NetworkAttachmentDefinition %s: resourceName annotation %q", nad.Name, nad.Annotations["k8s.v1.cni.cncf.io/resourceName"])
		}
		var cni sriovCNIConfig
		dec := json.NewDecoder(strings.NewReader(nad.Spec.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cni); err != nil {
			t.Fatalf("NetworkAttachmentDefinition config: %v\n%s", err, nad.Spec.Config)
		}
		if cni.Type != "sriov" || cni.Name != nad.Name || cni.IPAM.Type == "" {
			t.Errorf("NetworkAttachmentDefinition config: %+v", cni)
		}
	} else if len(o.nads) != 0 {
		t.Errorf("%d NetworkAttachmentDefinitions outside the SR-IOV model", len(o.nads))
	}
}

// selects reports whether every selector label is among labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkAerospike(t *testing.T, o *objects, asHosts string) {
	t.Helper()
	if len(o.statefulSets) != 1 {
		t.Fatalf("%d StatefulSets, want the Aerospike one", len(o.statefulSets))
	}
	sts := o.statefulSets[0]
	spec := sts.Spec.Template.Spec
	checkHardened(t, "statefulset "+sts.Name, spec)
	if img := spec.Containers[0].Image; !strings.HasPrefix(img, "aerospike/aerospike-server:") {
		t.Errorf("Aerospike image %q is not the official aerospike/aerospike-server", img)
	}
	svc, ok := o.services[sts.Spec.ServiceName]
	if !ok || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Aerospike governing Service %q missing, not headless, or not publishing unready pods", sts.Spec.ServiceName)
	}
	var conf string
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			cm, ok := o.configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("Aerospike volume %s: ConfigMap %s not rendered", v.Name, v.ConfigMap.Name)
			}
			conf = cm.Data["aerospike.conf"]
		}
	}
	replicas := int(*sts.Spec.Replicas)
	if got := strings.Count(conf, "mesh-seed-address-port "); got != replicas {
		t.Errorf("aerospike.conf has %d mesh seeds for %d replicas", got, replicas)
	}
	if !strings.Contains(conf, "namespace chf {") {
		t.Errorf("aerospike.conf lacks namespace chf:\n%s", conf)
	}
	if got := len(strings.Split(asHosts, ",")); got != replicas {
		t.Errorf("CHF_AEROSPIKE=%q lists %d seeds, want %d", asHosts, got, replicas)
	}
	for h := range strings.SplitSeq(asHosts, ",") {
		if !strings.HasPrefix(h, sts.Name+"-") || !strings.HasSuffix(h, "."+sts.Spec.ServiceName+"."+namespace+".svc:3000") {
			t.Errorf("Aerospike seed %q is not a pod DNS name of %s", h, sts.Name)
		}
	}
}

// checkRBAC asserts the discovery permissions: one Role with get/list/watch
// on endpointslices and pods only, bound to the services' account, and
// nothing cluster-wide.
func checkRBAC(t *testing.T, o *objects) {
	t.Helper()
	if o.clusterRoles != 0 {
		t.Errorf("chart renders %d cluster-scoped RBAC objects", o.clusterRoles)
	}
	if len(o.roles) != 1 || len(o.roleBindings) != 1 || len(o.serviceAccts) != 1 {
		t.Fatalf("want 1 Role, RoleBinding and ServiceAccount, have %d, %d, %d", len(o.roles), len(o.roleBindings), len(o.serviceAccts))
	}
	allowed := map[string]string{"endpointslices": "discovery.k8s.io", "pods": ""}
	seen := map[string]bool{}
	for _, r := range o.roles[0].Rules {
		if len(r.NonResourceURLs) != 0 || len(r.ResourceNames) != 0 {
			t.Errorf("rule %+v: unexpected nonResourceURLs/resourceNames", r)
		}
		for _, v := range r.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("rule %+v: verb %q beyond get/list/watch", r, v)
			}
		}
		for _, res := range r.Resources {
			g, ok := allowed[res]
			if !ok || !slices.Equal(r.APIGroups, []string{g}) {
				t.Errorf("rule %+v: resource %q (groups %q) not allowed", r, res, r.APIGroups)
			}
			seen[res] = true
		}
	}
	if !seen["endpointslices"] || !seen["pods"] {
		t.Errorf("Role does not grant endpointslices and pods: %+v", o.roles[0].Rules)
	}
	rb := o.roleBindings[0]
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != o.roles[0].Name ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != o.serviceAccts[0].Name {
		t.Errorf("RoleBinding %+v does not bind Role %s to ServiceAccount %s", rb, o.roles[0].Name, o.serviceAccts[0].Name)
	}
	for c, d := range o.deployments {
		if d.Spec.Template.Spec.ServiceAccountName != o.serviceAccts[0].Name {
			t.Errorf("%s runs as %q, not the bound ServiceAccount", c, d.Spec.Template.Spec.ServiceAccountName)
		}
	}
}

func checkProvision(t *testing.T, o *objects, asHosts string) {
	t.Helper()
	if len(o.jobs) != 1 {
		t.Fatalf("%d Jobs, want the provisioning one", len(o.jobs))
	}
	j := o.jobs[0]
	if hook := j.Annotations["helm.sh/hook"]; hook != "post-install" {
		t.Errorf("provision Job hook %q, want post-install (never on upgrade: it would reset balances)", hook)
	}
	spec := j.Spec.Template.Spec
	checkHardened(t, "job "+j.Name, spec)
	ctr := spec.Containers[0]
	if !slices.Equal(ctr.Args, []string{"provision"}) {
		t.Errorf("provision Job args %q", ctr.Args)
	}
	if v, _ := envValue(ctr, "CHF_AEROSPIKE"); v != asHosts {
		t.Errorf("provision Job CHF_AEROSPIKE=%q, ABM uses %q", v, asHosts)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("provision Job mounts an API token it does not need")
	}
}

// checkNetworkPolicies asserts the request path is the only one allowed:
// a default deny for every pod of the release and one allow per hop.
func checkNetworkPolicies(t *testing.T, m model, o *objects) {
	t.Helper()
	byName := map[string]*networkingv1.NetworkPolicy{}
	for _, np := range o.netpols {
		byName[np.Name] = np
	}
	deny, ok := byName[release+"-default-deny"]
	if !ok || len(deny.Spec.Ingress) != 0 || len(deny.Spec.Egress) != 0 || len(deny.Spec.PolicyTypes) != 2 {
		t.Fatalf("no default-deny (ingress and egress) policy: %+v", deny)
	}
	for _, pod := range []*appsv1.Deployment{o.deployments["cgw"], o.deployments["ocp"], o.deployments["abm"]} {
		if !selects(deny.Spec.PodSelector.MatchLabels, pod.Spec.Template.Labels) {
			t.Errorf("default deny does not select %s", pod.Name)
		}
	}
	hop := func(name, from, to string, port int32) {
		t.Helper()
		np, ok := byName[name]
		if !ok {
			t.Errorf("no NetworkPolicy %s", name)
			return
		}
		if !selects(np.Spec.PodSelector.MatchLabels, o.deployments[to].Spec.Template.Labels) {
			t.Errorf("%s does not select the %s pods", name, to)
		}
		if len(np.Spec.Ingress) == 0 || np.Spec.Ingress[0].Ports[0].Port.IntVal != port {
			t.Errorf("%s: ingress %+v, want port %d", name, np.Spec.Ingress, port)
			return
		}
		peers := np.Spec.Ingress[0].From
		if len(peers) == 0 || peers[0].PodSelector == nil || !selects(peers[0].PodSelector.MatchLabels, o.deployments[from].Spec.Template.Labels) {
			t.Errorf("%s: first peer %+v is not the %s pods", name, peers, from)
		}
		for _, p := range peers[1:] {
			if p.IPBlock == nil || !m.hostNetwork {
				t.Errorf("%s: extra peer %+v (node CIDRs only on host network)", name, p)
			}
		}
	}
	hop(release+"-cgw-to-ocp", "cgw", "ocp", o.deployments["ocp"].Spec.Template.Spec.Containers[0].Ports[0].ContainerPort)
	hop(release+"-ocp-to-abm", "ocp", "abm", o.deployments["abm"].Spec.Template.Spec.Containers[0].Ports[0].ContainerPort)
	ing, ok := byName[release+"-cgw-ingress"]
	if !ok || len(ing.Spec.Ingress) != 1 || ing.Spec.Ingress[0].From[0].PodSelector.MatchLabels["chf-testbed/role"] != "loadgen" {
		t.Errorf("cgw ingress must admit only the loadgen pods: %+v", ing)
	}
	for _, name := range []string{"dns", "kube-api", "aerospike", "aerospike-clients-egress", "cgw-egress", "ocp-egress"} {
		if _, ok := byName[release+"-"+name]; !ok {
			t.Errorf("no NetworkPolicy %s-%s", release, name)
		}
	}
}

func TestLoadgenModels(t *testing.T) {
	helmBin(t)
	for _, m := range loadgenModels {
		t.Run(m.name(), func(t *testing.T) {
			t.Parallel()
			o := renderDecoded(t, m, "--set", "shards=3", "--set", "rate=30000")
			if len(o.jobs) != 1 {
				t.Fatalf("%d Jobs, want 1", len(o.jobs))
			}
			j := o.jobs[0]
			if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion ||
				*j.Spec.Completions != 3 || *j.Spec.Parallelism != 3 {
				t.Errorf("Job is not Indexed with 3 completions running in parallel: %+v", j.Spec)
			}
			spec := j.Spec.Template.Spec
			checkHardened(t, "job "+j.Name, spec)
			if j.Spec.Template.Labels["chf-testbed/role"] != "loadgen" {
				t.Errorf("pods lack the label the chf NetworkPolicy admits")
			}
			ctr := spec.Containers[0]
			args := strings.Join(ctr.Args, " ")
			for _, want := range []string{"run ", "--shard $(JOB_COMPLETION_INDEX)/3", "--rate 30000", "--json /results/shard-$(JOB_COMPLETION_INDEX).json", "--target http://chf-cgw:"} {
				if !strings.Contains(args, want) {
					t.Errorf("loadgen args %q lack %q", args, want)
				}
			}
			if spec.HostNetwork != m.hostNetwork && m.hostNetwork {
				// The bare-metal values only retarget; load pods may stay on the pod network.
				t.Logf("load pods on pod network against host-network CGW")
			}
			if m.sriov {
				if j.Spec.Template.Annotations["k8s.v1.cni.cncf.io/networks"] == "" {
					t.Errorf("SR-IOV load pods lack the networks annotation")
				}
				if q := ctr.Resources.Limits["intel.com/sriov_chf"]; q.Value() != 1 {
					t.Errorf("SR-IOV load pods lack the VF resource")
				}
			}
			if len(spec.Containers) != 2 || spec.Containers[1].Name != "results" {
				t.Errorf("pod mode needs the results holder container: %d containers", len(spec.Containers))
			}
		})
	}
	t.Run("pvc", func(t *testing.T) {
		t.Parallel()
		o := renderDecoded(t, loadgenModels[0], "--set", "results.mode=pvc")
		o.pods = slices.DeleteFunc(o.pods, func(p *corev1.Pod) bool { return p.Annotations["helm.sh/hook"] == "test" })
		if len(o.pvcs) != 1 || len(o.pods) != 1 {
			t.Fatalf("pvc mode: %d claims and %d reader pods, want 1 and 1", len(o.pvcs), len(o.pods))
		}
		checkHardened(t, "reader", o.pods[0].Spec)
		spec := o.jobs[0].Spec.Template.Spec
		if len(spec.Containers) != 1 || spec.Volumes[0].PersistentVolumeClaim == nil || spec.Volumes[0].PersistentVolumeClaim.ClaimName != o.pvcs[0].Name {
			t.Errorf("pvc mode: shards do not write to the claim %s", o.pvcs[0].Name)
		}
	})
}

// TestSchemaRejections renders bad values and expects helm to refuse them
// with a message naming the problem.
func TestSchemaRejections(t *testing.T) {
	helmBin(t)
	base, pinned, sriov := chfModels[0], chfModels[3], chfModels[4]
	lg := loadgenModels[0]
	for _, tc := range []struct {
		name string
		m    model
		set  []string
		want string
	}{
		{"unknown top-level key", base, []string{"--set", "cwg.port=1"}, "additional properties 'cwg' not allowed"},
		{"unknown component key", base, []string{"--set", "cgw.prot=1"}, "additional properties 'prot' not allowed"},
		{"port out of range", base, []string{"--set", "ocp.port=70000"}, "/ocp/port"},
		{"bad discovery", base, []string{"--set", "discovery=static"}, "/discovery"},
		{"bad log level", base, []string{"--set", "logLevel=loud"}, "/logLevel"},
		{"root container", base, []string{"--set", "containerSecurityContext.runAsNonRoot=false"}, "/containerSecurityContext/runAsNonRoot"},
		{"bad quantity", base, []string{"--set", "abm.resources.limits.memory=lots"}, "/abm/resources/limits/memory"},
		{"bad external host", base, []string{"--set", "aerospike.external.hosts={nohostport}"}, "/aerospike/external/hosts/0"},
		{"bad currency", base, []string{"--set", "provision.currency=euro"}, "/provision/currency"},
		{"bad sweep duration", base, []string{"--set", "abm.reservationSweep=soon"}, "/abm/reservationSweep"},
		{"bad admission mode", base, []string{"--set", "cgw.admission.mode=gradient"}, "/cgw/admission/mode"},
		{"bad admission target", base, []string{"--set-string", "cgw.admission.target=5"}, "/cgw/admission/target"},
		{"colliding ports", base, []string{"--set", "ocp.port=8080"}, "ports must not collide"},
		{"pinned fractional cpu", pinned, []string{"--set", "ocp.resources.requests.cpu=1.5", "--set", "ocp.resources.limits.cpu=1.5"}, "integer number of CPUs in ocp.resources.limits.cpu"},
		{"pinned burstable", pinned, []string{"--set", "abm.resources.requests.memory=1Gi"}, "abm.resources.requests.memory (1Gi) equal to limits.memory"},
		{"pinning without resources", base, []string{"--set", "cpuPinning=true"}, "Guaranteed QoS"},
		{"host network without node CIDRs", base, []string{"--set", "network.hostNetwork=true"}, "networkPolicy.nodeCIDRs"},
		{"host network wrong DNS", chfModels[1], []string{"--set", "network.dnsPolicy=ClusterFirst"}, "ClusterFirstWithHostNet"},
		{"multus config not JSON", sriov, []string{"--set-string", "network.multus.config=[bad"}, "network.multus.config is not valid JSON"},
		{"multus name mismatch", sriov, []string{"--set", "network.multus.name=other"}, `config's "name" (sriov-chf) must equal network.multus.name (other)`},
		{"bad SR-IOV resource name", sriov, []string{"--set", "network.multus.resourceName=sriov"}, "/network/multus/resourceName"},
		{"aslite and external", base, []string{"--set", "aerospike.aslite.enabled=true", "--set", "aerospike.external.hosts={as1:3000}"}, "aerospike.aslite.enabled=true and aerospike.external.hosts are exclusive"},
		{"bad aslite clusterIP", base, []string{"--set", "aerospike.aslite.clusterIP=store"}, "/aerospike/aslite/clusterIP"},
		{"bad cgw clusterIP", base, []string{"--set", "cgw.clusterIP=None"}, "/cgw/clusterIP"},
		{"loadgen without target", lg, []string{"--set", "target="}, "/target"},
		{"loadgen bad target", lg, []string{"--set", "target=chf-cgw:8080"}, "/target"},
		{"loadgen zero shards", lg, []string{"--set", "shards=0"}, "/shards"},
		{"loadgen bad results mode", lg, []string{"--set", "results.mode=s3"}, "/results/mode"},
		{"loadgen empty operator token key", lg, []string{"--set", "operator.tokenKey="}, "/operator/tokenKey"},
		{"loadgen unknown operator key", lg, []string{"--set", "operator.secret=x"}, "additional properties 'secret' not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := render(t, tc.m, tc.set...)
			if err == nil {
				t.Fatalf("helm template accepted %q:\n%.400s", tc.set, out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}

// TestAerospikeExternal checks that external hosts replace the StatefulSet
// and reach ABM and the provisioning Job.
func TestAerospikeExternal(t *testing.T) {
	helmBin(t)
	o := renderDecoded(t, chfModels[0], "--set", "aerospike.external.hosts={as1.db:3000,as2.db:3000}")
	if len(o.statefulSets) != 0 {
		t.Errorf("external Aerospike still renders %d StatefulSets", len(o.statefulSets))
	}
	abm := o.deployments["abm"].Spec.Template.Spec.Containers[0]
	if v, _ := envValue(abm, "CHF_AEROSPIKE"); v != "as1.db:3000,as2.db:3000" {
		t.Errorf("abm CHF_AEROSPIKE=%q", v)
	}
	if v, _ := envValue(o.jobs[0].Spec.Template.Spec.Containers[0], "CHF_AEROSPIKE"); v != "as1.db:3000,as2.db:3000" {
		t.Errorf("provision CHF_AEROSPIKE=%q", v)
	}
}
