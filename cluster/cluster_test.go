package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cluster/kube"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

var getOpts = metav1.GetOptions{}

// model is one network model's values file and the Pod Security level its
// pods need (documented in charts/chf/README.md).
type model struct {
	name, values, level, stricter string
}

var models = []model{
	{"calico", "", "restricted", ""},
	{"calico-pinned", "values-calico-pinned.yaml", "restricted", ""},
	{"sriov-pinned", "values-sriov-pinned.yaml", "restricted", ""},
	{"baremetal", "values-baremetal.yaml", "privileged", "baseline"},
	{"baremetal-pinned", "values-baremetal-pinned.yaml", "privileged", "baseline"},
}

func repoRoot() string { return filepath.Join("..") }

func helmPath(t *testing.T) string {
	if p := os.Getenv("HELM"); p != "" {
		return p
	}
	p := filepath.Join(repoRoot(), ".tools", "bin", "helm")
	if _, err := os.Stat(p); err == nil {
		abs, _ := filepath.Abs(p)
		return abs
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		t.Fatalf("cannot find helm (run `make tools`): %v", err)
	}
	return p
}

func helm(t *testing.T, cp *controlPlane, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmPath(t), append(args, "--kubeconfig", cp.kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(cp.dir, "helm"),
		"HELM_CONFIG_HOME="+filepath.Join(cp.dir, "helm"), "HELM_DATA_HOME="+filepath.Join(cp.dir, "helm"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createNamespace(t *testing.T, c kubernetes.Interface, name, level string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: psaLabels(level)}}
	if _, err := c.CoreV1().Namespaces().Create(ctxT(t), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cannot create namespace %s: %v", name, err)
	}
}

func psaLabels(level string) map[string]string {
	return map[string]string{"pod-security.kubernetes.io/enforce": level,
		"pod-security.kubernetes.io/enforce-version": "latest"}
}

func setLevel(t *testing.T, c kubernetes.Interface, ns, level string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": psaLabels(level)}})
	if _, err := c.CoreV1().Namespaces().Patch(ctxT(t), ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("cannot label namespace %s: %v", ns, err)
	}
}

// podTemplates renders the chart as installed in ns and returns the pod
// templates of its workloads, by workload name.
func podTemplates(t *testing.T, cp *controlPlane, ns string) map[string]corev1.PodTemplateSpec {
	t.Helper()
	out, err := helm(t, cp, "get", "manifest", "chf", "-n", ns)
	if err != nil {
		t.Fatalf("cannot get manifest: %v\n%s", err, out)
	}
	res := map[string]corev1.PodTemplateSpec{}
	for _, doc := range strings.Split(out, "\n---") {
		var head struct{ Kind string }
		if yaml.Unmarshal([]byte(doc), &head) != nil {
			continue
		}
		switch head.Kind {
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
				t.Fatalf("cannot decode Deployment: %v", err)
			}
			res[d.Name] = d.Spec.Template
		case "StatefulSet":
			var s appsv1.StatefulSet
			if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
				t.Fatalf("cannot decode StatefulSet: %v", err)
			}
			res[s.Name] = s.Spec.Template
		}
	}
	if len(res) == 0 {
		t.Fatalf("no workloads in the manifest of %s", ns)
	}
	return res
}

