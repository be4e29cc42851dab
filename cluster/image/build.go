package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ErrMissingBinary is returned (wrapped) by Build when a binary an image
// needs is not in the binary directory.
var ErrMissingBinary = errors.New("image: missing binary")

// Options says what Build builds and where.
type Options struct {
	// BinDir holds the static binaries the images take (BuildBinaries
	// writes them).
	BinDir string
	// OutDir receives <name>.tar per image; created if missing.
	OutDir string
	// Repo and Tag make the references <Repo>/<name>:<Tag>; Repo defaults
	// to DefaultRepo. Tag is required (DefaultTag reads the charts').
	Repo string
	Tag  string
	// Names selects images by Spec.Name; empty means all of Specs.
	Names []string
	// Created is the images' creation time and every file's mtime; zero
	// means the Unix epoch, so that the same inputs give the same digest.
	Created time.Time
	// CABundle is the host file copied to /etc/ssl/certs/ca-certificates.crt;
	// empty means CABundle (the same path on the host).
	CABundle string
}

// Built is one image archive Build wrote.
type Built struct {
	Name string
	// Ref is the tag the archive carries, <repo>/<name>:<tag>.
	Ref string
	// Path is the archive (docker-save layout, one gzip layer).
	Path string
	// Digest is the manifest's digest; ID is the config's digest (the
	// image ID that crictl and docker show, which an import keeps).
	Digest string
	ID     string
}

