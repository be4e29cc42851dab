package charts_test

import (
	"strings"
	"testing"
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
		var mount string
		for _, m := range ctr.VolumeMounts {
			if m.Name == "operator" {
				mount = m.MountPath
				if !m.ReadOnly {
					t.Errorf("%s mounts the operator token writable", c)
				}
			}
		}
		var secret, key, path string
		for _, v := range spec.Volumes {
			if v.Name == "operator" && v.Secret != nil {
				secret = v.Secret.SecretName
				if len(v.Secret.Items) == 1 {
					key, path = v.Secret.Items[0].Key, v.Secret.Items[0].Path
				}
			}
		}
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
