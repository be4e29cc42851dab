package charts_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCollectScript runs charts/loadgen/collect.sh against a fake kubectl
// (two shards, the second one's loadgen failed) and a fake loadgen, and
// checks that it copies every shard, merges them and reports the failure.
func TestCollectScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := t.TempDir()
	out := filepath.Join(t.TempDir(), "res")
	calls := filepath.Join(bin, "calls.log")
	fakeKubectl := `#!/usr/bin/env bash
echo "$*" >>"` + calls + `"
[ "$1" = -n ] && [ "$2" = lab ] || { echo "bad namespace args: $*" >&2; exit 9; }
shift 2
case "$1 $2" in
"get job") [ "$3" = load-loadgen ] && echo -n 2 ;;
"get pod") exit 1 ;; # no reader pod: pod mode
"get pods")
	printf '0 load-loadgen-0-abc 0\n1 load-loadgen-1-def 3\n' ;;
"cp -c")
	[ "$3" = results ] || exit 8
	idx=${4##*shard-}; idx=${idx%.json}
	printf '{"shard":%s}\n' "$idx" >"$5" ;;
*) echo "unexpected kubectl $*" >&2; exit 7 ;;
esac
`
	stderr, err := runCollect(t, bin, fakeKubectl, "lab", out)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("collect.sh: want exit 1 for the failed shard, got %v\n%s", err, stderr)
	}
	if !strings.Contains(string(stderr), "shard 1: loadgen exited 3") {
		t.Errorf("failed shard not reported:\n%s", stderr)
	}
	merged, err := os.ReadFile(filepath.Join(out, "merged.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(merged) != "{\"shard\":0}\n{\"shard\":1}\n" {
		t.Errorf("merged.json = %q, want both shards in order", merged)
	}
}

// TestCollectScriptLogMode runs collect.sh on a Job of results.mode log:
// each shard's result is the last LOADGEN-RESULT line of its loadgen
// container's log; a shard without one is reported and fails the run.
func TestCollectScriptLogMode(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := t.TempDir()
	out := filepath.Join(t.TempDir(), "res")
	fakeKubectl := `#!/usr/bin/env bash
shift 2
case "$1 $2" in
"get job") printf '3 log\n' ;;
"get pod") echo "log mode must not look for a reader pod" >&2; exit 7 ;;
"get pods") printf '0 load-loadgen-0-abc 0\n1 load-loadgen-1-def 0\n2 load-loadgen-2-ghi 1\n' ;;
"logs load-loadgen-0-abc") [ "$3 $4" = "-c loadgen" ] || exit 8
	printf 'starting\nLOADGEN-RESULT {"shard":"old"}\nsummary\nLOADGEN-RESULT {"shard":"0/3"}\n' ;;
"logs load-loadgen-1-def") printf 'LOADGEN-RESULT {"shard":"1/3"}\n' ;;
"logs load-loadgen-2-ghi") printf 'loadgen: cannot connect\n' ;;
*) echo "unexpected kubectl $*" >&2; exit 7 ;;
esac
`
	stderr, err := runCollect(t, bin, fakeKubectl, "chf", out)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("collect.sh: want exit 1 for shard 2, got %v\n%s", err, stderr)
	}
	for _, want := range []string{"results mode log", "shard 2: no LOADGEN-RESULT line", "shard 2: loadgen exited 1", "merged 2 of 3 shards"} {
		if !strings.Contains(string(stderr), want) {
			t.Errorf("collect.sh does not say %q:\n%s", want, stderr)
		}
	}
	merged, err := os.ReadFile(filepath.Join(out, "merged.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(merged) != "{\"shard\":\"0/3\"}\n{\"shard\":\"1/3\"}\n" {
		t.Errorf("merged.json = %q, want the last result line of shards 0 and 1", merged)
	}
	if _, err := os.Stat(filepath.Join(out, "shard-2.log")); err != nil {
		t.Errorf("the log of the shard without a result is not kept: %v", err)
	}
}

// runCollect runs charts/loadgen/collect.sh for release "load" in ns with
// fake kubectl (its script given) and loadgen (merge concatenates) first
// on PATH, and returns its output and error.
func runCollect(t *testing.T, bin, fakeKubectl, ns, out string) ([]byte, error) {
	t.Helper()
	fakeLoadgen := `#!/usr/bin/env bash
[ "$1" = merge ] && [ "$2" = -o ] || exit 6
o=$3; shift 3
cat "$@" >"$o"
`
	for name, body := range map[string]string{"kubectl": fakeKubectl, "loadgen": fakeLoadgen} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("loadgen", "collect.sh"), "-n", ns, "-r", "load", "-o", out, "-t", "5")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	return cmd.CombinedOutput()
}
