package charts_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestOperatorToken renders the chf chart with operator.tokenSecret: only
// the cgw pods mount the Secret's key as /etc/chf/operator/token and get
// CHF_OPERATOR_TOKEN_FILE pointing at it, and the cgw binary accepts that
// configuration; without it no pod has either.
func TestOperatorToken(t *testing.T) {
	helmBin(t)
	off := renderDecoded(t, chfModels[0])
	for c, d := range off.deployments {
		if _, ok := envValue(d.Spec.Template.Spec.Containers[0], "CHF_OPERATOR_TOKEN_FILE"); ok {
			t.Fatalf("%s has CHF_OPERATOR_TOKEN_FILE without operator.tokenSecret", c)
		}
	}
	on := renderDecoded(t, chfModels[0], "--set", "operator.tokenSecret=chf-operator", "--set", "operator.tokenKey=bearer")
	for c, d := range on.deployments {
		spec := d.Spec.Template.Spec
		ctr := spec.Containers[0]
		file, hasEnv := envValue(ctr, "CHF_OPERATOR_TOKEN_FILE")
		mount, secret, key, path := operatorVolume(t, c, spec, ctr)
		if c != "cgw" {
			if hasEnv || mount != "" || secret != "" {
				t.Fatalf("%s gets the operator token; only cgw serves the operator API", c)
			}
			continue
		}
		if secret != "chf-operator" || key != "bearer" || mount == "" || file != mount+"/"+path || !strings.HasSuffix(file, "/token") {
			t.Fatalf("cgw: Secret %q key %q path %q mounted at %q, CHF_OPERATOR_TOKEN_FILE %q", secret, key, path, mount, file)
		}
		if !testing.Short() {
			checkFlags(t, buildChf(t), on, spec, ctr)
		}
	}
	if _, err := render(t, chfModels[0], "--set", "operator.tokenKey="); err == nil || !strings.Contains(err.Error(), "tokenKey") {
		t.Errorf("operator.tokenKey empty: %v, want a schema error naming it", err)
	}
}

// TestLoadgenOperatorToken renders the loadgen chart with
// operator.tokenSecret: the shards and the helm test pod mount the
// Secret's key read-only and pass --operator-token-file pointing at it
// (the CGW's token, for balance reads and operator calls), and loadgen
// run --check-flags accepts the test pod's arguments with a token there;
// without it neither has either.
func TestLoadgenOperatorToken(t *testing.T) {
	helmBin(t)
	pods := func(o *objects) map[string]corev1.PodSpec {
		m := map[string]corev1.PodSpec{"job": o.jobs[0].Spec.Template.Spec}
		for _, p := range o.pods {
			if p.Annotations["helm.sh/hook"] == "test" {
				m["helm test"] = p.Spec
			}
		}
		if len(m) != 2 {
			t.Fatalf("want the Job and the helm test pod, got %d pod specs", len(m))
		}
		return m
	}
	for what, spec := range pods(renderDecoded(t, loadgenModels[0])) {
		if slices.Contains(spec.Containers[0].Args, "--operator-token-file") || slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "operator" }) {
			t.Errorf("%s: an operator token without operator.tokenSecret", what)
		}
	}
	for what, spec := range pods(renderDecoded(t, loadgenModels[0], "--set", "operator.tokenSecret=chf-operator", "--set", "operator.tokenKey=bearer")) {
		ctr := spec.Containers[0]
		file, _ := argValue(ctr.Args, "--operator-token-file")
		mount, secret, key, path := operatorVolume(t, what, spec, ctr)
		if secret != "chf-operator" || key != "bearer" || mount == "" || file != mount+"/"+path {
			t.Fatalf("%s: Secret %q key %q path %q mounted at %q, --operator-token-file %q", what, secret, key, path, mount, file)
		}
		if what != "helm test" || testing.Short() {
			continue
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, path), []byte("stand-in-operator-token-0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := slices.Clone(ctr.Args)
		args[slices.Index(args, file)] = filepath.Join(dir, path)
		if code, out := runCheckFlags(t, buildLoadgen(t), args...); code != 0 {
			t.Errorf("loadgen %q: exit %d, want 0:\n%s", args, code, out)
		}
		// A token the CGW would refuse is refused here first.
		if err := os.WriteFile(filepath.Join(dir, path), []byte("short\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, out := runCheckFlags(t, buildLoadgen(t), args...); code != 2 || !strings.Contains(out, "--operator-token-file") {
			t.Errorf("loadgen with a short token: exit %d, want 2 naming --operator-token-file:\n%s", code, out)
		}
	}
}

// operatorVolume returns where ctr mounts the volume "operator" (mount)
// and the Secret, key and path that volume projects (empty when absent);
// a writable mount is an error.
func operatorVolume(t *testing.T, what string, spec corev1.PodSpec, ctr corev1.Container) (mount, secret, key, path string) {
	t.Helper()
	for _, m := range ctr.VolumeMounts {
		if m.Name == "operator" {
			mount = m.MountPath
			if !m.ReadOnly {
				t.Errorf("%s mounts the operator token writable", what)
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.Name == "operator" && v.Secret != nil {
			secret = v.Secret.SecretName
			if len(v.Secret.Items) == 1 {
				key, path = v.Secret.Items[0].Key, v.Secret.Items[0].Path
			}
		}
	}
	return mount, secret, key, path
}
