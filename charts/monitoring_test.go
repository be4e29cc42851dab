package charts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	_ "github.com/chf-testbed/testbed/abm"          // registers chf_abm_*
	_ "github.com/chf-testbed/testbed/cgw"          // registers chf_cgw_*
	_ "github.com/chf-testbed/testbed/cgw/diameter" // registers chf_gy_*
	_ "github.com/chf-testbed/testbed/chassis/rpc"  // registers chf_rpc_*
	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/live"
)

// TestMonitoring renders the monitors, the dashboard ConfigMap and the
// scrape NetworkPolicy rules, decodes them strictly, and checks what they
// select; by default none of them is rendered.
func TestMonitoring(t *testing.T) {
	helmBin(t)
	m := chfModels[0]
	o := renderDecoded(t, m)
	if len(o.svcMonitors)+len(o.podMonitors) != 0 {
		t.Errorf("monitors rendered by default")
	}
	if _, ok := o.configMaps[release+"-dashboard"]; ok {
		t.Errorf("dashboard rendered by default")
	}
	o = renderDecoded(t, m, "--set", "metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true,metrics.dashboard.enabled=true,metrics.scrapeNamespace=monitoring",
		"--set", "metrics.serviceMonitor.labels.release=prom")
	if len(o.svcMonitors) != 1 || len(o.podMonitors) != 1 {
		t.Fatalf("%d ServiceMonitors and %d PodMonitors, want 1 and 1", len(o.svcMonitors), len(o.podMonitors))
	}
	sm, pm := o.svcMonitors[0], o.podMonitors[0]
	if sm.Labels["release"] != "prom" {
		t.Errorf("ServiceMonitor labels %v lack release=prom", sm.Labels)
	}
	for _, c := range []string{"cgw", "ocp", "abm"} {
		svc := o.services[release+"-"+c]
		if svc == nil {
			t.Fatalf("no Service %s-%s", release, c)
		}
		if !matchesSelector(t, sm.Spec.Selector.MatchExpressions, svc.Labels) {
			t.Errorf("ServiceMonitor does not select Service %s", svc.Name)
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1ServicePort) bool { return p.Name == sm.Spec.Endpoints[0].Port }) {
			t.Errorf("Service %s has no port %q", svc.Name, sm.Spec.Endpoints[0].Port)
		}
		d := o.deployments[c]
		if !matchesSelector(t, pm.Spec.Selector.MatchExpressions, d.Spec.Template.Labels) {
			t.Errorf("PodMonitor does not select the %s pods", c)
		}
		if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Ports, func(p corev1ContainerPort) bool { return p.Name == pm.Spec.PodMetricsEndpoints[0].Port }) {
			t.Errorf("%s container has no port %q", c, pm.Spec.PodMetricsEndpoints[0].Port)
		}
	}
	for _, ep := range append(slices.Clone(sm.Spec.Endpoints), pm.Spec.PodMetricsEndpoints...) {
		iv, err1 := time.ParseDuration(ep.Interval)
		to, err2 := time.ParseDuration(ep.ScrapeTimeout)
		if ep.Path != "/metrics" || err1 != nil || err2 != nil || to > iv {
			t.Errorf("endpoint %+v: want /metrics and a timeout within the interval", ep)
		}
	}
	cm := o.configMaps[release+"-dashboard"]
	if cm == nil || cm.Labels["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap missing or without the sidecar label: %+v", cm)
	}
	want, err := os.ReadFile(filepath.Join("chf", "dashboards", "chf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if json.Unmarshal([]byte(cm.Data["chf-testbed.json"]), &a) != nil || json.Unmarshal(want, &b) != nil {
		t.Fatalf("dashboard in the ConfigMap is not the JSON of chf/dashboards/chf.json")
	}
	for _, name := range []string{"cgw-ingress", "cgw-to-ocp", "ocp-to-abm"} {
		found := false
		for _, np := range o.netpols {
			if np.Name != release+"-"+name {
				continue
			}
			for _, rule := range np.Spec.Ingress {
				for _, p := range rule.From {
					if p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "monitoring" {
						found = true
					}
				}
			}
		}
		if !found {
			t.Errorf("NetworkPolicy %s-%s does not admit scrapes from namespace monitoring", release, name)
		}
	}
}

// matchesSelector evaluates the In expressions the chart uses.
func matchesSelector(t *testing.T, exprs []metav1LabelSelectorRequirement, labels map[string]string) bool {
	t.Helper()
	for _, e := range exprs {
		if e.Operator != "In" {
			t.Fatalf("selector operator %s not evaluated here", e.Operator)
		}
		if !slices.Contains(e.Values, labels[e.Key]) {
			return false
		}
	}
	return len(exprs) > 0
}

// metricRef finds the metric names a PromQL expression reads: the
// project's prefixes, and process_ for CPU.
var metricRef = regexp.MustCompile(`\b(?:chf|loadgen|process|http|diameter|abm)_[a-z0-9_]+\b`)

// TestDashboardMetrics checks that every query of the dashboard names
// only metrics the services and loadgen export: the vectors the service
// packages register on the chassis registry (whether observed yet or
// not), what that registry gathers (the OTel-exported process and chassis
// metrics), and what loadgen's live endpoint gathers.
func TestDashboardMetrics(t *testing.T) {
	exported := telemetry.RegisteredNames()
	addFamilies := func(fams []*dto.MetricFamily, err error) {
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			exported[f.GetName()] = f.GetType().String()
			if f.GetType() == dto.MetricType_HISTOGRAM {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					exported[f.GetName()+suf] = "histogram"
				}
			}
		}
	}
	addFamilies(telemetry.Registry().Gather())
	lm := live.New()
	lm.Observe(engine.OpCreate, time.Millisecond, "timeout") // errors_total has a child only after an error
	addFamilies(lm.Registry().Gather())

	raw, err := os.ReadFile(filepath.Join("chf", "dashboards", "chf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	queries := 0
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			names := metricRef.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
				if _, ok := exported[n]; !ok {
					t.Errorf("panel %q: %s is not exported (query %q)", p.Title, n, tg.Expr)
				}
			}
		}
	}
	var list []string
	for n := range used {
		list = append(list, n)
	}
	sort.Strings(list)
	t.Logf("%d panels, %d queries over %d metrics: %v", len(dash.Panels), queries, len(list), list)
}

