package local

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseReplicas(t *testing.T) {
	got, err := ParseReplicas(" ocp=2, abm=3,cgw=1 ")
	if want := map[string]int{"ocp": 2, "abm": 3, "cgw": 1}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseReplicas = %v, %v; want %v", got, err, want)
	}
	if got, err := ParseReplicas(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"ocp", "ocp=x", "aslite=2", "ocp=0", "abm=17"} {
		if _, err := ParseReplicas(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseReplicas(%q): %v, want ErrConfig", bad, err)
		}
	}
}

func TestConfigRejectsBadReplicasAndCommit(t *testing.T) {
	for _, cfg := range []Config{
		{Exe: "/bin/true", Replicas: map[string]int{"aslite": 2}},
		{Exe: "/bin/true", Replicas: map[string]int{"ocp": 0}},
		{Exe: "/bin/true", AsliteCommit: "never"},
		{Exe: "/bin/true", RuntimeProfile: "turbo"},
	} {
		if err := cfg.defaults(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", cfg, err)
		}
	}
}

// TestShareGOMAXPROCS: each process gets its share of the CPUs, at least
// one.
func TestShareGOMAXPROCS(t *testing.T) {
	f := func(cpus, procs, want int) {
		t.Helper()
		if got := ShareGOMAXPROCS(cpus, procs); got != want {
			t.Errorf("ShareGOMAXPROCS(%d, %d) = %d, want %d", cpus, procs, got, want)
		}
	}
	f(2, 4, 1)
	f(16, 4, 4)
	f(16, 7, 2)
	f(1, 4, 1)
	f(8, 0, 8)
}
