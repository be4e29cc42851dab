package charts_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile checks what the images promise without a container
// engine: one build stage compiling every command statically (CGO off),
// and per image a target on a minimal non-root runtime base whose uid
// matches the charts' securityContext, holding its binaries and entering
// the right one; and a build context without the repository's history.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{"CGO_ENABLED=0", "-X main.version=${VERSION}", "-o /out/ ./cmd/chf ./cmd/aslite ./cmd/loadgen"} {
		if !strings.Contains(df, want) {
			t.Errorf("the build stage lacks %q", want)
		}
	}
	// Split into stages at each FROM; the runtime stages are named.
	from := regexp.MustCompile(`(?m)^FROM[ \t]+(?:--\S+[ \t]+)*(\S+)(?:[ \t]+AS[ \t]+(\S+))?`)
	locs := from.FindAllStringSubmatchIndex(df, -1)
	stages := map[string]string{} // target -> its text
	bases := map[string]string{}
	for i, l := range locs {
		end := len(df)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if l[4] < 0 {
			continue
		}
		name := df[l[4]:l[5]]
		stages[name], bases[name] = df[l[0]:end], df[l[2]:l[3]]
	}
	if _, ok := stages["build"]; !ok {
		t.Fatalf("no build stage: %v", stages)
	}
	for target, bins := range map[string][]string{"chf": {"chf", "aslite"}, "loadgen": {"loadgen"}} {
		st, ok := stages[target]
		if !ok {
			t.Errorf("no target %s (make images builds --target %s)", target, target)
			continue
		}
		if base := bases[target]; !strings.HasPrefix(base, "gcr.io/distroless/static") || !strings.Contains(base, ":nonroot") {
			t.Errorf("target %s: runtime base %q is not distroless static nonroot", target, base)
		}
		copies := strings.Join(regexp.MustCompile(`(?m)^COPY --from=build .*$`).FindAllString(st, -1), "\n")
		for _, bin := range bins {
			if !strings.Contains(copies, "/out/"+bin) {
				t.Errorf("target %s does not copy /out/%s: %q", target, bin, copies)
			}
		}
		if !strings.Contains(st, `ENTRYPOINT ["/usr/local/bin/`+target+`"]`) {
			t.Errorf("target %s does not enter /usr/local/bin/%s", target, target)
		}
		users := regexp.MustCompile(`(?m)^USER[ \t]+(\S+)`).FindAllStringSubmatch(st, -1)
		if len(users) == 0 || users[len(users)-1][1] != "65532:65532" {
			t.Errorf("target %s: final USER is not 65532:65532 (the charts' runAsUser): %v", target, users)
		}
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "for b in chf loadgen; do") || !strings.Contains(string(mk), "build --target $$b") {
		t.Errorf("make images does not build the targets chf and loadgen")
	}
	ign, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", ".tools", "bin", "results"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(ign) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}
