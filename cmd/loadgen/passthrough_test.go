package main

import (
	"slices"
	"strings"
	"testing"
)

// A flag in --ocp-args, --abm-args or --cgw-args is found however it is
// spelt, and a flag whose name merely starts like it is not taken for it.
func TestServiceArgsSpellings(t *testing.T) {
	f := func(service, args, flag string, want bool) {
		t.Helper()
		a, err := parseServiceArgs(service, args)
		if err != nil {
			t.Fatalf("parseServiceArgs(%s, %q): %v", service, args, err)
		}
		if got := a.has(flag); got != want {
			t.Errorf("parseServiceArgs(%s, %q).has(%s) = %v, want %v", service, args, flag, got, want)
		}
		if !slices.Equal(a.args, strings.Fields(args)) {
			t.Errorf("parseServiceArgs(%s, %q) passes on %q, want the args unchanged", service, args, a.args)
		}
	}
	for _, args := range []string{"--tariff=x.yaml", "-tariff x.yaml", "--tariff x.yaml", "-tariff=x.yaml", "--max-inflight 10 --tariff x.yaml"} {
		f("ocp", args, "tariff", true)
	}
	f("ocp", "", "tariff", false)
	f("ocp", "--max-inflight 10", "tariff", false)
	// A value that reads like the name, given with "=", and a longer
	// flag's name.
	f("ocp", "--cdr-dir=--tariff", "tariff", false)
	f("ocp", "--tariff-file x", "tariff", false)
	for _, args := range []string{"--reservation-sweep=1s", "-reservation-sweep 1s", "--reservation-sweep 1s"} {
		f("abm", args, "reservation-sweep", true)
	}
	for _, args := range []string{"--operator-token-file=t", "-operator-token-file t", "--operator-token-file t"} {
		f("cgw", args, "operator-token-file", true)
	}
}

// Arguments that are not flags (nor a flag's value) and bad flag syntax
// are usage errors naming the loadgen flag; flags the service does not
// have are the service's to refuse when it starts.
func TestServiceArgsInvalid(t *testing.T) {
	for _, c := range []struct{ service, args, want string }{
		{"cgw", "stray", "--cgw-args"},
		{"ocp", "--max-inflight=10 stray", "--ocp-args"},
		{"abm", "---x", "--abm-args"},
		{"abm", "-", "--abm-args"},
		{"abm", "--=1", "--abm-args"},
	} {
		_, err := parseServiceArgs(c.service, c.args)
		if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseServiceArgs(%s, %q) = exit %d, %v; want exit 2 naming %s", c.service, c.args, code, err, c.want)
		}
	}
}
