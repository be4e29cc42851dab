package discovery

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestClientGoOnlyWhereImported checks that client-go stays behind the
// kubernetes mode: only a binary that imports chassis/discovery/kubernetes
// (chf) links it, not the chassis, the domain, the services' packages or
// the load generator.
func TestClientGoOnlyWhereImported(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, pkg := range []string{"chf", "chassis", "chassis/rpc", "cgw", "ocp", "abm", "abm/aslite", "local", "cmd/loadgen"} {
		cmd := exec.CommandContext(ctx, "go", "list", "-deps", "github.com/chf-testbed/testbed/"+pkg)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "k8s.io/") || strings.HasSuffix(dep, "chassis/discovery/kubernetes") {
				t.Errorf("%s depends on %s: client-go must be linked only where the kubernetes discovery mode is imported", pkg, dep)
				break
			}
		}
	}
}
