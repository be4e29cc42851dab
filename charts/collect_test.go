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
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("loadgen", "collect.sh"), "-n", "lab", "-r", "load", "-o", out, "-t", "5")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	stderr, err := cmd.CombinedOutput()
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