// dryRunPod creates the template as a Pod with server-side dry run, which
// goes through admission (Pod Security included) and stores nothing.
func dryRunPod(ctx context.Context, c kubernetes.Interface, ns, name string, tmpl corev1.PodTemplateSpec) error {
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name = name + "-psa-probe"
	_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// TestControlPlane installs the charts on a real control plane and checks
// Pod Security, RBAC, discovery and the loadgen Indexed Job.
func TestControlPlane(t *testing.T) {
	start := time.Now()
	cp := startControlPlane(t)
	t.Logf("control plane ready in %v", time.Since(start).Round(time.Millisecond))
	c := cp.client
	t.Cleanup(func() { t.Logf("control-plane RSS at the end (MB): %v", cp.rssMB()) })

	chart := filepath.Join(repoRoot(), "charts", "chf")
	install := func(m model, extra ...string) (string, error) {
		args := []string{"install", "chf", chart, "-n", "chf-" + m.name, "--set", "provision.enabled=false", "--timeout", "60s"}
		if m.values != "" {
			args = append(args, "-f", filepath.Join(chart, m.values))
		}
		return helm(t, cp, append(args, extra...)...)
	}

	t.Run("sriov-without-crd", func(t *testing.T) {
		m := models[2]
		createNamespace(t, c, "chf-"+m.name, m.level)
		out, err := install(m)
		if err == nil || !strings.Contains(out, "NetworkAttachmentDefinition") || !strings.Contains(out, "Multus") {
			t.Fatalf("install without the CRD: err=%v, want a failure naming the CRD and Multus:\n%s", err, out)
		}
		t.Logf("install without the CRD fails early: %s", strings.TrimSpace(out))
		list, err := c.AppsV1().Deployments("chf-"+m.name).List(ctxT(t), metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			t.Fatalf("failed install left %d deployments (err %v)", len(list.Items), err)
		}
		installNADCRD(t, cp)
	})

	for _, m := range models {
		t.Run("install-"+m.name, func(t *testing.T) {
			ns := "chf-" + m.name
			if m.name != "sriov-pinned" {
				createNamespace(t, c, ns, m.level)
			}
			t0 := time.Now()
			if out, err := install(m); err != nil {
				t.Fatalf("helm install %s: %v\n%s", m.name, err, out)
			}
			t.Logf("helm install (provision.enabled=false) in %v", time.Since(t0).Round(time.Millisecond))
			tmpls := podTemplates(t, cp, ns)
			// The controllers create the pods: admitted at the level.
			waitFor(t, "pods of "+ns, 60*time.Second, func() error {
				for name := range tmpls {
					pods, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
						LabelSelector: "app.kubernetes.io/instance=chf"})
					if err != nil {
						return err
					}
					found := false
					for _, p := range pods.Items {
						if strings.HasPrefix(p.Name, name+"-") {
							found = true
						}
					}
					if !found {
						return fmt.Errorf("no pod of %s admitted at %s", name, m.level)
					}
				}
				return nil
			})
			for name, tmpl := range tmpls {
				if err := dryRunPod(ctxT(t), c, ns, name, tmpl); err != nil {
					t.Errorf("%s: pod rejected at %s: %v", name, m.level, err)
				}
			}
			if m.stricter == "" {
				return
			}
			setLevel(t, c, ns, m.stricter)
			defer setLevel(t, c, ns, m.level)
			rejected := 0
			for name, tmpl := range tmpls {
				err := dryRunPod(ctxT(t), c, ns, name, tmpl)
				if err != nil {
					if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
						t.Errorf("%s at %s: %v, want a PodSecurity rejection", name, m.stricter, err)
					}
					rejected++
				}
			}
			if rejected == 0 {
				t.Errorf("no pod of %s rejected at %s: the documented level %s is too loose", m.name, m.stricter, m.level)
			}
			t.Logf("%d of %d workloads rejected at %s", rejected, len(tmpls), m.stricter)
		})
	}

	t.Run("rbac", func(t *testing.T) {
		sa := impersonate(t, cp, "chf-calico", "chf")
		if _, err := sa.CoreV1().Secrets("chf-calico").List(ctxT(t), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("chart ServiceAccount listing secrets: %v, want Forbidden", err)
		}
		if _, err := sa.CoreV1().Pods("chf-baremetal").List(ctxT(t), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("chart ServiceAccount listing pods in another namespace: %v, want Forbidden", err)
		}
		if _, err := sa.DiscoveryV1().EndpointSlices("chf-calico").List(ctxT(t), metav1.ListOptions{}); err != nil {
			t.Errorf("chart ServiceAccount listing endpointslices: %v", err)
		}
		for _, verb := range []string{"create", "delete", "patch"} {
			r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctxT(t), &authv1.SelfSubjectAccessReview{
				Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
					Namespace: "chf-calico", Verb: verb, Resource: "pods"}}}, metav1.CreateOptions{})
			if err != nil || r.Status.Allowed {
				t.Errorf("chart ServiceAccount may %s pods (err %v)", verb, err)
			}
		}
	})

	t.Run("discovery", func(t *testing.T) { testDiscovery(t, cp, "chf-calico", "", false) })
	t.Run("discovery-sriov-net1", func(t *testing.T) { testDiscovery(t, cp, "chf-sriov-pinned", "sriov-chf", true) })
	t.Run("loadgen-indexed-job", func(t *testing.T) { testLoadgen(t, cp) })
	t.Run("provision-separately", func(t *testing.T) { testProvision(t, cp) })
}

func installNADCRD(t *testing.T, cp *controlPlane) {
	t.Helper()
	crd := filepath.Join(cp.dir, "nad-crd.yaml")
	if err := os.WriteFile(crd, []byte(nadCRD), 0o600); err != nil {
		t.Fatalf("cannot write CRD: %v", err)
	}
	// Through a one-template chart, so the test needs no kubectl.
	dir := filepath.Join(cp.dir, "nad-chart")
	_ = os.MkdirAll(filepath.Join(dir, "templates"), 0o700)
	_ = os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: nad-crd\nversion: 0.1.0\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "templates", "crd.yaml"), []byte(nadCRD), 0o600)
	if out, err := helm(t, cp, "install", "nad-crd", dir, "-n", "default", "--wait", "--timeout", "60s"); err != nil {
		t.Fatalf("cannot install the NetworkAttachmentDefinition CRD: %v\n%s", err, out)
	}
	waitFor(t, "NetworkAttachmentDefinition API", 30*time.Second, func() error {
		_, err := cp.client.Discovery().ServerResourcesForGroupVersion("k8s.cni.cncf.io/v1")
		return err
	})
}

// nadCRD is the NetworkAttachmentDefinition CRD as Multus ships it (schema
// trimmed to what the chart sets).
// nadCRD is the NetworkAttachmentDefinition CRD the node applies with Multus.
var nadCRD = kube.NADCRD

func impersonate(t *testing.T, cp *controlPlane, ns, sa string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cp.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("cannot create impersonating client: %v", err)
	}
	return c
}
