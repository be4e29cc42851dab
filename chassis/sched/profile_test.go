package sched

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestProfileFlag: --runtime-profile takes production (the default, also
// the zero value) or lab; anything else is refused naming the flag.
func TestProfileFlag(t *testing.T) {
	var p Profile
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&p, FlagName, "")
	if f := fs.Lookup(FlagName); f.DefValue != "production" || p.Validate() != nil || p.SchedBatch() || p.KeepSysmonAwake() {
		t.Fatalf("zero profile: default %q, batch %v, sysmon %v", f.DefValue, p.SchedBatch(), p.KeepSysmonAwake())
	}
	for _, tc := range []struct {
		arg   string
		want  Profile
		batch bool
	}{{"lab", Lab, true}, {"production", Production, false}} {
		if err := fs.Parse([]string{"--runtime-profile", tc.arg}); err != nil || p != tc.want || p.SchedBatch() != tc.batch || p.KeepSysmonAwake() != tc.batch {
			t.Errorf("--runtime-profile %s: %v, %q", tc.arg, err, p)
		}
	}
	for _, bad := range []string{"", "Lab", "prod", "lab,production"} {
		err := fs.Parse([]string{"--runtime-profile=" + bad})
		if err == nil || !strings.Contains(err.Error(), "flag -runtime-profile") || !strings.Contains(err.Error(), "want production or lab") {
			t.Errorf("--runtime-profile=%q: %v, want an error naming the flag", bad, err)
		}
		if _, err := ParseProfile(bad); !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), "want production or lab") {
			t.Errorf("ParseProfile(%q) = %v", bad, err)
		}
		if Profile(bad).Validate() == nil && bad != "" {
			t.Errorf("Profile(%q).Validate() = nil", bad)
		}
	}
}

// TestSysmonAwakeEnv: GODEBUG gains SysmonAwake after its own settings;
// the rest of the environment stays.
func TestSysmonAwakeEnv(t *testing.T) {
	f := func(in, want []string) {
		t.Helper()
		if got := SysmonAwakeEnv(in); !slices.Equal(got, want) {
			t.Errorf("SysmonAwakeEnv(%q) = %q, want %q", in, got, want)
		}
	}
	f(nil, []string{"GODEBUG=" + SysmonAwake})
	f([]string{"A=1", "GODEBUG=", "B=2"}, []string{"GODEBUG=" + SysmonAwake, "A=1", "B=2"})
	f([]string{"GODEBUG=gctrace=1", "A=1"}, []string{"GODEBUG=gctrace=1," + SysmonAwake, "A=1"})
}
