package e2e

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/chf-testbed/testbed/chassis/tlsconfig"
	"github.com/chf-testbed/testbed/chassis/tlsconfig/tlstest"
	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestTLSEndToEnd runs `chf local --tls-dir`: every hop over mTLS. Nchf
// answers over h2 and http/1.1 (ALPN), a client without a certificate is
// refused at the CGW and at the OCP, the certificate files are rotated
// and new handshakes see the new certificate while an open connection
// keeps working, and a loadgen run over https reconciles.
func TestTLSEndToEnd(t *testing.T) {
	ca := tlstest.NewCA(t, "chf")
	dir := tlsconfig.Dir(t.TempDir())
	caPEM, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir.CA(), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := ca.Authority.Issue(dir.Cert(), dir.Key(), time.Hour, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ocpAddr := freeAddr(t)
	lr := startLocal(t, "--accounts", "300", "--nchf", "127.0.0.1:0", "--ocp", ocpAddr, "--tls-dir", string(dir), "--quiet")
	if !strings.HasPrefix(lr.nchfURL, "https://") {
		t.Fatalf("Nchf URL %s, want https://", lr.nchfURL)
	}
	tc := tlsconfig.Config{Cert: dir.Cert(), Key: dir.Key(), CA: dir.CA(), Peers: true}
	files, err := tc.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS := tc.Client(files)
	h2 := &http2.Transport{TLSClientConfig: clientTLS.Clone()}
	h1 := &http.Transport{TLSClientConfig: clientTLS.Clone()}
	defer h2.CloseIdleConnections()
	defer h1.CloseIdleConnections()
	create := func(c *http.Client, supi string) *http.Response {
		t.Helper()
		body := `{"subscriberIdentifier":"` + supi + `","nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-12-01T10:00:00Z","invocationSequenceNumber":0,"multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{}}]}`
		resp, err := c.Post(lr.nchfURL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("create for %s: %v", supi, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create for %s: %d, want 201", supi, resp.StatusCode)
		}
		return resp
	}
	h2c := &http.Client{Transport: h2, Timeout: 10 * time.Second}
	if r := create(h2c, "imsi-001010000000001"); r.ProtoMajor != 2 || r.TLS.NegotiatedProtocol != "h2" {
		t.Errorf("h2 client: HTTP/%d, ALPN %q", r.ProtoMajor, r.TLS.NegotiatedProtocol)
	}
	if r := create(&http.Client{Transport: h1, Timeout: 10 * time.Second}, "imsi-001010000000002"); r.ProtoMajor != 1 {
		t.Errorf("http/1.1 client: HTTP/%d", r.ProtoMajor)
	}

	// Without a client certificate: refused by the CGW and by the OCP.
	noCert := clientTLS.Clone()
	noCert.GetClientCertificate = nil
	bare := &http.Client{Transport: &http.Transport{TLSClientConfig: noCert}, Timeout: 10 * time.Second}
	for _, u := range []string{strings.Replace(lr.nchfURL, "/nchf-convergedcharging/v3/chargingdata", "/healthz", 1), "https://" + ocpAddr + "/healthz"} {
		if resp, err := bare.Get(u); err == nil {
			resp.Body.Close()
			t.Errorf("GET %s without a client certificate: %d, want a refused handshake", u, resp.StatusCode)
		}
	}
	ocpOK := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS.Clone()}, Timeout: 10 * time.Second}
	if resp, err := ocpOK.Get("https://" + ocpAddr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("OCP /healthz with a client certificate: %v", err)
	} else {
		resp.Body.Close()
	}

	// Rotation: new handshakes get the new certificate, the open h2
	// connection keeps its own and keeps working, and so do the hops.
	second, err := ca.Authority.Issue(dir.Cert(), dir.Key(), time.Hour, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		fresh := &http.Transport{TLSClientConfig: clientTLS.Clone(), DisableKeepAlives: true}
		r := create(&http.Client{Transport: fresh, Timeout: 10 * time.Second}, "imsi-001010000000003")
		if r.TLS.PeerCertificates[0].SerialNumber.Cmp(second.SerialNumber) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CGW still presents serial %s 15 s after the rotation", r.TLS.PeerCertificates[0].SerialNumber)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := create(h2c, "imsi-001010000000004"); r.TLS.PeerCertificates[0].SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Errorf("the connection opened before the rotation now shows serial %s, want the old %s", r.TLS.PeerCertificates[0].SerialNumber, first.SerialNumber)
	}

	// loadgen over https (h2 through the goroutine transport), audited.
	sc := scenario.Default()
	sc.Subscribers.Count = 300
	sc.Subscribers.First = "imsi-001010000000001"
	sc.Load = scenario.Load{TPS: 200}
	sc.Data.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Voice.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Phases = scenario.Phases{WarmUp: scenario.Duration(200 * time.Millisecond), Duration: scenario.Duration(time.Second)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	target := strings.SplitN(lr.nchfURL, "/", 4)[2] // host:port
	res, err := run.Execute(ctx, run.Options{
		Scenario: sc, Targets: []string{target}, TLS: clientTLS, ProgressMode: run.ProgressOff,
		CPU: []cpu.Source{cpu.NewProc("cgw", lr.pids["cgw"])}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Transactions == 0 || !res.Audit.OK || res.Audit.Touched == 0 {
		t.Fatalf("loadgen over https: %d transactions, %d errors, audit %+v", res.Transactions, res.Errors, res.Audit)
	}
}
