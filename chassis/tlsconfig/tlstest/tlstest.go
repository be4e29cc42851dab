// Package tlstest makes certificates for tests at run time (no private key
// is ever committed): a CA, and leaf certificates it signs, written as PEM
// files into a test's temporary directory.
package tlstest

import (
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/tlsconfig"
)

// CA is a test certificate authority.
type CA struct {
	*tlsconfig.Authority
	// File is the PEM file of the CA certificate.
	File string
	dir  string
}

// NewCA makes a CA named name and writes its certificate to a file in a
// temporary directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	a, err := tlsconfig.NewAuthority(name, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Authority: a, dir: t.TempDir()}
	ca.File = filepath.Join(ca.dir, name+"-ca.pem")
	if err := a.WriteCA(ca.File); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pair is the files of a leaf certificate and its key.
type Pair struct {
	Cert, Key string
	X509      *x509.Certificate
}

// Issue signs a certificate for names (DNS names or IP addresses; usable
// by servers and clients alike) and writes it and its key as <name0>.pem
// and <name0>-key.pem in the CA's directory (replacing them: a rotation).
func (ca *CA) Issue(t testing.TB, names ...string) Pair {
	t.Helper()
	p := Pair{Cert: filepath.Join(ca.dir, names[0]+".pem"), Key: filepath.Join(ca.dir, names[0]+"-key.pem")}
	c, err := ca.Authority.Issue(p.Cert, p.Key, 24*time.Hour, names...)
	if err != nil {
		t.Fatal(err)
	}
	p.X509 = c
	return p
}
