package image_test

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/cluster/image"
)

// stage is one stage of the Dockerfile: its base and the instructions the
// images' equivalence depends on.
type stage struct {
	base       string
	text       string
	copies     [][]string // COPY --from=build arguments: sources..., destination
	entrypoint []string   // exec form
	user       string     // the last USER
	ports      []string   // EXPOSE, "8080/tcp"
}

// parseDockerfile splits the Dockerfile at each FROM into its named
// stages. It knows only the instructions the repository's Dockerfile
// uses, one per line (continuations are joined).
func parseDockerfile(t *testing.T, df string) map[string]*stage {
	t.Helper()
	df = strings.ReplaceAll(df, "\\\n", " ")
	stages := map[string]*stage{}
	var cur *stage
	from := regexp.MustCompile(`^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?`)
	for _, line := range strings.Split(df, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := from.FindStringSubmatch(line); m != nil {
			cur = &stage{base: m[1]}
			if m[2] != "" {
				stages[m[2]] = cur
			}
			continue
		}
		if cur == nil {
			continue // ARG before the first FROM
		}
		cur.text += line + "\n"
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch instr {
		case "COPY":
			if f := strings.Fields(rest); len(f) > 2 && f[0] == "--from=build" {
				cur.copies = append(cur.copies, f[1:])
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &cur.entrypoint); err != nil {
				t.Errorf("ENTRYPOINT %s is not the exec form: %v", rest, err)
			}
		case "USER":
			cur.user = rest
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				cur.ports = append(cur.ports, p)
			}
		}
	}
	return stages
}

// TestDockerfileDescribesTheSpecs checks that the Dockerfile, for Docker
// users, and Specs, which `make images` builds, describe the same chf and
// loadgen images: binaries and where they go, entrypoint, user, ports; the
// base (distroless static nonroot) holds what Rootfs adds, and its
// WORKDIR is /home/nonroot.
func TestDockerfileDescribesTheSpecs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(b))
	if _, ok := stages["build"]; !ok {
		t.Fatalf("no build stage: %v", stages)
	}
	checked := 0
	for _, s := range image.Specs() {
		if s.Name == image.PauseName {
			continue // the node's own; Docker users have theirs
		}
		checked++
		st, ok := stages[s.Name]
		if !ok {
			t.Errorf("the Dockerfile has no target %s", s.Name)
			continue
		}
		if !strings.HasPrefix(st.base, "gcr.io/distroless/static") || !strings.HasSuffix(st.base, ":nonroot") || !s.Rootfs || s.WorkingDir != "/home/nonroot" {
			t.Errorf("%s: Dockerfile base %q, spec rootfs %v workdir %q: want distroless static nonroot and its files", s.Name, st.base, s.Rootfs, s.WorkingDir)
		}
		var bins []string
		for _, c := range st.copies {
			dst := c[len(c)-1]
			for _, src := range c[:len(c)-1] {
				if strings.HasSuffix(dst, "/") {
					bins = append(bins, path.Join(dst, path.Base(src)))
				} else {
					bins = append(bins, dst)
				}
			}
		}
		var want []string
		for _, bin := range s.Binaries {
			want = append(want, path.Join(s.Dir, bin))
		}
		slices.Sort(bins)
		slices.Sort(want)
		if !slices.Equal(bins, want) {
			t.Errorf("%s: the Dockerfile copies %v, the spec installs %v", s.Name, bins, want)
		}
		if !slices.Equal(st.entrypoint, s.Entrypoint) {
			t.Errorf("%s: ENTRYPOINT %q, spec %q", s.Name, st.entrypoint, s.Entrypoint)
		}
		if st.user != s.User {
			t.Errorf("%s: USER %q, spec %q", s.Name, st.user, s.User)
		}
		slices.Sort(st.ports)
		if ports := slices.Sorted(slices.Values(s.Ports)); !slices.Equal(st.ports, ports) {
			t.Errorf("%s: EXPOSE %v, spec %v", s.Name, st.ports, ports)
		}
	}
	if checked != 2 {
		t.Errorf("compared %d images, want chf and loadgen", checked)
	}
}

// TestDockerfile checks the rest of what the Dockerfile promises: one
// build stage compiling, with BuildBinaries' flags, the commands the
// images take, and a build context without the repository's history; and
// that `make images` builds with this package, needing no engine.
func TestDockerfile(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	build := parseDockerfile(t, string(b))["build"]
	if build == nil {
		t.Fatal("no build stage")
	}
	// BuildArgs less the pause, which only the node needs.
	args := image.BuildArgs("/out", "${VERSION}")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-buildvcs=false",
		`-ldflags="` + args[4] + `"`,
		"-o /out/ " + strings.Join(slices.DeleteFunc(slices.Clone(image.Packages), func(p string) bool { return strings.HasSuffix(p, "/pause") }), " ")} {
		if !strings.Contains(build.text, want) {
			t.Errorf("the build stage lacks %q", want)
		}
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	target := regexp.MustCompile(`(?m)^images:.*\n((?:\t.*\n)+)`).FindSubmatch(mk)
	if target == nil || !strings.Contains(string(target[1]), "./cmd/cluster images --build") {
		t.Errorf("make images does not run ./cmd/cluster images --build: %q", target)
	}
	ign, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", ".tools", "bin", "results"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(ign) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}
