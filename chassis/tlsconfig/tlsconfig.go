// Package tlsconfig builds the TLS configurations of the services' servers
// and clients from PEM files: the service's certificate and key, and the CA
// bundle that verifies its peers (clients under mTLS, servers it calls).
// The files are re-read when they change, without a restart: every new
// handshake checks their modification times (at most once per
// CheckInterval) and a changed set is loaded and swapped in atomically, so
// new connections see the new certificate while established ones keep
// theirs. Reload forces a re-read (for SIGHUP). A set that fails to load
// (a half-written rotation) is logged and the previous one stays in use.
package tlsconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/chassis/service"
	"github.com/chf-testbed/testbed/chassis/sighup"
	"github.com/chf-testbed/testbed/internal/readfile"
)

// CheckInterval is the least time between two checks of the files'
// modification times.
const CheckInterval = time.Second

// Client authentication modes (--tls-client-auth).
const (
	ClientAuthNone    = "none"    // no client certificate asked for
	ClientAuthRequest = "request" // verified against --tls-ca when given
	ClientAuthRequire = "require" // mTLS: refused without a valid one
)

// ErrConfig is wrapped by the errors of Validate.
var ErrConfig = errors.New("tlsconfig: bad configuration")

// Config is the TLS part of a service's configuration: one field per
// flag (RegisterFlags).
type Config struct {
	// Cert and Key are the PEM files of the service's certificate chain
	// and private key: the server's certificate and, on peer calls, the
	// client certificate. Empty = the service listens in cleartext.
	Cert, Key string
	// CA is a PEM bundle of the CAs that verify client certificates and
	// the peers' server certificates (empty: the system roots for the
	// latter).
	CA string
	// ClientAuth is ClientAuthNone, ClientAuthRequest or ClientAuthRequire.
	ClientAuth string
	// Peers says the service calls its peer service over TLS (only with
	// a peer; RegisterFlags' peer argument).
	Peers bool
	// PeerServerName is the name the peers' certificates must carry;
	// empty = the address dialled (an IP SAN then).
	PeerServerName string
}

// Default is the configuration without TLS.
func Default() Config { return Config{ClientAuth: ClientAuthNone} }

// RegisterFlags registers --tls-cert, --tls-key, --tls-ca and
// --tls-client-auth and, when peer is not empty (the service calls that
// peer), --peer-tls and --peer-tls-server-name, c's values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet, peer string) {
	fs.StringVar(&c.Cert, "tls-cert", c.Cert, "PEM certificate chain of this service: --listen serves TLS (ALPN h2 and http/1.1 where both are served) with it, and it is the client certificate on peer calls; re-read when the file changes; empty = cleartext")
	fs.StringVar(&c.Key, "tls-key", c.Key, "PEM private key of --tls-cert")
	fs.StringVar(&c.CA, "tls-ca", c.CA, "PEM bundle of the CAs that sign client certificates (--tls-client-auth) and the peers' server certificates (--peer-tls); re-read when the file changes; empty = the system roots for peers")
	fs.StringVar(&c.ClientAuth, "tls-client-auth", c.ClientAuth, "client certificates on --listen: none, request (verified against --tls-ca when sent) or require (mTLS: a client without a certificate signed by --tls-ca is refused)")
	if peer != "" {
		fs.BoolVar(&c.Peers, "peer-tls", c.Peers, "call the "+peer+" over TLS, verifying its certificate against --tls-ca and presenting --tls-cert (mTLS) when set")
		fs.StringVar(&c.PeerServerName, "peer-tls-server-name", c.PeerServerName, "name (DNS SAN) the "+peer+"'s certificates must carry with --peer-tls; empty = the address dialled (the certificate needs that IP SAN)")
	}
}

