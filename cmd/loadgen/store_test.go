package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm/asd"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// TestStoreFlags: the store flags are checked before anything starts,
// each refusal exit 2 naming its flag, for every command that starts a
// local CHF.
func TestStoreFlags(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-asd")
	for _, c := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"local", []string{"--store-nodes", "3"}, "--store-nodes"},
		{"local", []string{"--store", "bogus"}, "--store"},
		{"local", []string{"--store", "asd", "--asd-binary", missing}, "--asd-binary"},
		{"local", []string{"--store", "asd", "--store-nodes", "6", "--asd-binary", missing}, "--store-nodes"},
		{"local", []string{"--asd-binary", missing}, "--asd-binary"},
		{"local", []string{"--aerospike", "nohostport"}, "--aerospike"},
		{"local", []string{"--as-namespace", ""}, "--as-namespace"},
		{"local", []string{"--fault", "kill:asd:1s:1s"}, "--fault"},
		{"local", []string{"--fault", "kill:asd7:1s:1s"}, "--fault"},
		{"local", []string{"--aerospike", "127.0.0.1:3000", "--aslite-data-dir", dir}, "--aslite-data-dir"},
		{"sweep", []string{"--local", "--store-nodes", "2"}, "--store-nodes"},
		{"sweep", []string{"--target", "http://127.0.0.1:1", "--store", "asd"}, "--store"},
		{"gate", []string{"--baseline-chf", "a", "--candidate-chf", "b", "--store", "bogus"}, "--store"},
	} {
		args := append([]string{"--results", filepath.Join(dir, "results"), "--out", filepath.Join(dir, "out")}, c.args...)
		switch c.cmd {
		case "local":
			args = append([]string{"--results", filepath.Join(dir, "results")}, c.args...)
		case "gate":
			args = append([]string{"--out", filepath.Join(dir, "gate")}, c.args...)
		case "sweep":
			args = append([]string{"--out", filepath.Join(dir, "sweep")}, c.args...)
		}
		err := commands[c.cmd].run(args)
		if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s %v: exit %d, err %v; want exit 2 naming %s", c.cmd, c.args, code, err, c.want)
		}
	}
	for _, d := range []string{"results", "gate", "sweep"} {
		if _, err := os.Stat(filepath.Join(dir, d)); !os.IsNotExist(err) {
			t.Errorf("%s exists after refused arguments", d)
		}
	}
}

// testAsd returns the real Aerospike server for the tests: $CHF_TEST_ASD,
// else ../shared/aerospike/asd from the repository root; it skips the
// test, saying why, when there is none.
func testAsd(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := asd.DefaultBinary(root)
	if err != nil {
		t.Skipf("no Aerospike server to run against: %v", err)
	}
	return bin
}

// storeRun runs `loadgen local` with args and returns its result and
// output; errors during faults may fail the error threshold (exit 6),
// any other failure (a store that does not start, exit 3 for the
// audit) fails the test.
func storeRun(t *testing.T, ctx context.Context, loadgen, chf string, args ...string) (*report.Result, string) {
	t.Helper()
	res, out, results := runLocal(t, ctx, loadgen, chf, append([]string{"--rate", "200"}, args...)...)
	a := res.Audit
	if !a.OK || a.Skipped || a.Checked == 0 || a.Negative != 0 || a.Unreadable != 0 || a.Reserved != 0 ||
		a.Debited != a.Charged || a.Mismatches != 0 || a.Unresolved != 0 || !a.Independent || a.ExpectedMismatches != 0 {
		t.Errorf("audit not exact: %+v\n%s", a, out)
	}
	// The store's work directory is under the run's directory, and no
	// asd outlives the run.
	if dirs, _ := filepath.Glob(filepath.Join(results, "*", "asd", "node0")); len(dirs) != 1 {
		t.Errorf("asd's directory is not under the run's: %v", dirs)
	}
	if pids, _ := exec.Command("pgrep", "-f", results).Output(); len(pids) > 0 {
		t.Errorf("processes of the run still running: %s", pids)
	}
	return res, out
}

