package lab

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm/asd"
)

func TestAsdConfig(t *testing.T) {
	dir := t.TempDir()
	p, err := asdConfig(dir, "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"address 10.1.2.3\n\t\tport 3000", "mesh-seed-address-port 10.1.2.3 3002", "node-id a1", "nsup-period 120", "work-directory " + dir} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config lacks %q:\n%s", want, b)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "smd")); err != nil || !fi.IsDir() {
		t.Errorf("smd directory: %v", err)
	}
}

// TestLabStoreAsd runs the lab's host model once with the real Aerospike
// server in the store's pod: a loopback-only namespace, where asd needs
// its node-id given. The trial must serve every request with an exact
// audit, the report must name the store, and nothing may be left.
// Skipped without root or without the binary.
func TestLabStoreAsd(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	bin, err := asd.DefaultBinary(root)
	if err != nil {
		t.Skipf("no Aerospike server to run against: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := t.TempDir()
	cmd, lines, all := labCmd(t, ctx, "--models", "host", "--pin", "off", "--rate", "300", "--duration", "1s", "--warmup", "0s",
		"--trials", "1", "--iperf-time", "1s", "--probes", "200", "--accounts", "1000", "--out", out, "--store", "asd", "--asd-binary", bin)
	prefix := prefixOf(t, lines)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("loadgen lab: %v\n%s", err, all)
	}
	waitGone(t, prefix)
	if pids, _ := exec.Command("pgrep", "-f", out).Output(); len(pids) > 0 {
		t.Errorf("asd still running: %s", pids)
	}
	b, err := os.ReadFile(filepath.Join(out, "lab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Store string `json:"store"`
		Rows  []struct {
			Trials []Trial `json:"trials"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Store, "asd") {
		t.Errorf("store %q", rep.Store)
	}
	if len(rep.Rows) != 1 || len(rep.Rows[0].Trials) != 1 {
		t.Fatalf("rows %+v", rep.Rows)
	}
	if tr := rep.Rows[0].Trials[0]; tr.TPS <= 0 || !tr.AuditOK || tr.Errors != 0 {
		t.Errorf("implausible run: %+v", tr)
	}
}