// Validate checks the flags' values and loads the files once.
func (c *Config) Validate() error {
	switch c.ClientAuth {
	case "", ClientAuthNone, ClientAuthRequest, ClientAuthRequire:
	default:
		return fmt.Errorf("%w: --tls-client-auth %q: want none, request or require", ErrConfig, c.ClientAuth)
	}
	if (c.Cert == "") != (c.Key == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrConfig)
	}
	if c.Cert == "" && c.ClientAuth != "" && c.ClientAuth != ClientAuthNone {
		return fmt.Errorf("%w: --tls-client-auth %s needs --tls-cert and --tls-key", ErrConfig, c.ClientAuth)
	}
	if c.ClientAuth == ClientAuthRequire && c.CA == "" {
		return fmt.Errorf("%w: --tls-client-auth require needs --tls-ca", ErrConfig)
	}
	if c.Cert == "" && c.CA == "" {
		return nil
	}
	if _, err := loadState(c.Cert, c.Key, c.CA); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Serving reports whether the service's listener serves TLS.
func (c *Config) Serving() bool { return c.Cert != "" }

// Files loads the configured files into a reloading store (nil, nil when
// neither TLS serving nor TLS peer calls are configured).
func (c *Config) Files(log *slog.Logger) (*Files, error) {
	if !c.Serving() && !c.Peers {
		return nil, nil
	}
	return Load(c.Cert, c.Key, c.CA, log)
}

// Server is the server configuration of c with the given ALPN protocols
// (nil when not Serving).
func (c *Config) Server(f *Files, nextProtos ...string) *tls.Config {
	if f == nil || !c.Serving() {
		return nil
	}
	auth := tls.NoClientCert
	switch c.ClientAuth {
	case ClientAuthRequest:
		auth = tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		auth = tls.RequireAndVerifyClientCert
	}
	return f.ServerConfig(auth, nextProtos...)
}

// Client is the configuration of peer calls (nil without Peers).
func (c *Config) Client(f *Files, nextProtos ...string) *tls.Config {
	if f == nil || !c.Peers {
		return nil
	}
	return f.ClientConfig(c.PeerServerName, nextProtos...)
}

// Files holds the certificate, key and CA bundle loaded from their files
// and re-reads them when they change. It is safe for concurrent use.
type Files struct {
	cert, key, ca string
	log           *slog.Logger
	state         atomic.Pointer[state]
	checked       atomic.Int64 // Unix ns of the last stat
	mu            sync.Mutex   // serialises reloads
	reloads       atomic.Uint64
}

type state struct {
	cert  *tls.Certificate // nil without a cert file
	pool  *x509.CertPool   // nil without a CA file
	stamp [3]stamp
}

type stamp struct {
	mod  time.Time
	size int64
}

// Load reads cert and key (both or neither) and the CA bundle ca (may be
// empty); log (nil = slog.Default()) receives reload messages.
func Load(cert, key, ca string, log *slog.Logger) (*Files, error) {
	if log == nil {
		log = slog.Default()
	}
	st, err := loadState(cert, key, ca)
	if err != nil {
		return nil, err
	}
	f := &Files{cert: cert, key: key, ca: ca, log: log}
	f.state.Store(st)
	f.checked.Store(time.Now().UnixNano())
	return f, nil
}

func stampOf(path string) stamp {
	if path == "" {
		return stamp{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{size: -1}
	}
	return stamp{fi.ModTime(), fi.Size()}
}

// maxPEMBytes bounds each PEM file read (a system CA bundle is ~200 KiB).
const maxPEMBytes = 16 << 20

func loadState(cert, key, ca string) (*state, error) {
	st := &state{stamp: [3]stamp{stampOf(cert), stampOf(key), stampOf(ca)}}
	if cert != "" {
		certPEM, err := readfile.Read(cert, maxPEMBytes)
		var keyPEM []byte
		if err == nil {
			keyPEM, err = readfile.Read(key, maxPEMBytes)
		}
		var c tls.Certificate
		if err == nil {
			c, err = tls.X509KeyPair(certPEM, keyPEM)
		}
		if err != nil {
			return nil, fmt.Errorf("cannot load certificate %s and key %s: %w", cert, key, err)
		}
		st.cert = &c
	}
	if ca != "" {
		pem, err := readfile.Read(ca, maxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("cannot read CA bundle: %w", err)
		}
		st.pool = x509.NewCertPool()
		if !st.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cannot load CA bundle %s: no PEM certificate in it", ca)
		}
	}
	return st, nil
}

