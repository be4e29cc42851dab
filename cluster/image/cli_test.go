package image_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cluster/image"
)

func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := image.Main(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestMainUsage(t *testing.T) {
	code, out, _ := runMain(t, "-h")
	if code != 0 || !strings.Contains(out, "ctr -n k8s.io images import") || !strings.Contains(out, "-only") {
		t.Errorf("-h: exit %d, stdout %q", code, out)
	}
	f := func(want string, args ...string) {
		t.Helper()
		code, _, errb := runMain(t, args...)
		if code != 2 || !strings.Contains(errb, want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", args, code, errb, want)
		}
	}
	f("-bogus", "--bogus")
	f(`--only: unknown image "nginx"`, "--only", "chf,nginx", "--tag", "1")
	f(`unexpected argument "chf"`, "chf")
	f("--repo: empty", "--repo", "", "--tag", "1")
	f(`--repo "UPPER"`, "--repo", "UPPER", "--tag", "1")
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	f("SOURCE_DATE_EPOCH", "--tag", "1")
}

func TestMainBuilds(t *testing.T) {
	bins, out := binDir(t), t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	code, stdout, errb := runMain(t, "--bin-dir", bins, "--out", out, "--repo", "example.test/chf", "--only", "pause", "--src", "../..")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	tag, err := image.DefaultTag("../..")
	if err != nil {
		t.Fatal(err)
	}
	ref := "example.test/chf/pause:" + tag
	fields := strings.Split(strings.TrimSpace(stdout), "\t")
	if len(fields) != 3 || fields[0] != ref || fields[1] != filepath.Join(out, "pause.tar") || !strings.HasPrefix(fields[2], "sha256:") {
		t.Fatalf("stdout %q, want %s, its archive and digest", stdout, ref)
	}
	_, cf, _ := readArchive(t, fields[1], ref)
	if !cf.Created.Time.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("created %v, want SOURCE_DATE_EPOCH", cf.Created)
	}
}

// A missing binary names the file and how to build it.
func TestMainMissingBinary(t *testing.T) {
	bins := binDir(t)
	os.Remove(filepath.Join(bins, "loadgen"))
	code, _, errb := runMain(t, "--bin-dir", bins, "--out", t.TempDir(), "--tag", "1", "--only", "loadgen")
	if code != 1 || !strings.Contains(errb, filepath.Join(bins, "loadgen")+" does not exist") || !strings.Contains(errb, "make images") {
		t.Errorf("exit %d, stderr %q", code, errb)
	}
}