type (
	corev1ServicePort              = corev1.ServicePort
	corev1ContainerPort            = corev1.ContainerPort
	metav1LabelSelectorRequirement = metav1.LabelSelectorRequirement
)

// TestLoadgenMetrics renders the loadgen chart's live metrics: off by
// default; with metrics.enabled every shard serves --metrics-listen on the
// container port "metrics", which the PodMonitor and the headless Service
// behind the ServiceMonitor select; the helm test passes the same flag;
// loadgen accepts it; a monitor without metrics.enabled is refused.
func TestLoadgenMetrics(t *testing.T) {
	helmBin(t)
	lg := loadgenModels[0]
	o := renderDecoded(t, lg)
	ctr := o.jobs[0].Spec.Template.Spec.Containers[0]
	if slices.Contains(ctr.Args, "--metrics-listen") || len(ctr.Ports) != 0 || len(o.svcMonitors)+len(o.podMonitors)+len(o.services) != 0 {
		t.Errorf("metrics rendered by default: args %q, ports %v, %d monitors, %d services", ctr.Args, ctr.Ports, len(o.svcMonitors)+len(o.podMonitors), len(o.services))
	}
	o = renderDecoded(t, lg, "--set", "metrics.enabled=true,metrics.port=9555,metrics.podMonitor.enabled=true,metrics.serviceMonitor.enabled=true",
		"--set", "metrics.podMonitor.labels.release=prom")
	tpl := o.jobs[0].Spec.Template
	ctr = tpl.Spec.Containers[0]
	if v, _ := argValue(ctr.Args, "--metrics-listen"); v != ":9555" {
		t.Errorf("--metrics-listen %q, want :9555 (args %q)", v, ctr.Args)
	}
	if len(ctr.Ports) != 1 || ctr.Ports[0].Name != "metrics" || ctr.Ports[0].ContainerPort != 9555 {
		t.Errorf("container ports %+v, want metrics 9555", ctr.Ports)
	}
	if len(o.svcMonitors) != 1 || len(o.podMonitors) != 1 {
		t.Fatalf("%d ServiceMonitors and %d PodMonitors, want 1 and 1", len(o.svcMonitors), len(o.podMonitors))
	}
	sm, pm := o.svcMonitors[0], o.podMonitors[0]
	if pm.Labels["release"] != "prom" {
		t.Errorf("PodMonitor labels %v lack release=prom", pm.Labels)
	}
	if !matchesSelector(t, pm.Spec.Selector.MatchExpressions, tpl.Labels) {
		t.Errorf("PodMonitor does not select the shards' pods (labels %v)", tpl.Labels)
	}
	svc := o.services[release+"-loadgen-metrics"]
	if svc == nil {
		t.Fatalf("no headless Service %s-loadgen-metrics: %v", release, o.services)
	}
	if svc.Spec.ClusterIP != "None" {
		t.Errorf("Service %s is not headless", svc.Name)
	}
	for k, v := range svc.Spec.Selector {
		if tpl.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the shards lack", svc.Name, k, v)
		}
	}
	if !matchesSelector(t, sm.Spec.Selector.MatchExpressions, svc.Labels) {
		t.Errorf("ServiceMonitor does not select Service %s", svc.Name)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != sm.Spec.Endpoints[0].Port || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service ports %+v do not lead the ServiceMonitor's port %q to the container's", svc.Spec.Ports, sm.Spec.Endpoints[0].Port)
	}
	for _, ep := range append(slices.Clone(sm.Spec.Endpoints), pm.Spec.PodMetricsEndpoints...) {
		iv, err1 := time.ParseDuration(ep.Interval)
		to, err2 := time.ParseDuration(ep.ScrapeTimeout)
		if ep.Port != "metrics" || ep.Path != "/metrics" || err1 != nil || err2 != nil || to > iv {
			t.Errorf("endpoint %+v: want port metrics, /metrics and a timeout within the interval", ep)
		}
	}
	var test []string
	for _, p := range o.pods {
		if p.Annotations["helm.sh/hook"] == "test" {
			test = p.Spec.Containers[0].Args
		}
	}
	if v, _ := argValue(test, "--metrics-listen"); v != ":9555" {
		t.Errorf("the helm test passes --metrics-listen %q, the Job :9555", v)
	}
	if code, out := runCheckFlags(t, buildLoadgen(t), test...); code != 0 || !strings.Contains(out, "9555") {
		t.Errorf("loadgen %q: exit %d, want 0 and the listen address in the effective config:\n%s", test, code, out)
	}
	for _, set := range []string{"metrics.podMonitor.enabled=true", "metrics.serviceMonitor.enabled=true"} {
		if _, err := render(t, lg, "--set", set); err == nil || !strings.Contains(err.Error(), "need metrics.enabled=true") {
			t.Errorf("%s without metrics.enabled: %v, want a refusal naming metrics.enabled", set, err)
		}
	}
	if _, err := render(t, lg, "--set", "metrics.port=0"); err == nil || !strings.Contains(err.Error(), "/metrics/port") {
		t.Errorf("metrics.port=0: %v, want a schema refusal naming /metrics/port", err)
	}
}
