package cluster

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cluster/image"
	"github.com/chf-testbed/testbed/cluster/kube"
)

// nodeBin is where cluster/build.sh put the control plane and the node's
// binaries (make cluster-test sets CHF_KUBE_BIN; plain go test ./...
// skips); without root the test skips, but fails under CI.
func nodeBin(t *testing.T) string {
	d := os.Getenv("CHF_KUBE_BIN")
	ci := os.Getenv("CI") == "true"
	switch {
	case d == "":
		// plain go test ./... (make test-go): cluster-test runs it
		t.Skip("CHF_KUBE_BIN not set: the node test runs under `make cluster-test` (cluster/build.sh --node)")
	case os.Geteuid() != 0 && ci:
		t.Fatal("not root under CI: a real node needs root (network namespaces, mounts, cgroups)")
	case os.Geteuid() != 0:
		t.Skip("not root: a real node needs root (network namespaces, mounts, cgroups)")
	}
	for _, b := range []string{"kubelet", "kube-proxy", "kube-scheduler", "kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(d, b)); err != nil {
			t.Fatalf("no %s in CHF_KUBE_BIN=%s (cluster/build.sh --node)", b, d)
		}
	}
	return d
}

// images builds the chf, loadgen and pause archives (CHF_IMAGES names a
// directory that already holds them: make cluster-test passes make
// images').
func images(t *testing.T) ([]string, string) {
	tag, err := image.DefaultTag(repoRoot())
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("CHF_IMAGES")
	if out == "" {
		out = t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		bin := filepath.Join(out, "bin")
		if err := image.BuildBinaries(ctx, repoRoot(), bin, tag); err != nil {
			t.Fatal(err)
		}
		if _, err := image.Build(ctx, image.Options{BinDir: bin, OutDir: out, Tag: tag}); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	for _, n := range []string{"chf", "loadgen", "pause"} {
		files = append(files, filepath.Join(out, n+".tar"))
	}
	return files, "docker.io/" + image.PauseRef(image.DefaultRepo, tag)
}

func podNetnsNow() []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "cni-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// assertClean fails on anything a cluster in dir left on the host.
func assertClean(t *testing.T, dir string, before []string, created []string) {
	t.Helper()
	if left := kube.Leftovers(dir, before, created); len(left) > 0 {
		t.Fatalf("left on the host after the tear-down: %s", strings.Join(left, "; "))
	}
}

// TestNode checks a node's start and tear-down where they can go wrong: a
// start that fails (a kubelet that exits at once) and SIGINT during
// `cluster up`, each leaving nothing behind. The charts run on real nodes
// in TestLabCluster (two nodes, the lab's placement, the loadgen Job, the
// audit, in-pod discovery and the no-egress guard).
func TestNode(t *testing.T) {
	bin := nodeBin(t)
	imgs, pause := images(t)
	logf := func(format string, args ...any) { t.Logf(format, args...) }
	created := kube.MissingFixedPaths()

	t.Run("failed-start", func(t *testing.T) {
		// a kubelet that exits at once: up fails, and tears down
		bad := t.TempDir()
		for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
			if err := os.Symlink(filepath.Join(bin, b), filepath.Join(bad, b)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(bad, "kubelet"), []byte("#!/bin/sh\necho broken kubelet >&2\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		before := podNetnsNow()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		err := kube.Up(ctx, kube.Config{Dir: dir, Bin: bad, Images: imgs[2:], PauseImage: pause, Log: logf})
		if err == nil || !strings.Contains(err.Error(), "kubelet") {
			t.Fatalf("up with a broken kubelet: %v, want a failure naming the kubelet", err)
		}
		t.Logf("failed as expected: %v", firstLine(err.Error()))
		assertClean(t, dir, before, created)
	})

	t.Run("sigint", func(t *testing.T) {
		exe := filepath.Join(t.TempDir(), "cluster")
		if out, err := exec.Command("go", "build", "-o", exe, "../cmd/cluster").CombinedOutput(); err != nil {
			t.Fatalf("cannot build cmd/cluster: %v\n%s", err, out)
		}
		dir := t.TempDir()
		before := podNetnsNow()
		cmd := exec.Command(exe, "up", "--dir", dir, "--bin", bin, "--images", imgs[2], "--pause-image", pause)
		took := interruptAt(t, cmd, "starting containerd", 3*time.Minute, 2*time.Minute)
		t.Logf("SIGINT during up: exit 130, torn down in %v", took.Round(time.Millisecond))
		assertClean(t, dir, before, created)
	})
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// interruptAt starts cmd, sends SIGINT once a line of its stderr contains
// marker (within reach), and fails unless it exits 130 within teardown;
// it returns how long the exit took after the signal.
func interruptAt(t *testing.T, cmd *exec.Cmd, marker string, reach, teardown time.Duration) time.Duration {
	t.Helper()
	name := filepath.Base(cmd.Path) + " " + cmd.Args[1]
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(reach)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s ended before %q", name, marker)
			}
			if strings.Contains(l, marker) {
				break wait
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("%s: no %q in %v", name, marker, reach)
		}
	}
	t0 := time.Now()
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Fatalf("%s after SIGINT: exit %d (%v), want 130", name, code, err)
		}
	case <-time.After(teardown):
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not end within %v of SIGINT", name, teardown)
	}
	return time.Since(t0)
}
