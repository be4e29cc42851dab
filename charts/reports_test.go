package charts_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestTemplateWithoutFlags renders each chart as a new user would, with
// no flags at all (helm then assumes Kubernetes v1.20).
func TestTemplateWithoutFlags(t *testing.T) {
	helmBin(t)
	for _, c := range []string{"chf", "loadgen"} {
		if out, err := helm(t, "template", c); err != nil {
			t.Errorf("helm template %s: %v", c, err)
		} else if len(out) == 0 {
			t.Errorf("helm template %s rendered nothing", c)
		}
	}
}

var (
	loadgenOnce sync.Once
	loadgenBin  string
	loadgenDir  string // removed by TestMain
	loadgenErr  error
)

// buildLoadgen builds ./cmd/loadgen once for the tests of this file.
func buildLoadgen(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds ./cmd/loadgen; skipped with -short")
	}
	loadgenOnce.Do(func() {
		dir, err := os.MkdirTemp("", "charts-loadgen-")
		if err != nil {
			loadgenErr = err
			return
		}
		loadgenDir = dir
		loadgenBin = filepath.Join(dir, "loadgen")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", loadgenBin, "./cmd/loadgen")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			loadgenErr = errors.New("cannot build ./cmd/loadgen: " + err.Error() + "\n" + string(out))
		}
	})
	if loadgenErr != nil {
		t.Fatal(loadgenErr)
	}
	return loadgenBin
}

// runCheckFlags runs `loadgen <args> --check-flags` and returns its exit code.
func runCheckFlags(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("cannot run loadgen: %v", err)
	return -1, ""
}

// TestLoadgenSchemaTargetsMatchBinary: every target example of the
// loadgen chart's schema is accepted by the schema (helm template) and by
// the binary (loadgen run --check-flags); targets the schema refuses the
// binary refuses too.
func TestLoadgenSchemaTargetsMatchBinary(t *testing.T) {
	helmBin(t)
	bin := buildLoadgen(t)
	b, err := os.ReadFile(filepath.Join("loadgen", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Target struct {
				Pattern  string   `json:"pattern"`
				Examples []string `json:"examples"`
			} `json:"target"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	pat := regexp.MustCompile(schema.Properties.Target.Pattern)
	if len(schema.Properties.Target.Examples) < 3 {
		t.Fatalf("the schema's target has %d examples, want some of each kind", len(schema.Properties.Target.Examples))
	}
	for _, ex := range schema.Properties.Target.Examples {
		if !pat.MatchString(ex) {
			t.Errorf("schema example %q does not match the schema's own pattern", ex)
		}
		if _, err := helm(t, "template", "loadgen", "--set-json", "target="+strconvQuote(ex)); err != nil {
			t.Errorf("schema example %q: %v", ex, err)
		}
		if code, out := runCheckFlags(t, bin, "run", "--check-flags", "--target", ex, "--shard", "0/4"); code != 0 {
			t.Errorf("schema example %q: loadgen run --check-flags exit %d, want 0:\n%s", ex, code, out)
		}
	}
	for _, bad := range []string{"http://a:8080,https://b:8443", "http://a:8080,diameter://b:3868", "diameter://a:3868,http://b:8080", "grpc://a:1"} {
		if pat.MatchString(bad) {
			t.Errorf("the schema accepts %q", bad)
		}
		if _, err := helm(t, "template", "loadgen", "--set-json", "target="+strconvQuote(bad)); err == nil {
			t.Errorf("helm template accepts target %q", bad)
		}
		if code, _ := runCheckFlags(t, bin, "run", "--check-flags", "--target", bad); code != 2 {
			t.Errorf("loadgen run --check-flags --target %s: exit %d, want 2 (usage)", bad, code)
		}
	}
}

// strconvQuote makes s a JSON string for --set-json (a target list has
// commas, which --set splits).
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// argValue returns the value following flag in args.
func argValue(args []string, flag string) (string, bool) {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// TestLoadgenStartBarrierAndHelmTest: every shard gets the same
// --start-at (startAt verbatim, else startDelay after rendering), and the
// chart's `helm test` pod runs the Job's own flags through
// `loadgen run --check-flags`, which accepts them.
func TestLoadgenStartBarrierAndHelmTest(t *testing.T) {
	helmBin(t)
	before := time.Now().Truncate(time.Second)
	o := renderDecoded(t, loadgenModels[0], "--set", "label=calico-pinned", "--set", "startDelay=3m", "--set-json", `scenario={"name":"x"}`)
	job := o.jobs[0].Spec.Template.Spec.Containers[0].Args
	v, ok := argValue(job, "--start-at")
	if !ok {
		t.Fatalf("the Job passes no --start-at: %q", job)
	}
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		t.Fatalf("--start-at %q: %v", v, err)
	}
	if d := at.Sub(before); d < 3*time.Minute-time.Second || d > 3*time.Minute+time.Minute {
		t.Errorf("--start-at %s is %s after rendering, want startDelay 3m", v, d)
	}
	fixed := renderDecoded(t, loadgenModels[0], "--set", "startAt=2030-01-02T03:04:05Z")
	if v, _ := argValue(fixed.jobs[0].Spec.Template.Spec.Containers[0].Args, "--start-at"); v != "2030-01-02T03:04:05Z" {
		t.Errorf("startAt=2030-01-02T03:04:05Z renders --start-at %q", v)
	}
	if _, err := helm(t, "template", "loadgen", "--set", "startAt=tomorrow"); err == nil {
		t.Errorf("the schema accepts startAt=tomorrow")
	}

	var test *corev1.Pod
	for _, p := range o.pods {
		if p.Annotations["helm.sh/hook"] == "test" {
			test = p
		}
	}
	if test == nil {
		t.Fatal("the loadgen chart has no helm test pod")
	}
	checkHardened(t, "helm test pod", test.Spec)
	args := test.Spec.Containers[0].Args
	if !slices.Contains(args, "--check-flags") {
		t.Fatalf("the helm test does not run --check-flags: %q", args)
	}
	// The test pod passes what the Job passes, except the per-pod parts.
	for _, f := range []string{"--target", "--rate", "--duration", "--scenario", "--label"} {
		jv, _ := argValue(job, f)
		tv, _ := argValue(args, f)
		if jv != tv {
			t.Errorf("%s: the Job passes %q, the helm test %q", f, jv, tv)
		}
	}
	bin := buildLoadgen(t)
	scen := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(scen, []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := slices.Clone(args)
	if i := slices.Index(run, "/etc/loadgen/scenario.yaml"); i >= 0 {
		run[i] = scen
	}
	if code, out := runCheckFlags(t, bin, run...); code != 0 || !strings.Contains(out, `"targets"`) {
		t.Errorf("loadgen %q: exit %d, want 0 and the effective config:\n%s", run, code, out)
	}
}
