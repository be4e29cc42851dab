package charts_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// buildChf builds ./cmd/chf once per test binary run.
var (
	chfOnce sync.Once
	chfBin  string
	chfErr  error
	chfDir  string
)

func buildChf(t *testing.T) string {
	t.Helper()
	chfOnce.Do(func() {
		chfDir, chfErr = os.MkdirTemp("", "charts-chf-")
		if chfErr != nil {
			return
		}
		chfBin = filepath.Join(chfDir, "chf")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", chfBin, "./cmd/chf")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			chfErr = fmt.Errorf("cannot build ./cmd/chf: %w\n%s", err, out)
		}
	})
	if chfErr != nil {
		t.Fatal(chfErr)
	}
	return chfBin
}

func TestMain(m *testing.M) {
	if mode := os.Getenv("CHARTS_LAB_HELPER"); mode != "" {
		os.Exit(labHelper(mode, os.Getenv("CHARTS_LAB_ADDR")))
	}
	code := m.Run()
	if chfDir != "" {
		os.RemoveAll(chfDir)
	}
	if loadgenDir != "" {
		os.RemoveAll(loadgenDir)
	}
	os.Exit(code)
}

// fakePodEnv resolves a container's environment as the kubelet would for a
// pod in namespace chf: downward-API fields get plausible values, and
// $(VAR) references expand.
func fakePodEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expandRefs(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.namespace":
				env[e.Name] = namespace
			case "metadata.name":
				env[e.Name] = "pod-0"
			case "status.podIP", "status.hostIP":
				env[e.Name] = "10.0.0.10"
			case "metadata.annotations['batch.kubernetes.io/job-completion-index']":
				env[e.Name] = "0"
			default:
				t.Fatalf("container %s: env %s: fieldRef %s not emulated", c.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = "2"
		default:
			t.Fatalf("container %s: env %s: valueFrom not emulated", c.Name, e.Name)
		}
	}
	return env
}

var refRE = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func expandRefs(s string, env map[string]string) string {
	return refRE.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// materializeConfig writes the ConfigMaps a pod mounts into a temporary
// directory and rewrites environment values that point into the mounts,
// so that files such as the tariff are checked too.
func materializeConfig(t *testing.T, o *objects, spec corev1.PodSpec, c corev1.Container, env map[string]string) {
	t.Helper()
	// The operator token Secret first (it is mounted below the ConfigMap's
	// directory): a stand-in token of the length the CGW wants, where the
	// pod would have it.
	for _, vm := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.Name != "operator" || v.Secret == nil {
				continue
			}
			dir := t.TempDir()
			for _, it := range v.Secret.Items {
				if err := os.WriteFile(filepath.Join(dir, it.Path), []byte("stand-in-operator-token-0123456789"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for k, val := range env {
				if strings.HasPrefix(val, vm.MountPath+"/") {
					env[k] = dir + strings.TrimPrefix(val, vm.MountPath)
				}
			}
		}
	}
	for _, vm := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			cm, ok := o.configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("container %s mounts ConfigMap %s that the chart does not render", c.Name, v.ConfigMap.Name)
			}
			dir := t.TempDir()
			for k, data := range cm.Data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for k, val := range env {
				if strings.HasPrefix(val, vm.MountPath+"/") {
					env[k] = dir + strings.TrimPrefix(val, vm.MountPath)
				}
			}
		}
	}
}

