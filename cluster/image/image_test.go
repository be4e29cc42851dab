package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"

	"github.com/chf-testbed/testbed/cluster/image"
)

var (
	pauseOnce sync.Once
	pauseBin  []byte
	pauseErr  error
)

// binDir returns a directory holding a real static binary (the pause,
// built once) under every name the images take.
func binDir(t *testing.T) string {
	t.Helper()
	pauseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "image-test-")
		if err != nil {
			pauseErr = err
			return
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, "pause"), "./pause")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			pauseErr = errors.New(err.Error() + "\n" + string(out))
			return
		}
		pauseBin, pauseErr = os.ReadFile(filepath.Join(dir, "pause"))
	})
	if pauseErr != nil {
		t.Fatalf("cannot build the pause binary: %v", pauseErr)
	}
	dir := t.TempDir()
	for _, n := range []string{"chf", "aslite", "loadgen", "pause"} {
		// Distinct bytes per name, to see each land where it belongs.
		if err := os.WriteFile(filepath.Join(dir, n), append(slices.Clone(pauseBin), n...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeCA writes a CA bundle the test can recognise.
func fakeCA(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func build(t *testing.T, o image.Options) []image.Built {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	built, err := image.Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return built
}

// file is one entry of an image's layer.
type file struct {
	hdr  *tar.Header
	data []byte
}

// readArchive reads an archive back as an importer would: the image under
// ref, its config and its one layer's files.
func readArchive(t *testing.T, path, ref string) (v1.Image, *v1.ConfigFile, map[string]file) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("cannot read %s as %s: %v", path, ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%s: %d layers, want 1", ref, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(h.Name, "/")] = file{h, data}
	}
	return img, cf, files
}

func TestBuild(t *testing.T) {
	bins, ca, out := binDir(t), fakeCA(t), t.TempDir()
	built := build(t, image.Options{BinDir: bins, OutDir: out, Tag: "1.2.3", CABundle: ca})
	var names []string
	for _, b := range built {
		names = append(names, b.Name)
	}
	if !slices.Equal(names, []string{"chf", "loadgen", "pause"}) {
		t.Fatalf("built %v", names)
	}
	caData, _ := os.ReadFile(ca)
	for i, s := range image.Specs() {
		b := built[i]
		if want := "chf-testbed/" + s.Name + ":1.2.3"; b.Ref != want || b.Path != filepath.Join(out, s.Name+".tar") {
			t.Errorf("%s: ref %q path %q, want %q in %s", s.Name, b.Ref, b.Path, want, out)
		}
		img, cf, files := readArchive(t, b.Path, b.Ref)
		if d, _ := img.Digest(); d.String() != b.Digest {
			t.Errorf("%s: archive digest %s, Build said %s", s.Name, d, b.Digest)
		}
		if id, _ := img.ConfigName(); id.String() != b.ID {
			t.Errorf("%s: archive image ID %s, Build said %s", s.Name, id, b.ID)
		}
		c := cf.Config
		if !slices.Equal(c.Entrypoint, s.Entrypoint) || c.User != s.User || c.WorkingDir != s.WorkingDir {
			t.Errorf("%s: entrypoint %q user %q workdir %q, want %q %q %q", s.Name, c.Entrypoint, c.User, c.WorkingDir, s.Entrypoint, s.User, s.WorkingDir)
		}
		var ports []string
		for p := range c.ExposedPorts {
			ports = append(ports, p)
		}
		slices.Sort(ports)
		want := slices.Sorted(slices.Values(s.Ports))
		if !slices.Equal(ports, want) {
			t.Errorf("%s: exposed %v, want %v", s.Name, ports, want)
		}
		if v := c.Labels["org.opencontainers.image.version"]; v != "1.2.3" {
			t.Errorf("%s: version label %q", s.Name, v)
		}
		if !cf.Created.Time.Equal(time.Unix(0, 0)) || cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
			t.Errorf("%s: created %v os %s arch %s", s.Name, cf.Created, cf.OS, cf.Architecture)
		}
		for _, bin := range s.Binaries {
			f, ok := files[filepath.Join(s.Dir, bin)]
			if !ok || f.hdr.Mode != 0o755 || !bytes.HasSuffix(f.data, []byte(bin)) {
				t.Errorf("%s: binary %s/%s missing, wrong mode or bytes", s.Name, s.Dir, bin)
			}
		}
		for p, f := range files {
			if !f.hdr.ModTime.Equal(time.Unix(0, 0)) {
				t.Errorf("%s: %s mtime %v", s.Name, p, f.hdr.ModTime)
			}
		}
		if !s.Rootfs {
			if len(files) != len(s.Binaries) {
				t.Errorf("%s: %d files, want its binaries only", s.Name, len(files))
			}
			continue
		}
		checkRootfs(t, s.Name, files, caData)
	}
}

func checkRootfs(t *testing.T, img string, files map[string]file, ca []byte) {
	t.Helper()
	dir := func(p string, mode int64, uid int) {
		t.Helper()
		f, ok := files[p]
		if !ok || f.hdr.Typeflag != tar.TypeDir || f.hdr.Mode != mode || f.hdr.Uid != uid || f.hdr.Gid != uid {
			t.Errorf("%s: %s is not a directory %o owned by %d: %+v", img, p, mode, uid, f.hdr)
		}
	}
	dir("/tmp", 0o1777, 0)
	dir("/home/nonroot", 0o700, image.NonRoot)
	dir("/usr/local/bin", 0o755, 0)
	for p, want := range map[string]string{
		"/etc/passwd": "nonroot:x:65532:65532:nonroot:/home/nonroot:",
		"/etc/group":  "nonroot:x:65532:",
		CAPath:        string(ca),
	} {
		f, ok := files[p]
		if !ok || f.hdr.Mode != 0o644 || f.hdr.Uid != 0 || !strings.Contains(string(f.data), want) {
			t.Errorf("%s: %s lacks %q or is not 0644 root", img, p, want)
		}
	}
}

// CAPath is where the images hold the CA bundle.
const CAPath = "/etc/ssl/certs/ca-certificates.crt"

// The same inputs give the same archives; a changed tag or time changes
// the digest.
func TestBuildReproducible(t *testing.T) {
	bins, ca := binDir(t), fakeCA(t)
	o := image.Options{BinDir: bins, Tag: "1.0.0", CABundle: ca, Names: []string{"chf", "pause"}}
	digests := func(o image.Options) (ds []string) {
		o.OutDir = t.TempDir()
		for _, b := range build(t, o) {
			data, err := os.ReadFile(b.Path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			ds = append(ds, b.Digest, string(sum[:]))
		}
		return ds
	}
	first := digests(o)
	if again := digests(o); !slices.Equal(first, again) {
		t.Errorf("two builds of the same inputs differ")
	}
	o.Tag = "1.0.1"
	if other := digests(o); other[0] == first[0] {
		t.Errorf("a new tag kept digest %s", first[0])
	}
	o.Tag, o.Created = "1.0.0", time.Unix(1700000000, 0)
	if other := digests(o); other[0] == first[0] {
		t.Errorf("a new creation time kept digest %s", first[0])
	}
}

func TestBuildErrors(t *testing.T) {
	bins, ca := binDir(t), fakeCA(t)
	o := image.Options{BinDir: bins, OutDir: t.TempDir(), Tag: "1", CABundle: ca}
	f := func(name string, o image.Options, want string) {
		t.Helper()
		_, err := image.Build(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, want)
		}
	}
	os.Remove(filepath.Join(bins, "aslite"))
	f("missing", withNames(o, "chf"), filepath.Join(bins, "aslite")+" does not exist")
	if _, err := image.Build(context.Background(), withNames(o, "chf")); !errors.Is(err, image.ErrMissingBinary) {
		t.Errorf("missing binary: %v is not ErrMissingBinary", err)
	}
	if _, err := os.Stat(filepath.Join(o.OutDir, "chf.tar")); !os.IsNotExist(err) {
		t.Errorf("a failed build left chf.tar: %v", err)
	}
	os.WriteFile(filepath.Join(bins, "loadgen"), []byte("#!/bin/sh\n"), 0o755)
	f("not ELF", withNames(o, "loadgen"), "not an ELF executable")
	if sh, err := os.ReadFile("/bin/sh"); err == nil { // dynamically linked on Debian
		os.WriteFile(filepath.Join(bins, "loadgen"), sh, 0o755)
		f("dynamic", withNames(o, "loadgen"), "dynamically linked")
	}
	noCA := withNames(o, "pause", "loadgen")
	noCA.CABundle = filepath.Join(t.TempDir(), "none.crt")
	os.WriteFile(filepath.Join(bins, "loadgen"), pauseBin, 0o755)
	f("no CA bundle", noCA, "cannot read the CA bundle "+noCA.CABundle)
	f("unknown", withNames(o, "chf", "nginx"), `unknown image "nginx" (known: chf, loadgen, pause)`)
	f("no tag", image.Options{BinDir: bins, OutDir: o.OutDir, Names: []string{"pause"}}, "no tag")
}

func withNames(o image.Options, names ...string) image.Options {
	o.Names = names
	return o
}

// The defaults are what the charts use: repository chf-testbed/<name> and
// tag the chf chart's appVersion.
func TestDefaultsMatchCharts(t *testing.T) {
	root := filepath.Join("..", "..")
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(root, "charts", "chf", "Chart.yaml"), &chart)
	tag, err := image.DefaultTag(root)
	if err != nil || tag != chart.AppVersion || tag == "" {
		t.Errorf("DefaultTag: %q, %v; the chart's appVersion is %q", tag, err, chart.AppVersion)
	}
	for _, c := range []struct{ chart, image string }{{"chf", "chf"}, {"loadgen", "loadgen"}} {
		var values struct {
			Image struct{ Repository string } `json:"image"`
		}
		readYAML(t, filepath.Join(root, "charts", c.chart, "values.yaml"), &values)
		if got := image.DefaultRepo + "/" + c.image; got != values.Image.Repository {
			t.Errorf("chart %s pulls %q, the image is %q", c.chart, values.Image.Repository, got)
		}
	}
	if got := image.PauseRef(image.DefaultRepo, "0.1.0"); got != "chf-testbed/pause:0.1.0" {
		t.Errorf("PauseRef: %q", got)
	}
}

func readYAML(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

func TestBuildArgs(t *testing.T) {
	got := strings.Join(image.BuildArgs("/o", "v9"), " ")
	want := "build -trimpath -buildvcs=false -ldflags -s -w -X main.version=v9 -o /o/ ./cmd/chf ./cmd/aslite ./cmd/loadgen ./cluster/image/pause"
	if got != want {
		t.Errorf("BuildArgs:\n got %s\nwant %s", got, want)
	}
}
