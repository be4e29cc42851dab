package depcheck

import (
	"bufio"
	"bytes"
	"context"
	"go/build"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const module = "github.com/chf-testbed/testbed"

// facts are the dependencies that must stay cut. A pattern is an import
// path relative to the module ("cgw", "" for the root) or an absolute
// one (with a dot in its first element), "/..." matching it and every
// package below it, as in `go list`. Every package matching From must
// not depend (transitively, tests excluded) on any package matching
// Forbid; each From pattern must match at least one package, so that a
// move does not make a fact vacuous.
var facts = []struct {
	name   string
	from   []string
	forbid []string
}{
	{
		name:   "the CGW links the OCP's client, not the OCP, the ABM or the Aerospike client",
		from:   []string{"cgw/..."},
		forbid: []string{"github.com/aerospike/aerospike-client-go/v7/...", "abm", "ocp"},
	},
	{
		name:   "the OCP links the ABM's client, not the ABM or the Aerospike client",
		from:   []string{"ocp"},
		forbid: []string{"github.com/aerospike/aerospike-client-go/v7/...", "abm"},
	},
	{
		name:   "the load generator links neither the ABM nor the OCP (narrow subpackages such as abm/record and tariff are fine)",
		from:   []string{"cmd/loadgen", "loadgen/..."},
		forbid: []string{"abm", "ocp"},
	},
	{
		name:   "the embedded store stands alone: no chassis package",
		from:   []string{"abm/aslite"},
		forbid: []string{"chassis/..."},
	},
	{
		name:   "aslite's command links the service run group only, not the chassis server, client or RPC",
		from:   []string{"abm/aslite/aslitecmd", "cmd/aslite"},
		forbid: []string{"chassis/server", "chassis/peer", "chassis/rpc", "chassis/batcher", "chassis/discovery/..."},
	},
	{
		name:   "the batcher links nothing of the chassis: no client, server, RPC or telemetry",
		from:   []string{"chassis/batcher"},
		forbid: []string{"chassis/peer", "chassis/server", "chassis/rpc", "chassis/telemetry", "chassis/hop", "chassis/discovery/..."},
	},
	{
		name:   "the peer client and the RPC client link no server and no service command",
		from:   []string{"chassis/peer", "chassis/rpc"},
		forbid: []string{"chassis/server", "chassis/service", "github.com/prometheus/client_golang/prometheus/promhttp"},
	},
	{
		name:   "the server links no client, balancer or discovery",
		from:   []string{"chassis/server"},
		forbid: []string{"chassis/peer", "chassis/balancer", "chassis/discovery/...", "chassis/batcher", "chassis/rpc"},
	},
	{
		name:   "what server and client share stays below both",
		from:   []string{"chassis/hop", "chassis/route", "chassis/logthrottle"},
		forbid: []string{"chassis/server", "chassis/peer", "chassis/service"},
	},
	{
		name:   "the service command links no server or client (a service adds those itself)",
		from:   []string{"chassis/service"},
		forbid: []string{"chassis/server", "chassis/peer", "chassis/discovery/..."},
	},
	{
		name:   "the clients of the internal hops link no server and no database client",
		from:   []string{"ocp/ocpclient", "abm/abmclient"},
		forbid: []string{"github.com/aerospike/aerospike-client-go/v7/...", "abm", "ocp", "cgw/..."},
	},
}

// matcher reports whether an import path matches a pattern.
type matcher func(path string) bool

func compile(pattern string) matcher {
	full := pattern
	if first, _, _ := strings.Cut(pattern, "/"); !strings.Contains(first, ".") {
		full = strings.TrimSuffix(module+"/"+pattern, "/")
	}
	if base, ok := strings.CutSuffix(full, "/..."); ok {
		return func(p string) bool { return p == base || strings.HasPrefix(p, base+"/") }
	}
	return func(p string) bool { return p == full }
}

// goTool is the go command: the one on PATH, else GOROOT's.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(build.Default.GOROOT, "bin", "go")
}

// deps lists every package of the module with its transitive non-test
// dependencies (one `go list`, no build).
func deps(t *testing.T) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "list", "-e", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		t.Fatalf("go list listed no package:\n%s", stderr.Bytes())
	}
	return m
}

func TestDependencies(t *testing.T) {
	all := deps(t)
	for _, f := range facts {
		t.Run(f.name, func(t *testing.T) {
			var forbid []matcher
			for _, p := range f.forbid {
				forbid = append(forbid, compile(p))
			}
			for _, from := range f.from {
				match, n := compile(from), 0
				for pkg, ds := range all {
					if !match(pkg) {
						continue
					}
					n++
					for _, d := range append([]string{pkg}, ds...) {
						for i, bad := range forbid {
							if bad(d) {
								t.Errorf("%s depends on %s (forbidden: %s)", pkg, d, f.forbid[i])
							}
						}
					}
				}
				if n == 0 {
					t.Errorf("no package matches %s: update the fact", from)
				}
			}
		})
	}
}

// TestMatcher pins the pattern rules the facts rely on.
func TestMatcher(t *testing.T) {
	f := func(pattern, path string, want bool) {
		t.Helper()
		if got := compile(pattern)(path); got != want {
			t.Errorf("%q matches %q: %v, want %v", pattern, path, got, want)
		}
	}
	f("abm", module+"/abm", true)
	f("abm", module+"/abm/record", false)
	f("abm", module+"/abmx", false)
	f("cgw/...", module+"/cgw", true)
	f("cgw/...", module+"/cgw/diameter", true)
	f("cgw/...", module+"/cgwx", false)
	f("github.com/aerospike/aerospike-client-go/v7/...", "github.com/aerospike/aerospike-client-go/v7/types", true)
	f("github.com/aerospike/aerospike-client-go/v7/...", "github.com/aerospike/aerospike-client-go/v7", true)
	f("chassis", module+"/chassis/rpc", false)
}