// Reloads is the number of times a changed set of files was loaded.
func (f *Files) Reloads() uint64 { return f.reloads.Load() }

// Reload re-reads the files now. On error the previous set stays in use.
func (f *Files) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := loadState(f.cert, f.key, f.ca)
	if err != nil {
		f.log.Warn("TLS files not reloaded, keeping the previous ones", "err", err)
		return err
	}
	f.state.Store(st)
	f.reloads.Add(1)
	f.log.Info("TLS files reloaded", "cert", f.cert, "ca", f.ca)
	return nil
}

// current returns the loaded set, reloading it first when a file changed
// since (checked at most once per CheckInterval).
func (f *Files) current() *state {
	st := f.state.Load()
	now := time.Now().UnixNano()
	last := f.checked.Load()
	if now-last < int64(CheckInterval) || !f.checked.CompareAndSwap(last, now) {
		return st
	}
	if st.stamp != [3]stamp{stampOf(f.cert), stampOf(f.key), stampOf(f.ca)} {
		if f.Reload() == nil {
			st = f.state.Load()
		}
	}
	return st
}

// Certificate returns the current certificate (nil without one).
func (f *Files) Certificate() *tls.Certificate { return f.current().cert }

// ServerConfig returns a server configuration presenting the current
// certificate and verifying client certificates (auth) against the
// current CA bundle, both read at every handshake.
func (f *Files) ServerConfig(auth tls.ClientAuthType, nextProtos ...string) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos}
	var cache atomic.Pointer[cachedConfig]
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		st := f.current()
		if c := cache.Load(); c != nil && c.st == st {
			return c.cfg, nil
		}
		cfg := &tls.Config{
			MinVersion:   tls.VersionTLS12,
			NextProtos:   nextProtos,
			ClientAuth:   auth,
			ClientCAs:    st.pool,
			Certificates: []tls.Certificate{*st.cert},
		}
		cache.Store(&cachedConfig{st, cfg})
		return cfg, nil
	}
	return base
}

type cachedConfig struct {
	st  *state
	cfg *tls.Config
}

// ClientConfig returns a client configuration that presents the current
// certificate when there is one and verifies the server against the
// current CA bundle (the system roots without one) for serverName (empty:
// the host dialled).
func (f *Files) ClientConfig(serverName string, nextProtos ...string) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, NextProtos: nextProtos}
	if f.cert != "" {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return f.current().cert, nil
		}
	}
	if f.ca != "" {
		// The pool may change: verify here against the current one.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tlsconfig: server sent no certificate")
			}
			opts := x509.VerifyOptions{
				Roots:         f.current().pool,
				DNSName:       cs.ServerName,
				Intermediates: x509.NewCertPool(),
			}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("cannot verify the server certificate: %w", err)
			}
			return nil
		}
	}
	return cfg
}

// ReloadOnSIGHUP re-reads the files whenever the process gets SIGHUP, in
// addition to the modification time checks, until stop is called.
func (f *Files) ReloadOnSIGHUP() (stop func()) { return sighup.OnSIGHUP(f.Reload) }

// AddTo loads c's files now (nil, nil when c configures no TLS) and adds
// their reload on SIGHUP to g.
func (c *Config) AddTo(g *service.Group, log *slog.Logger) (*Files, error) {
	f, err := c.Files(log)
	if f == nil || err != nil {
		return nil, err
	}
	var stop func()
	g.Add("TLS reload on SIGHUP", func() error { stop = f.ReloadOnSIGHUP(); return nil },
		func(context.Context) error { stop(); return nil })
	return f, nil
}
