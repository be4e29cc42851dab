package main

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// h2c's event loops get one P per scheduler worker unless --procs says
// otherwise; other protocols keep Go's default.
func TestGOMAXPROCSDefault(t *testing.T) {
	sc := scenario.Default()
	for _, c := range []struct {
		proto          string
		procs, workers int
		tps            float64
		want           int
	}{
		{"h2c", 0, 0, 2000, 1},
		{"h2c", 0, 0, 3 * engine.TxnPerWorker, min(3, runtime.NumCPU())},
		{"h2c", 0, 2, 2000, min(2, runtime.NumCPU())},
		{"h2c", 3, 0, 2000, 3},
		{"http1", 0, 0, 2000, 0},
		{"gy", 0, 0, 2000, 0},
	} {
		f := runFlags{proto: c.proto, procs: c.procs, workers: c.workers}
		sc.Load = scenario.Load{TPS: c.tps}
		if got := f.gomaxprocs(sc); got != c.want {
			t.Errorf("%+v: GOMAXPROCS %d, want %d", c, got, c.want)
		}
	}
}

// loadgen local, sweep and gate give their CGW the load generator's
// --operator-token-file (absolute) unless --cgw-args names one.
func TestLocalCGWArgs(t *testing.T) {
	abs, err := filepath.Abs("token")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		file string
		want []string
	}{
		{nil, "", nil},
		{[]string{"--pprof", "127.0.0.1:0"}, "", []string{"--pprof", "127.0.0.1:0"}},
		{nil, "token", []string{"--operator-token-file", abs}},
		{[]string{"--pprof", "127.0.0.1:0"}, "/etc/token", []string{"--pprof", "127.0.0.1:0", "--operator-token-file", "/etc/token"}},
		{[]string{"--operator-token-file", "/other"}, "token", []string{"--operator-token-file", "/other"}},
		{[]string{"--operator-token-file=/other"}, "token", []string{"--operator-token-file=/other"}},
		{[]string{"-operator-token-file", "/other"}, "token", []string{"-operator-token-file", "/other"}},
		{[]string{"-operator-token-file=/other"}, "token", []string{"-operator-token-file=/other"}},
	} {
		args, err := parseServiceArgs("cgw", strings.Join(c.args, " "))
		if err != nil {
			t.Fatalf("parseServiceArgs(%q): %v", c.args, err)
		}
		got, err := localCGWArgs(args, c.file)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("localCGWArgs(%q, %q) = %q, %v; want %q", c.args, c.file, got, err, c.want)
		}
	}
}
