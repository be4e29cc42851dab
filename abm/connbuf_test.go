package abm

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"testing"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm/aslite"
)

// TestDialKeepsLargeConnBuffers: through a client from Dial, a batch write
// larger than the client's default connection buffer (64 KiB) uses the
// connection's buffer; without connBuffer each such write took a buffer
// of 128 KiB from the client's pool that the client never gives back.
func TestDialKeepsLargeConnBuffers(t *testing.T) {
	srv, err := aslite.New(aslite.Config{Namespaces: []string{"chf"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Addr())
	pn, _ := strconv.Atoi(port)
	cl, err := Dial([]*as.Host{as.NewHost(host, pn)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	blob := make([]byte, 500)
	const n = 150 // ~85 KB of command
	recs := make([]as.BatchRecordIfc, n)
	for i := range recs {
		k, err := as.NewKey("chf", "accounts", fmt.Sprintf("imsi-00101%010d", i))
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = as.NewBatchWrite(nil, k, as.PutOp(as.NewBin("s", blob)))
	}
	write := func() {
		if err := cl.BatchOperate(nil, recs); err != nil {
			t.Fatal(err)
		}
	}
	write() // connections made, pools warm
	const rounds = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		write()
	}
	runtime.ReadMemStats(&after)
	perWrite := (after.TotalAlloc - before.TotalAlloc) / rounds
	t.Logf("%d bytes allocated per batch write of %d records", perWrite, n)
	if perWrite >= 128<<10 {
		t.Fatalf("%d bytes allocated per batch write: the command did not fit the connection's buffer", perWrite)
	}
}
