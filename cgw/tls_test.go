package cgw

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/net/http2"

	"github.com/chf-testbed/testbed/chassis/oauth2"
	"github.com/chf-testbed/testbed/chassis/tlsconfig"
	"github.com/chf-testbed/testbed/chassis/tlsconfig/tlstest"
)

// startTLSServer starts a CGW serving TLS with mTLS required, and checking
// OAuth2 tokens signed by key; it returns the server and a client TLS
// configuration with a client certificate.
func startTLSServer(t *testing.T, key *ecdsa.PrivateKey) (*Server, *tls.Config, *tlstest.CA) {
	t.Helper()
	ca := tlstest.NewCA(t, "ca")
	srvPair := ca.Issue(t, "127.0.0.1")
	cfg := tlsconfig.Config{Cert: srvPair.Cert, Key: srvPair.Key, CA: ca.File, ClientAuth: tlsconfig.ClientAuthRequire}
	files, err := cfg.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Config{
		Listen:  "127.0.0.1:0",
		Handler: HandlerConfig{Charger: &fakeCharger{}, MaxBody: 4096, MaxInFlight: 64},
		TLS:     cfg.Server(files, "h2", "http/1.1"),
		Tokens:  oauth2.New(map[string]crypto.PublicKey{"": &key.PublicKey}, oauth2.Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	cliPair := ca.Issue(t, "smf.example")
	ccfg := tlsconfig.Config{Cert: cliPair.Cert, Key: cliPair.Key, CA: ca.File, Peers: true}
	cf, err := ccfg.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, ccfg.Client(cf), ca
}

func TestTLSFrontALPNAndTokens(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, clientTLS, _ := startTLSServer(t, key)
	tok := func(scope string, exp time.Duration, k *ecdsa.PrivateKey) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"scope": scope, "exp": time.Now().Add(exp).Unix()}).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	h1 := &http.Transport{TLSClientConfig: clientTLS.Clone()}
	h2 := &http2.Transport{TLSClientConfig: clientTLS.Clone()}
	t.Cleanup(func() { h1.CloseIdleConnections(); h2.CloseIdleConnections() })
	url := "https://" + s.Addr() + "/nchf-convergedcharging/v3/chargingdata"
	for name, c := range map[string]*http.Client{"http/1.1": {Transport: h1, Timeout: 10 * time.Second}, "h2": {Transport: h2, Timeout: 10 * time.Second}} {
		t.Run(name, func(t *testing.T) {
			f := func(what, authz string, wantStatus int, wantWWW string) {
				t.Helper()
				req, _ := http.NewRequest("POST", url, strings.NewReader(string(body("imsi-001010000000001", 0, `"multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{}}]`))))
				req.Header.Set("Content-Type", "application/json")
				if authz != "" {
					req.Header.Set("Authorization", authz)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				defer resp.Body.Close()
				if resp.TLS == nil || resp.TLS.NegotiatedProtocol != name && !(name == "http/1.1" && resp.TLS.NegotiatedProtocol == "") {
					t.Errorf("%s: negotiated %+v, want %s", what, resp.TLS, name)
				}
				if wantProto := map[string]int{"h2": 2, "http/1.1": 1}[name]; resp.ProtoMajor != wantProto {
					t.Errorf("%s: HTTP/%d, want HTTP/%d", what, resp.ProtoMajor, wantProto)
				}
				if resp.StatusCode != wantStatus {
					t.Errorf("%s: status %d, want %d", what, resp.StatusCode, wantStatus)
				}
				if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, wantWWW) || (wantWWW == "") != (got == "") {
					t.Errorf("%s: WWW-Authenticate %q, want %q", what, got, wantWWW)
				}
				if wantStatus >= 400 {
					var pd struct{ Status int }
					if err := json.NewDecoder(resp.Body).Decode(&pd); err != nil || pd.Status != wantStatus || resp.Header.Get("Content-Type") != contentProblem {
						t.Errorf("%s: ProblemDetails %+v (%v), content type %q", what, pd, err, resp.Header.Get("Content-Type"))
					}
				}
			}
			f("good token", tok("nchf-convergedcharging", time.Hour, key), http.StatusCreated, "")
			f("no token", "", http.StatusUnauthorized, `realm="nchf"`)
			f("bad signature", tok("nchf-convergedcharging", time.Hour, other), http.StatusUnauthorized, `error="invalid_token"`)
			f("expired", tok("nchf-convergedcharging", -time.Minute, key), http.StatusUnauthorized, `error="invalid_token"`)
			f("wrong scope", tok("npcf-smpolicycontrol", time.Hour, key), http.StatusForbidden, `error="insufficient_scope"`)
		})
	}

	// mTLS: a client without a certificate is refused at the handshake.
	noCert := clientTLS.Clone()
	noCert.GetClientCertificate = nil
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: noCert}, Timeout: 10 * time.Second}
	if resp, err := c.Get("https://" + s.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %d, want a refused handshake", resp.StatusCode)
	}
}
