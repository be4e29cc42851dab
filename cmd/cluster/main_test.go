package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Bad usage exits 2 with a message naming the flag or the verb, before
// anything is started; help exits 0.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "cluster up"},
		{[]string{"frobnicate"}, 2, `unknown verb "frobnicate"`},
		{[]string{"help"}, 0, "cluster down"},
		{[]string{"up"}, 2, "--bin is required"},
		{[]string{"up", "--bin", "/x", "--cpu-manager", "dynamic"}, 2, "--cpu-manager must be none or static"},
		{[]string{"up", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"up", "-h"}, 0, "-cpu-manager"},
		{[]string{"down", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"e2e", "--bin", "/x", "--trials", "0"}, 2, "--trials must be 1..20"},
		{[]string{"e2e", "--bin", "/x", "--rate", "-5"}, 2, "--rate must be 1..100000"},
		{[]string{"e2e", "--bin", "/x", "--models", "calico-vxlan"}, 2, `unknown model "calico-vxlan"`},
		{[]string{"e2e", "--bin", "/x", "--duration", "0"}, 2, "--duration must be 1..3600"},
		{[]string{"e2e", "--bin", "/x", "--sweep"}, 2, "--sweep needs --loadgen"},
		{[]string{"e2e", "--bin", "/x", "--knee-slo-p99", "0s"}, 2, "--knee-slo-p99 must be in (0, 1m]"},
		{[]string{"images", "--only", "nginx"}, 2, "nginx"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("cluster %v: exit %d, output %q; want exit %d and %q", c.args, code, out.String()+errb.String(), c.code, c.want)
		}
	}
}

// status on a directory without a cluster says so.
func TestStatusNoCluster(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"status", "--dir", t.TempDir()}, &out, &errb)
	if !strings.Contains(out.String(), "no cluster in") || code != 0 && !strings.Contains(out.String(), "left on the host") {
		t.Fatalf("status: exit %d, %q %q", code, out.String(), errb.String())
	}
}
