package main

import (
	"runtime"
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
