package kube

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/chf-testbed/testbed/chassis/tlsconfig"
)

// PKI is the cluster's certificate authority (tlsconfig.Authority) and
// the certificates issued from it, kept as PEM files in one directory.
type PKI struct {
	Dir string
	ca  *tlsconfig.Authority
}

// certValidity is how long the cluster's certificates are valid.
const certValidity = 30 * 24 * time.Hour

// File is the path of one of the PKI's files (ca.crt, admin.key, ...).
func (p *PKI) File(name string) string { return filepath.Join(p.Dir, name) }

// NewPKI creates a CA (ca.crt) and the service-account key pair (sa.key,
// sa.pub) in dir.
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the PKI directory: %w", err)
	}
	ca, err := tlsconfig.NewAuthority("chf-testbed-ca", certValidity)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, ca: ca}
	if err := ca.WriteCA(p.File("ca.crt")); err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("cannot generate the service-account key: %w", err)
	}
	if err := writePEM(p.File("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("cannot marshal the service-account key: %w", err)
	}
	return p, writePEM(p.File("sa.pub"), "PUBLIC KEY", pub)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// Issue writes <name>.crt and <name>.key: a certificate for subj, serving
// the addresses and names given (none: a client's).
func (p *PKI) Issue(name string, subj pkix.Name, ips []net.IP, dnsNames []string) error {
	names := append([]string(nil), dnsNames...)
	for _, ip := range ips {
		names = append(names, ip.String())
	}
	_, err := p.ca.IssueSubject(p.File(name+".crt"), p.File(name+".key"), certValidity, subj, names...)
	return err
}

// APIServerNames are the names the API server's certificate holds besides
// its addresses.
var APIServerNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local"}

// Kubeconfig writes <dir>/<user>.kubeconfig for <user>.crt and returns its path.
func (p *PKI) Kubeconfig(user, server string) (string, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `apiVersion: v1
kind: Config
clusters:
- name: chf-testbed
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: chf-testbed
  context: {cluster: chf-testbed, user: %s}
current-context: chf-testbed
`, server, p.File("ca.crt"), user, p.File(user+".crt"), p.File(user+".key"), user)
	path := filepath.Join(p.Dir, user+".kubeconfig")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		return "", fmt.Errorf("cannot write %s: %w", path, err)
	}
	return path, nil
}
