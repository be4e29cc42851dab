// Package aslitetest starts an in-process aslite server and connects the
// official Aerospike client to it, for tests of code that keeps its data in
// Aerospike (as net/http/httptest does for HTTP servers).
package aslitetest

import (
	"net"
	"strconv"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm/aslite"
)

// Start starts an aslite serving the namespace "chf" on 127.0.0.1:0 and
// returns an official client connected to it; both are closed when the
// test ends.
func Start(t testing.TB) *as.Client {
	t.Helper()
	srv, err := aslite.New(aslite.Config{Namespaces: []string{"chf"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	host, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	cp := as.NewClientPolicy()
	cp.Timeout = 5 * time.Second
	cl, aerr := as.NewClientWithPolicyAndHost(cp, as.NewHost(host, p))
	if aerr != nil {
		t.Fatal(aerr)
	}
	t.Cleanup(cl.Close)
	return cl
}