// fakeKubeconfig points client-go at an address where nothing listens.
const fakeKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
users:
- name: fake
  user:
    token: fake
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: chf
current-context: fake
`

// flagName maps CHF_MAX_BODY to max-body, the flag it configures.
func flagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "CHF_")), "_", "-")
}

// checkFlags runs `chf <args> --check-flags` with exactly the container's
// environment. It fails when the subcommand or --check-flags does not
// exist, on a non-zero exit, and on a CHF_* variable that names no flag of
// the subcommand (which the binary would silently ignore).
func checkFlags(t *testing.T, bin string, o *objects, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	env := fakePodEnv(t, c)
	materializeConfig(t, o, spec, c, env)
	args := make([]string, 0, len(c.Args)+1)
	for _, a := range c.Args {
		args = append(args, expandRefs(a, env))
	}
	sub := args[0]
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fakeKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(extra ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, extra...)...)
		// In a pod, client-go finds the API server from the service
		// account; here a kubeconfig pointing nowhere stands in for it
		// (--check-flags builds clients but must not connect).
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "KUBECONFIG=" + kubeconfig}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ctx.Err() != nil {
			return out.String(), fmt.Errorf("chf %s did not exit within 20s (did --check-flags start the service?)", sub)
		}
		return out.String(), err
	}
	out, err := run("--check-flags")
	switch {
	case strings.Contains(out, "unknown command"):
		t.Fatalf("chf %s does not exist, but the chart runs it", sub)
	case strings.Contains(out, "flag provided but not defined: -check-flags"):
		t.Fatalf("chf %s has no --check-flags", sub)
	case err != nil && strings.Contains(out, "not available yet"):
		// A feature the chart configures (e.g. --discovery=kubernetes)
		// that the binary does not provide.
		t.Fatalf("chf %s --check-flags: the chart configures a feature the binary lacks:\n%s", sub, out)
	case err != nil:
		t.Fatalf("chf %s --check-flags rejects the chart's configuration: %v\nenv: %v\n%s", strings.Join(args, " "), err, env, out)
	}
	t.Logf("chf %s --check-flags: %s", sub, strings.TrimSpace(out))
	help, _ := run("--help")
	for k := range env {
		if !strings.HasPrefix(k, "CHF_") {
			continue
		}
		if !regexp.MustCompile(`(?m)^\s+--?` + regexp.QuoteMeta(flagName(k)) + `\b`).MatchString(help) {
			t.Errorf("chart sets %s but chf %s has no --%s flag (it would be ignored):\n%s", k, sub, flagName(k), help)
		}
	}
}

// TestServiceFlagsAccepted proves that the binary's own flag parsing accepts
// the args and environment of every CHF Deployment and of the provisioning
// Job, for every network model.
func TestServiceFlagsAccepted(t *testing.T) {
	helmBin(t)
	if testing.Short() {
		t.Skip("builds ./cmd/chf; skipped with -short")
	}
	for _, m := range chfModels {
		t.Run(m.name(), func(t *testing.T) {
			o := renderDecoded(t, m)
			bin := buildChf(t)
			for _, c := range []string{"cgw", "ocp", "abm"} {
				t.Run(c, func(t *testing.T) {
					spec := o.deployments[c].Spec.Template.Spec
					checkFlags(t, bin, o, spec, spec.Containers[0])
				})
			}
			t.Run("provision", func(t *testing.T) {
				spec := o.jobs[0].Spec.Template.Spec
				checkFlags(t, bin, o, spec, spec.Containers[0])
			})
		})
	}
}

// TestLoadgenFlagsExist checks that every flag the loadgen Job passes is a
// flag of `loadgen run` (the values are checked by loadgen at run time).
func TestLoadgenFlagsExist(t *testing.T) {
	helmBin(t)
	if testing.Short() {
		t.Skip("builds ./cmd/loadgen; skipped with -short")
	}
	o := renderDecoded(t, loadgenModels[0], "--set", "label=calico-pinned", "--set", "cpu={cgw=http://chf-cgw:8080/metrics}",
		"--set", "metrics.enabled=true", "--set-json", `scenario={"name":"x"}`)
	args := o.jobs[0].Spec.Template.Spec.Containers[0].Args
	bin := buildLoadgen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	help, _ := exec.CommandContext(ctx, bin, args[0], "--help").CombinedOutput()
	if !strings.Contains(string(help), "-target") {
		t.Fatalf("loadgen %s has no --target flag, but the chart runs it:\n%s", args[0], help)
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		if !regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(strings.TrimPrefix(a, "--")) + `\b`).Match(help) {
			t.Errorf("the loadgen Job passes %s, which loadgen %s does not define:\n%s", a, args[0], help)
		}
	}
}
