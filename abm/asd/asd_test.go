package asd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// binary returns the asd binary or skips (fails under CI=true only when the
// binary is there but does not start: that is Start's error, not this one).
func binary(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	p, err := DefaultBinary(root)
	if errors.Is(err, ErrNoBinary) {
		t.Skipf("no Aerospike server: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultBinaryMissing(t *testing.T) {
	t.Setenv(EnvBinary, "")
	_, err := DefaultBinary(t.TempDir())
	if !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), EnvBinary) || !strings.Contains(err.Error(), "shared/aerospike/asd") {
		t.Fatalf("DefaultBinary in an empty dir: %v, want ErrNoBinary naming %s and the path", err, EnvBinary)
	}
	t.Setenv(EnvBinary, filepath.Join(t.TempDir(), "nope"))
	if _, err := DefaultBinary(t.TempDir()); !errors.Is(err, ErrNoBinary) {
		t.Fatalf("DefaultBinary with a bad %s: %v", EnvBinary, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{}, {Binary: "x"}, {Binary: "x", Dir: "d", Nodes: -1}, {Binary: "x", Dir: "d", Nodes: 1, ReplicationFactor: 2}} {
		if _, err := Start(context.Background(), o); err == nil {
			t.Errorf("Start(%+v) = nil error", o)
		}
	}
}

func TestSingleNode(t *testing.T) {
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	t0 := time.Now()
	c, err := Start(ctx, Options{Binary: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("one node ready in %v at %v: %s", time.Since(t0), c.Hosts(), c.Build(ctx))
	if b := c.Build(ctx); !strings.Contains(b, "8.") {
		t.Errorf("Build = %q", b)
	}
	v, err := c.Info(ctx, 0, "namespaces")
	if err != nil || v != "chf" {
		t.Errorf(`Info("namespaces") = %q, %v; want "chf"`, v, err)
	}
	if m, err := c.MigrationsRemaining(ctx); err != nil || m != 0 {
		t.Errorf("MigrationsRemaining = %d, %v", m, err)
	}
	pid := c.Node(0).PID()
	if pid == 0 {
		t.Fatal("PID = 0")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Errorf("process %d still exists after Close", pid)
	}
	if _, err := os.Stat(c.Node(0).LogFile()); err != nil {
		t.Errorf("log gone after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestClusterKillRestart(t *testing.T) {
	bin := binary(t)
	if testing.Short() {
		t.Skip("-short: skipping the three-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	t0 := time.Now()
	c, err := Start(ctx, Options{Binary: bin, Dir: t.TempDir(), Nodes: 3, DataSize: "512M"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("three nodes ready in %v", time.Since(t0))
	for i := range 3 {
		st, err := c.infoMap(ctx, i, "statistics")
		if err != nil || st["cluster_size"] != "3" {
			t.Fatalf("node %d cluster_size %q, %v", i, st["cluster_size"], err)
		}
	}
	if err := c.Node(1).Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Node(1).Cont(); err != nil {
		t.Fatal(err)
	}
	if err := c.Node(2).Kill(); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := c.Node(2).Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("node 2 rejoined in %v", time.Since(t1))
	for {
		m, err := c.MigrationsRemaining(ctx)
		if err != nil {
			t.Fatalf("MigrationsRemaining after rejoin: %v", err)
		}
		if m == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("migrations still %d at the deadline", m)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("migrations done %v after the restart", time.Since(t1))
}

// TestInfoKeys pins the info keys readiness and MigrationsRemaining rely on,
// so a server that renames them fails here rather than waiting forever.
func TestInfoKeys(t *testing.T) {
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Binary: bin, Dir: t.TempDir(), NsupPeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.infoMap(ctx, 0, "statistics")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cluster_size", "migrate_partitions_remaining"} {
		if _, ok := st[k]; !ok {
			t.Errorf("statistics lacks %s", k)
		}
	}
	ns, err := c.infoMap(ctx, 0, "namespace/chf")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"nsup-period": "0", "replication-factor": "1", "migrate_tx_partitions_remaining": "0", "migrate_rx_partitions_remaining": "0"} {
		if ns[k] != want {
			t.Errorf("namespace/chf %s = %q, want %q", k, ns[k], want)
		}
	}
}