// runLocal runs `loadgen local` (warm-up and ramp-up 500 ms, 2000
// accounts, then args) with its results under a temporary directory, and
// returns the result, the output and that directory. Errors during faults
// may fail the error threshold (exit 6); any other failure (exit 3 for
// the audit) fails the test.
func runLocal(t *testing.T, ctx context.Context, loadgen, chf string, args ...string) (*report.Result, string, string) {
	t.Helper()
	results := t.TempDir()
	base := []string{"local", "--chf", chf, "--warmup", "500ms", "--ramp-up", "500ms",
		"--accounts", "2000", "--results", results, "--progress", "plain"}
	cmd := exec.CommandContext(ctx, loadgen, append(base, args...)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("loadgen local %s: %v", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == exitThreshold) {
		t.Fatalf("loadgen local: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(results, "*", "result.json"))
	if len(files) != 1 {
		t.Fatalf("result files %v\n%s", files, out)
	}
	res, err := report.ReadJSON(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return res, string(out), results
}

// TestLocalStoreAsd runs `loadgen local` on the real Aerospike server:
// one node, then a 3-node cluster (replication factor 2) with one node
// killed and restarted mid-run. Both audits must be exact, the
// provenance must name Aerospike and its build, the fault must be
// reported with the store's figures, and asd's CPU must be measured as a
// component. Skipped without the binary; under CI=true a binary that
// does not start fails.
func TestLocalStoreAsd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the CHF on the real Aerospike server")
	}
	bin := testAsd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	loadgen, chf := buildBinaries(t)
	t.Run("one node", func(t *testing.T) {
		res, out := storeRun(t, ctx, loadgen, chf, "--store", "asd", "--asd-binary", bin, "--duration", "3s")
		st := res.Provenance.Store
		if st == nil || st.Kind != "aerospike" || st.Nodes != 1 || st.External || len(st.Hosts) != 1 || st.Namespace != "chf" ||
			!strings.Contains(st.Build, "Aerospike") || !strings.ContainsAny(st.Build, "0123456789") {
			t.Errorf("provenance store %+v", st)
		}
		if !strings.Contains(out, "store aerospike (Aerospike") {
			t.Errorf("the summary does not name the store:\n%s", out)
		}
		if res.Errors != 0 {
			t.Errorf("%d errors without a fault\n%s", res.Errors, out)
		}
		if _, ok := res.CPUSeconds["asd"]; !ok {
			t.Errorf("asd's CPU not measured: %v", res.CPUSeconds)
		}
	})
	t.Run("three nodes, one killed", func(t *testing.T) {
		res, out := storeRun(t, ctx, loadgen, chf, "--store", "asd", "--asd-binary", bin, "--store-nodes", "3",
			"--duration", "8s", "--timeout", "2s", "--fault-validity", "2s", "--fault", "kill:asd1:2s:2s")
		st := res.Provenance.Store
		if st == nil || st.Kind != "aerospike" || st.Nodes != 3 || len(st.Hosts) != 3 {
			t.Errorf("provenance store %+v", st)
		}
		if len(res.StoreFaults) != 1 {
			t.Fatalf("store faults %+v\n%s", res.StoreFaults, out)
		}
		f := res.StoreFaults[0]
		if f.Error != "" || f.Node != "asd1" || f.RestoredS <= f.AtS || f.MigrationSamples == 0 {
			t.Errorf("store fault %+v\n%s", f, out)
		}
		for _, c := range []string{"asd0", "asd2"} {
			if _, ok := res.CPUSeconds[c]; !ok {
				t.Errorf("%s's CPU not measured: %v", c, res.CPUSeconds)
			}
		}
		if !strings.Contains(out, "store faults:") {
			t.Errorf("the summary does not show the store fault:\n%s", out)
		}
		t.Logf("store fault: errors %d during, %d after, error-free %.0fs after, migrations max %d (%d samples), back at %.1fs",
			f.ErrorsDuringFault, f.ErrorsAfter, f.RecoverS, f.MigrationsMax, f.MigrationSamples, f.RestoredS)
	})
}
