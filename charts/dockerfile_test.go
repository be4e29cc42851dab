package charts_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfiles checks what the images promise without a container
// engine: a multi-stage build, a static binary (CGO off) of the right
// command, a minimal non-root runtime base whose uid matches the charts'
// securityContext, and a build context without the repository's history.
func TestDockerfiles(t *testing.T) {
	for _, name := range []string{"chf", "loadgen"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "cmd", name, "Dockerfile"))
			if err != nil {
				t.Fatal(err)
			}
			df := string(b)
			froms := regexp.MustCompile(`(?m)^FROM[ \t]+(?:--\S+[ \t]+)*(\S+)`).FindAllStringSubmatch(df, -1)
			if len(froms) < 2 {
				t.Fatalf("not multi-stage: %d FROM lines", len(froms))
			}
			if final := froms[len(froms)-1][1]; !strings.HasPrefix(final, "gcr.io/distroless/static") || !strings.Contains(final, ":nonroot") {
				t.Errorf("runtime base %q is not distroless static nonroot", final)
			}
			for _, want := range []string{"CGO_ENABLED=0", "-o /out/" + name + " ./cmd/" + name, "COPY --from=build /out/" + name, `ENTRYPOINT ["/usr/local/bin/` + name + `"]`} {
				if !strings.Contains(df, want) {
					t.Errorf("Dockerfile lacks %q", want)
				}
			}
			if name == "chf" {
				// the store without client-go ships beside chf, built the same way
				if n := strings.Count(df, "CGO_ENABLED=0"); n != 2 {
					t.Errorf("CGO_ENABLED=0 appears %d times, want 2 (chf and aslite)", n)
				}
				for _, want := range []string{"-o /out/aslite ./cmd/aslite", "COPY --from=build /out/aslite /usr/local/bin/aslite"} {
					if !strings.Contains(df, want) {
						t.Errorf("Dockerfile lacks %q", want)
					}
				}
			}
			users := regexp.MustCompile(`(?m)^USER[ \t]+(\S+)`).FindAllStringSubmatch(df, -1)
			if len(users) == 0 || users[len(users)-1][1] != "65532:65532" {
				t.Errorf("final USER is not 65532:65532 (the charts' runAsUser): %v", users)
			}
		})
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
