package tlsconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// Authority is a certificate authority made at run time, for tests and
// throwaway local deployments (`chf local --tls-dir`): production
// certificates come from the operator's PKI (cert-manager, files in a
// Secret).
type Authority struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	DER  []byte
}

// NewAuthority makes a self-signed ECDSA P-256 CA named name, valid for
// validFor.
func NewAuthority(name string, validFor time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cannot generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validFor),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("cannot create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cannot parse CA certificate: %w", err)
	}
	return &Authority{Cert: cert, Key: key, DER: der}, nil
}

func serialNumber() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic("BUG: crypto/rand failed: " + err.Error())
	}
	return n
}

// WriteCA writes the CA certificate to path (PEM).
func (a *Authority) WriteCA(path string) error {
	return writePEM(path, "CERTIFICATE", a.DER, 0o644)
}

// Issue signs a certificate for names (DNS names or IP addresses), valid
// for validFor for servers and clients alike, and writes it and its key
// as PEM to certFile and keyFile, each through a temporary file and a
// rename (a reader sees the old file or the new one, never half of one).
func (a *Authority) Issue(certFile, keyFile string, validFor time.Duration, names ...string) (*x509.Certificate, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("cannot issue a certificate: no name")
	}
	return a.IssueSubject(certFile, keyFile, validFor, pkix.Name{CommonName: names[0]}, names...)
}

// IssueSubject is Issue with the certificate's subject given: a
// Kubernetes client certificate names its user in CN and its groups in O.
// names (DNS names or IP addresses) may be empty for a client's.
func (a *Authority) IssueSubject(certFile, keyFile string, validFor time.Duration, subj pkix.Name, names ...string) (*x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cannot generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(),
		Subject:      subj,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.Key)
	if err != nil {
		return nil, fmt.Errorf("cannot create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cannot parse certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("cannot encode key: %w", err)
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", kder, 0o600); err != nil {
		return nil, err
	}
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return cert, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	_, err = tmp.Write(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// Dir is the layout of a directory of TLS files that one deployment's
// services share (`chf local --tls-dir`, the chart's Secret): ca.pem,
// tls.crt and tls.key, the names Kubernetes TLS Secrets use.
type Dir string

// Files of the directory.
func (d Dir) CA() string   { return filepath.Join(string(d), "ca.pem") }
func (d Dir) Cert() string { return filepath.Join(string(d), "tls.crt") }
func (d Dir) Key() string  { return filepath.Join(string(d), "tls.key") }

// Ensure fills d with a new CA and a certificate for names when it has no
// ca.pem yet (creating d), and leaves it alone otherwise.
func (d Dir) Ensure(names ...string) error {
	if _, err := os.Stat(d.CA()); err == nil {
		return nil
	}
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return fmt.Errorf("cannot create TLS directory: %w", err)
	}
	a, err := NewAuthority("chf-local-ca", 30*24*time.Hour)
	if err != nil {
		return err
	}
	if _, err := a.Issue(d.Cert(), d.Key(), 30*24*time.Hour, names...); err != nil {
		return err
	}
	return a.WriteCA(d.CA())
}
