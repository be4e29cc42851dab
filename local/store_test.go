package local

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm/aslite"
)

func TestStoreConfigValidate(t *testing.T) {
	for _, s := range []StoreConfig{
		{Kind: "bogus"},
		{Nodes: 3},
		{Kind: StoreAsd, Nodes: 6, AsdBinary: "x", Dir: "d"},
		{Kind: StoreAsd, Dir: "d"},
		{Kind: StoreAsd, AsdBinary: "x"},
		{Kind: StoreAsd, AsdBinary: "x", Dir: "d", External: "127.0.0.1:3000"},
		{External: "no-port"},
	} {
		if err := s.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", s, err)
		}
	}
	s := StoreConfig{}
	if err := s.validate(); err != nil || s.Kind != StoreAslite || s.Nodes != 1 || s.Namespace != DefaultNamespace {
		t.Errorf("defaults: %+v, %v", s, err)
	}
	cfg := Config{Exe: "/bin/true", AsliteDataDir: "d", Store: StoreConfig{External: "127.0.0.1:3000"}}
	if err := cfg.defaults(); !errors.Is(err, ErrConfig) {
		t.Errorf("aslite's data directory with an external store: %v, want ErrConfig", err)
	}
}

func TestCheckStoreFlags(t *testing.T) {
	for _, c := range []struct {
		aerospike, ns, store, bin string
		nodes                     int
		want                      string
	}{
		{"", "chf", "aslite", "", 3, "--store-nodes"},
		{"", "chf", "asd", "/no/such/asd", 1, "--asd-binary"},
		{"", "chf", "bogus", "", 1, "--store"},
		{"", "chf", "aslite", "/bin/true", 1, "--asd-binary"},
		{"127.0.0.1:3000", "chf", "asd", "", 1, "--aerospike"},
		{"x", "chf", "aslite", "", 1, "--aerospike"},
		{"", "", "aslite", "", 1, "--as-namespace"},
	} {
		_, err := CheckStoreFlags(c.aerospike, c.ns, c.store, c.bin, c.nodes)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c, err, c.want)
		}
	}
}

// TestExternalStore: an existing Aerospike (here an aslite in this
// process) is checked before anything starts: unreachable fails within
// the deadline, a missing namespace is named; a good one is used without
// starting a store.
func TestExternalStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := aslite.New(aslite.Config{Namespaces: []string{"other"}})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	dead, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	f := func(hosts, ns, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		c, err := Start(ctx, Config{Exe: "/bin/false", Accounts: -1, Store: StoreConfig{External: hosts, Namespace: ns}, Nchf: "127.0.0.1:0"})
		if err == nil {
			c.Stop()
			t.Fatalf("%s %s: started", hosts, ns)
		}
		if !errors.Is(err, ErrStoreUnreachable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s %s: %v, want ErrStoreUnreachable naming %q", hosts, ns, err, want)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s: took %v", hosts, d)
		}
	}
	f(dead, "chf", dead)
	f(ln.Addr().String(), "chf", `no namespace "chf"`)
}
