package kube

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the cluster's certificate authority and the certificates issued
// from it (crypto/x509), kept as PEM files in one directory.
type PKI struct {
	Dir    string
	ca     *x509.Certificate
	caKey  *rsa.PrivateKey
	serial int64
}

// File is the path of one of the PKI's files (ca.crt, admin.key, ...).
func (p *PKI) File(name string) string { return filepath.Join(p.Dir, name) }

// NewPKI creates a CA and the service-account key pair in dir.
func NewPKI(dir string) (*PKI, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("cannot generate the CA key: %w", err)
	}
	p := &PKI{Dir: dir, caKey: key, serial: 1}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the PKI directory: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chf-testbed-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("cannot create the CA: %w", err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, fmt.Errorf("cannot parse the CA: %w", err)
	}
	if err := writePEM(p.File("ca.crt"), "CERTIFICATE", der); err != nil {
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

// Issue writes <name>.crt and <name>.key: a client certificate for subj,
// or, with server addresses or names, a serving certificate for them.
func (p *PKI) Issue(name string, subj pkix.Name, ips []net.IP, dnsNames []string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("cannot generate the %s key: %w", name, err)
	}
	p.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: subj,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if len(ips)+len(dnsNames) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses, tmpl.DNSNames = ips, dnsNames
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("cannot create the %s certificate: %w", name, err)
	}
	if err := writePEM(p.File(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(p.File(name+".key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
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
