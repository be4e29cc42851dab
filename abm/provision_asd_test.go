package abm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm/asd"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chf"
)

// TestProvisionThroughStall provisions a 3-node Aerospike cluster
// (replication factor 2) while one node is paused: the writes whose
// replica is on that node time out on the server, and provisioning must
// write them again instead of failing (a settling cluster answered one
// provisioning write with TIMEOUT and failed a run). Every account must
// then hold the provisioned balance. Skipped without the real server.
func TestProvisionThroughStall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the three-node cluster")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := asd.DefaultBinary(root)
	if err != nil {
		t.Skipf("no Aerospike server: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := asd.Start(ctx, asd.Options{Binary: bin, Dir: t.TempDir(), Nodes: 3, DataSize: "512M"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hosts, err := provision.ParseHosts(strings.Join(c.Hosts(), ","))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := Dial(hosts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const n = 40000
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = c.Node(1).Stop()
		time.Sleep(2500 * time.Millisecond)
		_ = c.Node(1).Cont()
	}()
	t0 := time.Now()
	retried := 0
	runs := []struct {
		first        string
		count, batch int
	}{{"imsi-001010000000001", n, 256}, {"imsi-001010000100001", n / 8, 1}}
	for _, r := range runs {
		res, err := provision.Run(ctx, cl, provision.Config{First: r.first, Count: r.count, Balance: 700, Batch: r.batch}, nil)
		if err != nil {
			t.Fatalf("batch %d: %v", r.batch, err)
		}
		t.Logf("batch %d: %+v at %v", r.batch, res, time.Since(t0))
		if res.Created != r.count || res.Skipped != 0 {
			t.Errorf("batch %d: %+v, want %d created", r.batch, res, r.count)
		}
		retried += res.Retried
	}
	// Read back once the cluster has settled: while partitions migrate
	// after the node's return, a read at consistency level one may miss
	// a record its master has not received yet.
	for {
		m, err := c.MigrationsRemaining(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("migrations done at %v", time.Since(t0))
	for _, r := range runs {
		svc := New(cl, Config{})
		var resp chf.ChargeResponse
		for i := 0; i < r.count; i += r.count / 100 {
			supi, _ := provision.SUPI(r.first, i)
			if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi}, &resp); err != nil || resp.Balance != 700 {
				t.Errorf("%s: %+v %v", supi, resp, err)
			}
		}
	}
	if retried == 0 {
		t.Error("no write was retried: the pause did not reach provisioning, the test proves nothing")
	}
}
