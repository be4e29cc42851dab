package tlsconfig_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/tlsconfig"
	"github.com/chf-testbed/testbed/chassis/tlsconfig/tlstest"
)

// echoServer serves TLS with cfg on loopback and echoes one line per
// connection; it returns the address.
func echoServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func dial(addr string, cfg *tls.Config) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	// TLS 1.3 reports a refused client certificate on the first read.
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("x")); err != nil {
		c.Close()
		return nil, err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func TestMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	srvPair := ca.Issue(t, "127.0.0.1", "ocp.chf.svc")
	cliPair := ca.Issue(t, "cgw.chf.svc")
	other := tlstest.NewCA(t, "other")
	strangerPair := other.Issue(t, "stranger")

	srvCfg := tlsconfig.Config{Cert: srvPair.Cert, Key: srvPair.Key, CA: ca.File, ClientAuth: tlsconfig.ClientAuthRequire}
	if err := srvCfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sf, err := srvCfg.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, srvCfg.Server(sf, "http/1.1"))

	client := func(p tlstest.Pair, caFile, serverName string) *tls.Config {
		t.Helper()
		c := tlsconfig.Config{Cert: p.Cert, Key: p.Key, CA: caFile, Peers: true, PeerServerName: serverName}
		f, err := c.Files(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Client(f, "http/1.1")
	}
	f := func(name string, cfg *tls.Config, wantOK bool) {
		t.Helper()
		c, err := dial(addr, cfg)
		if (err == nil) != wantOK {
			t.Errorf("%s: err = %v, want ok %v", name, err, wantOK)
		}
		if c != nil {
			c.Close()
		}
	}
	f("client certificate, IP SAN", client(cliPair, ca.File, ""), true)
	f("client certificate, DNS SAN", client(cliPair, ca.File, "ocp.chf.svc"), true)
	f("wrong server name", client(cliPair, ca.File, "abm.chf.svc"), false)
	f("server not signed by the CA", client(cliPair, other.File, ""), false)
	f("client certificate of another CA", client(strangerPair, ca.File, ""), false)
	noCert := tlsconfig.Config{CA: ca.File, Peers: true}
	nf, err := noCert.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	f("no client certificate", noCert.Client(nf), false)
}

func TestReloadWithoutRestart(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	first := ca.Issue(t, "127.0.0.1")
	cfg := tlsconfig.Config{Cert: first.Cert, Key: first.Key, CA: ca.File, ClientAuth: tlsconfig.ClientAuthNone}
	files, err := cfg.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, cfg.Server(files))
	ccfg := tlsconfig.Config{CA: ca.File, Peers: true}
	cf, err := ccfg.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	clientCfg := ccfg.Client(cf)
	old, err := dial(addr, clientCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	serial := func(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].SerialNumber.String() }
	if got, want := serial(old), first.X509.SerialNumber.String(); got != want {
		t.Fatalf("first serial %s, want %s", got, want)
	}

	// Rotate the files in place; a new handshake after CheckInterval sees
	// the new certificate, the open connection keeps working.
	second := ca.Issue(t, "127.0.0.1")
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := dial(addr, clientCfg)
		if err != nil {
			t.Fatal(err)
		}
		got := serial(c)
		c.Close()
		if got == second.X509.SerialNumber.String() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serving serial %s after the rotation", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if files.Reloads() == 0 {
		t.Error("Reloads() = 0 after a rotation")
	}
	old.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := old.Write([]byte("y")); err != nil {
		t.Fatalf("old connection broken by the reload: %v", err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(old, b); err != nil || b[0] != 'y' {
		t.Fatalf("old connection after reload: %q %v", b, err)
	}

	// A broken rotation (garbage in the cert file) keeps the last good set.
	if err := os.WriteFile(second.Cert, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := files.Reload(); err == nil {
		t.Fatal("Reload of a garbage certificate succeeded")
	}
	c, err := dial(addr, clientCfg)
	if err != nil {
		t.Fatalf("handshake after a failed reload: %v", err)
	}
	if got := serial(c); got != second.X509.SerialNumber.String() {
		t.Errorf("after a failed reload serving %s, want the last good %s", got, second.X509.SerialNumber)
	}
	c.Close()
}

func TestValidate(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	p := ca.Issue(t, "localhost")
	missing := filepath.Join(t.TempDir(), "none.pem")
	f := func(c tlsconfig.Config, want string) {
		t.Helper()
		err := c.Validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, tlsconfig.ErrConfig)):
			t.Errorf("%+v: err %v, want one containing %q", c, err, want)
		}
	}
	f(tlsconfig.Default(), "")
	f(tlsconfig.Config{Cert: p.Cert, Key: p.Key, CA: ca.File, ClientAuth: "require"}, "")
	f(tlsconfig.Config{Cert: p.Cert, ClientAuth: "none"}, "--tls-cert and --tls-key")
	f(tlsconfig.Config{Cert: p.Cert, Key: p.Key, ClientAuth: "require"}, "needs --tls-ca")
	f(tlsconfig.Config{ClientAuth: "request"}, "needs --tls-cert")
	f(tlsconfig.Config{Cert: p.Cert, Key: p.Key, ClientAuth: "sometimes"}, "--tls-client-auth")
	f(tlsconfig.Config{Cert: missing, Key: p.Key}, "cannot load certificate")
	f(tlsconfig.Config{CA: p.Key, Peers: true}, "no PEM certificate")
}

func TestSplitALPN(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	p := ca.Issue(t, "127.0.0.1")
	cfg := tlsconfig.Config{Cert: p.Cert, Key: p.Key}
	files, err := cfg.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h2, h1 := tlsconfig.SplitALPN(ln, cfg.Server(files, "h2", "http/1.1"))
	defer h1.Close()
	defer h2.Close()
	ccfg := tlsconfig.Config{CA: ca.File, Peers: true}
	cf, err := ccfg.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	f := func(protos []string, want net.Listener, wantProto string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			c, err := tls.Dial("tcp", ln.Addr().String(), ccfg.Client(cf, protos...))
			if err == nil {
				defer c.Close()
				_, err = c.Read(make([]byte, 1)) // until the test closes its end
			}
			done <- err
		}()
		c, err := want.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if got := c.(*tls.Conn).ConnectionState().NegotiatedProtocol; got != wantProto {
			t.Errorf("ALPN %v: negotiated %q, want %q", protos, got, wantProto)
		}
		c.Close()
		<-done
	}
	f([]string{"h2", "http/1.1"}, h2, "h2")
	f([]string{"http/1.1"}, h1, "http/1.1")
	f(nil, h1, "")
}
