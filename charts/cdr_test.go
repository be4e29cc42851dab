package charts_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestCDRVolume renders the chf chart with cdr.enabled: only the ocp pods
// get CHF_CDR_* and a volume at cdr.dir (an emptyDir, or the PVC named by
// cdr.claimName), and the ocp binary accepts that configuration.
func TestCDRVolume(t *testing.T) {
	helmBin(t)
	cdrVolume := func(spec corev1.PodSpec) (*corev1.Volume, string) {
		var mount string
		for _, m := range spec.Containers[0].VolumeMounts {
			if m.Name == "cdr" {
				mount = m.MountPath
			}
		}
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == "cdr" {
				return &spec.Volumes[i], mount
			}
		}
		return nil, mount
	}
	off := renderDecoded(t, chfModels[0])
	for c, d := range off.deployments {
		if v, m := cdrVolume(d.Spec.Template.Spec); v != nil || m != "" {
			t.Fatalf("%s has a CDR volume with cdr.enabled false", c)
		}
		if _, ok := envValue(d.Spec.Template.Spec.Containers[0], "CHF_CDR_DIR"); ok {
			t.Fatalf("%s has CHF_CDR_DIR with cdr.enabled false", c)
		}
	}
	on := renderDecoded(t, chfModels[0], "--set", "cdr.enabled=true", "--set", "cdr.dir=/cdr")
	for c, d := range on.deployments {
		spec := d.Spec.Template.Spec
		v, mount := cdrVolume(spec)
		dir, ok := envValue(spec.Containers[0], "CHF_CDR_DIR")
		if c != "ocp" {
			if v != nil || ok {
				t.Fatalf("%s writes CDRs; only ocp does", c)
			}
			continue
		}
		if v == nil || v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "1Gi" || mount != "/cdr" || dir != "/cdr" {
			t.Fatalf("ocp CDR volume %+v mounted at %q, CHF_CDR_DIR %q", v, mount, dir)
		}
		if !testing.Short() {
			checkFlags(t, buildChf(t), on, spec, spec.Containers[0])
		}
	}
	pvc := renderDecoded(t, chfModels[0], "--set", "cdr.enabled=true", "--set", "cdr.claimName=cdrs")
	if v, _ := cdrVolume(pvc.deployments["ocp"].Spec.Template.Spec); v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "cdrs" {
		t.Fatalf("ocp CDR volume with cdr.claimName: %+v", v)
	}
	if _, err := render(t, chfModels[0], "--set", "cdr.fsync=sometimes"); err == nil {
		t.Fatal("the schema accepts cdr.fsync=sometimes")
	}
}
