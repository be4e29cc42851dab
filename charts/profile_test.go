package charts_test

import (
	"slices"
	"testing"
)

// TestRuntimeProfile: runtimeProfile sets CHF_RUNTIME_PROFILE
// (--runtime-profile) on every CHF service container, aslite's included,
// and --runtime-profile on the loadgen's, production by default; the
// schemas refuse anything but production and lab.
func TestRuntimeProfile(t *testing.T) {
	helmBin(t)
	for _, profile := range []string{"", "production", "lab"} {
		want, set := profile, []string{"--set", "aerospike.aslite.enabled=true"}
		if profile == "" {
			want = "production"
		} else {
			set = append(set, "--set", "runtimeProfile="+profile)
		}
		o := renderWith(t, "chf", set...)
		n := 0
		for c, d := range o.deployments {
			for _, ctr := range d.Spec.Template.Spec.Containers {
				n++
				if v, ok := envValue(ctr, "CHF_RUNTIME_PROFILE"); !ok || v != want {
					t.Errorf("runtimeProfile %q: %s container %s has CHF_RUNTIME_PROFILE=%q (set %v), want %q", profile, c, ctr.Name, v, ok, want)
				}
			}
		}
		if n != 4 { // cgw, ocp, abm, aslite
			t.Errorf("runtimeProfile %q: %d service containers, want 4", profile, n)
		}
		var lset []string
		if profile != "" {
			lset = []string{"--set", "runtimeProfile=" + profile}
		}
		lg := renderDecoded(t, loadgenModels[0], lset...)
		args := lg.jobs[0].Spec.Template.Spec.Containers[0].Args
		if i := slices.Index(args, "--runtime-profile"); i < 0 || i+1 >= len(args) || args[i+1] != want {
			t.Errorf("runtimeProfile %q: loadgen args %q, want --runtime-profile %s", profile, args, want)
		}
	}
	for _, chart := range []string{"chf", "loadgen"} {
		m := chfModels[0]
		if chart == "loadgen" {
			m = loadgenModels[0]
		}
		if out, err := render(t, m, "--set", "runtimeProfile=fast"); err == nil {
			t.Errorf("%s: runtimeProfile=fast rendered:\n%.300s", chart, out)
		}
	}
}
