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
// (chf) links it, not the chassis, the domain, the services' packages, the
// load generator or the standalone store (cmd/aslite). cmd/chf, which
// imports it, must show it: that is what proves the check can see it.
func TestClientGoOnlyWhereImported(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k8s := func(pkg string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "go", "list", "-deps", "github.com/chf-testbed/testbed/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "k8s.io/") || strings.HasSuffix(dep, "chassis/discovery/kubernetes") {
				return dep
			}
		}
		return ""
	}
	for _, pkg := range []string{"chf", "chassis", "chassis/rpc", "cgw", "ocp", "abm", "abm/aslite", "local", "cmd/loadgen", "cmd/aslite"} {
		if dep := k8s(pkg); dep != "" {
			t.Errorf("%s depends on %s: client-go must be linked only where the kubernetes discovery mode is imported", pkg, dep)
		}
	}
	if k8s("cmd/chf") == "" {
		t.Errorf("cmd/chf does not depend on k8s.io: either it lost --discovery=kubernetes or this check cannot see client-go")
	}
}