// Build writes one archive per selected image. It reads the binaries from
// o.BinDir and refuses a missing, non-ELF or dynamically linked one (a
// scratch image has no loader). It is safe to call concurrently with
// different OutDirs.
func Build(ctx context.Context, o Options) ([]Built, error) {
	if o.Repo == "" {
		o.Repo = DefaultRepo
	}
	if o.Tag == "" {
		return nil, errors.New("cannot build images: no tag")
	}
	if o.CABundle == "" {
		o.CABundle = CABundle
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	o.Created = o.Created.UTC()
	specs, err := Select(o.Names)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the output directory: %w", err)
	}
	var out []Built
	for _, s := range specs {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("cannot build image %s: %w", s.Name, err)
		}
		b, err := buildOne(s, o)
		if err != nil {
			return out, fmt.Errorf("cannot build image %s: %w", s.Name, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// Select returns the specs named, in Specs order; empty names select all.
// An unknown name is an error listing the known ones.
func Select(names []string) ([]Spec, error) {
	all := Specs()
	if len(names) == 0 {
		return all, nil
	}
	var known []string
	for _, s := range all {
		known = append(known, s.Name)
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown image %q (known: %s)", n, strings.Join(known, ", "))
		}
	}
	var out []Spec
	for _, s := range all {
		if slices.Contains(names, s.Name) {
			out = append(out, s)
		}
	}
	return out, nil
}

func buildOne(s Spec, o Options) (Built, error) {
	ref := Ref(o.Repo, s.Name, o.Tag)
	tag, err := name.NewTag(ref)
	if err != nil {
		return Built{}, fmt.Errorf("cannot parse reference %q: %w", ref, err)
	}
	layerTar, arch, err := rootfs(s, o)
	if err != nil {
		return Built{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return Built{}, fmt.Errorf("cannot make the layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.Created},
			CreatedBy: "chf-testbed cluster/image: " + strings.Join(s.Binaries, " "),
			Comment:   "static binaries on scratch",
		},
	})
	if err != nil {
		return Built{}, fmt.Errorf("cannot append the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Built{}, fmt.Errorf("cannot read the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: o.Created}
	cf.Author = "github.com/chf-testbed/testbed"
	cf.Config = v1.Config{
		Entrypoint: s.Entrypoint,
		User:       s.User,
		WorkingDir: s.WorkingDir,
		Env:        s.Env,
		Labels: map[string]string{
			"org.opencontainers.image.title":   s.Name,
			"org.opencontainers.image.version": o.Tag,
			"org.opencontainers.image.source":  "https://github.com/chf-testbed/testbed",
		},
	}
	if len(s.Ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.Ports {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return Built{}, fmt.Errorf("cannot set the config: %w", err)
	}
	p := filepath.Join(o.OutDir, s.Name+".tar")
	// Write beside and rename, so a failed build leaves no half archive.
	tmp := p + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return Built{}, fmt.Errorf("cannot write %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return Built{}, fmt.Errorf("cannot write %s: %w", p, err)
	}
	d, err := img.Digest()
	if err != nil {
		return Built{}, fmt.Errorf("cannot compute the digest: %w", err)
	}
	id, err := img.ConfigName()
	if err != nil {
		return Built{}, fmt.Errorf("cannot compute the image ID: %w", err)
	}
	return Built{Name: s.Name, Ref: ref, Path: p, Digest: d.String(), ID: id.String()}, nil
}

// entry is one file of the layer; data is nil for a directory.
type entry struct {
	path     string // absolute, clean
	mode     int64  // permission bits, sticky included
	uid, gid int
	data     []byte
	dir      bool
}

// rootfs returns the layer's uncompressed tar and the binaries' GOARCH.
func rootfs(s Spec, o Options) ([]byte, string, error) {
	var files []entry
	arch := ""
	for _, b := range s.Binaries {
		src := filepath.Join(o.BinDir, b)
		data, a, err := readStatic(src)
		if err != nil {
			return nil, "", err
		}
		if arch != "" && a != arch {
			return nil, "", fmt.Errorf("binary %s is for %s, the others for %s", src, a, arch)
		}
		arch = a
		files = append(files, entry{path: path.Join(s.Dir, b), mode: 0o755, data: data})
	}
	if s.Rootfs {
		ca, err := os.ReadFile(o.CABundle)
		if err != nil {
			return nil, "", fmt.Errorf("cannot read the CA bundle %s (Debian: apt-get install ca-certificates): %w", o.CABundle, err)
		}
		files = append(files,
			entry{path: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
			entry{path: "/etc/group", mode: 0o644, data: []byte(group)},
			entry{path: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
			entry{path: CABundle, mode: 0o644, data: ca},
			entry{path: "/tmp", mode: 0o1777, dir: true},
			entry{path: "/home/nonroot", mode: 0o700, uid: NonRoot, gid: NonRoot, dir: true},
		)
	}
	files = withParents(files)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    strings.TrimPrefix(f.path, "/"),
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: o.Created,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", fmt.Errorf("cannot write the layer: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, "", fmt.Errorf("cannot write the layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", fmt.Errorf("cannot write the layer: %w", err)
	}
	return buf.Bytes(), arch, nil
}

// withParents adds every missing parent directory (0755, root) and sorts
// the entries by path, so a parent precedes its children and the layer's
// bytes depend on the files only.
func withParents(files []entry) []entry {
	have := map[string]bool{}
	for _, f := range files {
		have[f.path] = true
	}
	for _, f := range files {
		for d := path.Dir(f.path); d != "/"; d = path.Dir(d) {
			if !have[d] {
				have[d] = true
				files = append(files, entry{path: d, mode: 0o755, dir: true})
			}
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files
}

// The users and groups of distroless's static image.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"tty:x:5:\n" +
		"staff:x:50:\n" +
		"nonroot:x:65532:\n"
)

var elfArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// readStatic reads a binary and checks that it is a statically linked
// Linux ELF executable, returning its GOARCH.
func readStatic(p string) ([]byte, string, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%w: %s does not exist; build the static binaries first (make images, or --build)", ErrMissingBinary, p)
	}
	if err != nil {
		return nil, "", fmt.Errorf("cannot read binary: %w", err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("binary %s is not an ELF executable: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, "", fmt.Errorf("binary %s is dynamically linked; a scratch image has no loader (build it with CGO_ENABLED=0)", p)
		}
	}
	arch, ok := elfArch[f.Machine]
	if !ok {
		return nil, "", fmt.Errorf("binary %s: unsupported machine %v", p, f.Machine)
	}
	return data, arch, nil
}

// sourceDateEpoch parses SOURCE_DATE_EPOCH (seconds since the epoch), the
// reproducible-builds convention for a fixed creation time.
func sourceDateEpoch(v string) (time.Time, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", v)
	}
	return time.Unix(n, 0).UTC(), nil
}
