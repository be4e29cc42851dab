package local

import (
	"net/http"
	"time"

	"github.com/chf-testbed/testbed/chassis/tlsconfig"
)

// tlsNames are the names the local certificate is valid for.
var tlsNames = []string{"127.0.0.1", "localhost", "::1"}

// setupTLS fills cfg.TLSDir with a throwaway CA and one certificate for
// every service when it has none yet, and puts the TLS flags in front of
// each service's extra flags (so that --cgw-args etc. may override them):
// every listener serves TLS and requires a client certificate of that CA,
// and the CGW and OCP call their peers over mTLS.
func (cfg *Config) setupTLS() error {
	d := tlsconfig.Dir(cfg.TLSDir)
	if err := d.Ensure(tlsNames...); err != nil {
		return err
	}
	common := []string{"--tls-cert", d.Cert(), "--tls-key", d.Key(), "--tls-ca", d.CA(), "--tls-client-auth", tlsconfig.ClientAuthRequire}
	args := map[string][]string{}
	for name, a := range cfg.Args {
		args[name] = a
	}
	for _, name := range []string{"abm", "ocp", "cgw"} {
		own := append([]string(nil), common...)
		if name != "abm" {
			own = append(own, "--peer-tls")
		}
		args[name] = append(own, args[name]...)
	}
	cfg.Args = args
	return nil
}

// readyClient is the HTTP client of the readiness checks: with TLS it
// presents the local certificate and trusts the local CA.
func (cfg *Config) readyClient() (*http.Client, string, error) {
	if cfg.TLSDir == "" {
		return &http.Client{Timeout: 3 * time.Second}, "http://", nil
	}
	d := tlsconfig.Dir(cfg.TLSDir)
	tc := tlsconfig.Config{Cert: d.Cert(), Key: d.Key(), CA: d.CA(), Peers: true}
	f, err := tc.Files(cfg.Logger)
	if err != nil {
		return nil, "", err
	}
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.Client(f, "http/1.1")}}, "https://", nil
}

// scheme of the URLs the local CHF prints.
func (cfg *Config) scheme() string {
	if cfg.TLSDir != "" {
		return "https://"
	}
	return "http://"
}

// TLSFiles returns the CA, certificate and key files of a local CHF
// started with TLSDir (empty strings without).
func (c *CHF) TLSFiles() (ca, cert, key string) {
	if c.cfg.TLSDir == "" {
		return "", "", ""
	}
	d := tlsconfig.Dir(c.cfg.TLSDir)
	return d.CA(), d.Cert(), d.Key()
}
