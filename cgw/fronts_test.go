package cgw

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/chf-testbed/testbed/cgw/admission"
	"github.com/chf-testbed/testbed/chassis/telemetry/telemetrytest"
	"github.com/chf-testbed/testbed/chassis/tlsconfig"
	"github.com/chf-testbed/testbed/chassis/tlsconfig/tlstest"
)

// startWith starts a CGW with cfg (Listen, a fixed clock and session id
// filled in when unset) and stops it at the end of the test.
func startWith(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Handler.Charger == nil {
		cfg.Handler.Charger = &fakeCharger{}
	}
	if cfg.Handler.MaxBody == 0 {
		cfg.Handler.MaxBody = 4096
	}
	if cfg.Handler.Now == nil {
		cfg.Handler.Now = func() time.Time { return time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC) }
	}
	if cfg.Handler.NewSession == nil {
		cfg.Handler.NewSession = func() uint64 { return 0xc0ffee }
	}
	return serve(t, cfg)
}

// frontReq is one request of the table both fronts are driven with.
type frontReq struct {
	method, target string
	header         map[string]string // "Content-Type" defaults to application/json with a body
	body           []byte
}

// answer is what the fronts must answer alike.
type answer struct {
	status int
	header map[string]string
	body   string
}

// answerHeaders are the response headers compared between the fronts.
var answerHeaders = []string{"Content-Type", "Location", "Allow", "WWW-Authenticate", "Accept", "Accept-Encoding",
	"Retry-After", ChargedHeader}

// send sends r to addr over c with its target exactly as written (no
// cleaning, no encoding by the client).
func send(t *testing.T, c *http.Client, addr string, r frontReq) answer {
	t.Helper()
	req, err := http.NewRequest(r.method, "http://"+addr+"/", bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = r.target // sent as the request target / :path as is
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: map[string]string{}, body: string(b)}
	for _, h := range answerHeaders {
		if v := resp.Header.Get(h); v != "" {
			a.header[h] = v
		}
	}
	return a
}

// checkProblem checks that a is a ProblemDetails of its status, with
// cause and (when param is not "") one invalidParams entry naming param.
func checkProblem(t *testing.T, what string, a answer, cause, param string) {
	t.Helper()
	if a.header["Content-Type"] != contentProblem {
		t.Errorf("%s: Content-Type %q, want %s", what, a.header["Content-Type"], contentProblem)
		return
	}
	var pd struct {
		Status        int
		Cause         string
		InvalidParams []struct{ Param string }
	}
	if err := json.Unmarshal([]byte(a.body), &pd); err != nil || pd.Status != a.status {
		t.Errorf("%s: ProblemDetails %s (%v), want status %d", what, a.body, err, a.status)
		return
	}
	if pd.Cause != cause {
		t.Errorf("%s: cause %q, want %q", what, pd.Cause, cause)
	}
	if param != "" && (len(pd.InvalidParams) != 1 || pd.InvalidParams[0].Param != param) {
		t.Errorf("%s: invalidParams %+v, want %s", what, pd.InvalidParams, param)
	}
}

// TestFrontsAnswerAlike drives the h2c and the HTTP/1.1 front with one
// table of targets, methods, headers and bodies: both must give the same
// status, headers and body, and the one the table wants.
func TestFrontsAnswerAlike(t *testing.T) {
	s := startWith(t, Config{Handler: HandlerConfig{OperatorOpen: true}})
	create := body("imsi-001010000000001", 0, `"multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{}}]`)
	used := func(extra string) []byte {
		return body("imsi-001010000000001", 0, `"multipleUnitUsage":[{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5}]`+extra+`}]`)
	}
	loc := "http://" + s.Addr() + NchfBase + "/imsi-001010000000001.0000000000c0ffee"
	const ref = "/imsi-001010000000001.0000000000c0ffee"
	big := body("imsi-001010000000001", 0, `"x":"`+strings.Repeat("a", 5000)+`"`)
	huge := body("imsi-001010000000001", 0, `"x":"`+strings.Repeat("a", 40000)+`"`)
	type tc struct {
		name   string
		req    frontReq
		status int
		cause  string // ProblemDetails cause ("" = none or not a problem)
		param  string
		header map[string]string // headers the answer must have
	}
	cases := []tc{
		{name: "create", req: frontReq{method: "POST", target: NchfBase, body: create}, status: 201,
			header: map[string]string{"Location": loc, "Content-Type": contentJSON}},
		{name: "create, unreserved characters percent-encoded", req: frontReq{method: "POST", target: "/nchf-convergedcharging/v3/charging%64%61ta", body: create}, status: 201,
			header: map[string]string{"Location": loc}},
		{name: "create, empty query", req: frontReq{method: "POST", target: NchfBase + "?", body: create}, status: 201},
		{name: "create, query parameter", req: frontReq{method: "POST", target: NchfBase + "?supi=imsi-2&x=1", body: create}, status: 400,
			cause: "INVALID_QUERY_PARAM", param: "supi"},
		{name: "encoded slash is not a separator", req: frontReq{method: "POST", target: "/nchf-convergedcharging%2Fv3/chargingdata", body: create}, status: 404,
			cause: "RESOURCE_URI_STRUCTURE_NOT_FOUND"},
		{name: "dot segments are not removed", req: frontReq{method: "POST", target: "/nchf-convergedcharging/v2/../v3/chargingdata", body: create}, status: 404,
			cause: "RESOURCE_URI_STRUCTURE_NOT_FOUND"},
		{name: "empty segment", req: frontReq{method: "POST", target: "/nchf-convergedcharging/v3//chargingdata", body: create}, status: 404,
			cause: "RESOURCE_URI_STRUCTURE_NOT_FOUND"},
		{name: "trailing slash", req: frontReq{method: "POST", target: NchfBase + "/", body: create}, status: 404,
			cause: "RESOURCE_URI_STRUCTURE_NOT_FOUND"},
		{name: "malformed escape", req: frontReq{method: "POST", target: NchfBase + "%zz", body: create}, status: 400, cause: "INVALID_URI"},
		{name: "truncated escape", req: frontReq{method: "POST", target: NchfBase + "%4", body: create}, status: 400, cause: "INVALID_URI"},
		{name: "update", req: frontReq{method: "POST", target: NchfBase + ref + "/update", body: body("", 1, "")}, status: 200},
		{name: "update, ref percent-encoded", req: frontReq{method: "POST", target: NchfBase + "/imsi-001010000000001%2E0000000000c0ffee/update", body: body("", 2, "")}, status: 200},
		{name: "update of a malformed ref", req: frontReq{method: "POST", target: NchfBase + "/nope/update", body: body("", 1, "")}, status: 404,
			cause: "RESOURCE_CONTEXT_NOT_FOUND"},
		{name: "release", req: frontReq{method: "POST", target: NchfBase + ref + "/release", body: body("", 3, "")}, status: 204},
		{name: "GET on chargingdata", req: frontReq{method: "GET", target: NchfBase}, status: 405, header: map[string]string{"Allow": "POST"}},
		{name: "PUT on update", req: frontReq{method: "PUT", target: NchfBase + ref + "/update", body: body("", 1, "")}, status: 405,
			header: map[string]string{"Allow": "POST"}},
		{name: "DELETE on an account", req: frontReq{method: "DELETE", target: AccountsBase + "imsi-1"}, status: 405,
			header: map[string]string{"Allow": "GET, HEAD"}},
		{name: "GET on topup", req: frontReq{method: "GET", target: AccountsBase + "imsi-1" + TopUpSuffix}, status: 405,
			header: map[string]string{"Allow": "POST"}},
		{name: "balance", req: frontReq{method: "GET", target: AccountsBase + "imsi-001010000000001"}, status: 200,
			header: map[string]string{"Content-Type": contentJSON}},
		{name: "balance, SUPI percent-encoded", req: frontReq{method: "GET", target: AccountsBase + "imsi%2D001010000000001"}, status: 200},
		{name: "balance HEAD", req: frontReq{method: "HEAD", target: AccountsBase + "imsi-001010000000001"}, status: 200},
		{name: "balance, query", req: frontReq{method: "GET", target: AccountsBase + "imsi-1?fields=balance"}, status: 400,
			cause: "INVALID_QUERY_PARAM", param: "fields"},
		{name: "balance of nobody", req: frontReq{method: "GET", target: AccountsBase}, status: 404, cause: "RESOURCE_URI_STRUCTURE_NOT_FOUND"},
		{name: "healthz", req: frontReq{method: "GET", target: "/healthz"}, status: 200},
		{name: "healthz, query ignored", req: frontReq{method: "GET", target: "/healthz?probe=1"}, status: 200},
		{name: "healthz percent-encoded", req: frontReq{method: "GET", target: "/%68ealthz"}, status: 200},
		{name: "healthz HEAD", req: frontReq{method: "HEAD", target: "/healthz"}, status: 200},
		{name: "POST healthz", req: frontReq{method: "POST", target: "/healthz"}, status: 405, header: map[string]string{"Allow": "GET, HEAD"}},
		{name: "readyz", req: frontReq{method: "GET", target: "/readyz"}, status: 200},
		{name: "no such path", req: frontReq{method: "POST", target: "/nope"}, status: 404, cause: "RESOURCE_URI_STRUCTURE_NOT_FOUND"},
		{name: "wrong media type is not charged", req: frontReq{method: "POST", target: NchfBase, body: used(""), header: map[string]string{"Content-Type": "text/plain"}},
			status: 415, cause: "UNSUPPORTED_MEDIA_TYPE", param: "Content-Type", header: map[string]string{"Accept": contentJSON}},
		{name: "no media type", req: frontReq{method: "POST", target: NchfBase, body: used(""), header: map[string]string{"Content-Type": ""}},
			status: 415, cause: "UNSUPPORTED_MEDIA_TYPE", param: "Content-Type"},
		{name: "media type with a suffix", req: frontReq{method: "POST", target: NchfBase, body: create, header: map[string]string{"Content-Type": "application/jsonx"}},
			status: 415, cause: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "media type with parameters", req: frontReq{method: "POST", target: NchfBase, body: create, header: map[string]string{"Content-Type": "Application/JSON; charset=utf-8"}},
			status: 201},
		{name: "content coding", req: frontReq{method: "POST", target: NchfBase, body: create, header: map[string]string{"Content-Encoding": "gzip"}},
			status: 415, cause: "UNSUPPORTED_MEDIA_TYPE", param: "Content-Encoding", header: map[string]string{"Accept-Encoding": "identity"}},
		{name: "top-up needs JSON", req: frontReq{method: "POST", target: AccountsBase + "imsi-1" + TopUpSuffix, body: []byte(`{"amount":5}`), header: map[string]string{"Content-Type": "text/plain"}},
			status: 415, cause: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "top-up amount beyond int64", req: frontReq{method: "POST", target: AccountsBase + "imsi-1" + TopUpSuffix, body: []byte(`{"amount":99999999999999999999}`)},
			status: 400, param: "/amount"},
		{name: "top-up amount twice", req: frontReq{method: "POST", target: AccountsBase + "imsi-1" + TopUpSuffix, body: []byte(`{"amount":5,"amount":500}`)},
			status: 400, param: "/amount"},
		{name: "top-up bucket units twice", req: frontReq{method: "POST", target: AccountsBase + "imsi-1" + TopUpSuffix, body: []byte(`{"amount":5,"bucket":{"service":"sms","units":1,"units":9}}`)},
			status: 400, param: "/bucket/units"},
		{name: "body over --max-body", req: frontReq{method: "POST", target: NchfBase, body: big}, status: 413, cause: "PAYLOAD_TOO_LARGE"},
		{name: "body over the front's own limit", req: frontReq{method: "POST", target: NchfBase, body: huge}, status: 413, cause: "PAYLOAD_TOO_LARGE"},
		{name: "usedUnitContainer twice", req: frontReq{method: "POST", target: NchfBase, body: used(`,"usedUnitContainer":[{"localSequenceNumber":2,"totalVolume":7}]`)},
			status: 400, cause: "CHARGING_FAILED", param: "/multipleUnitUsage/0/usedUnitContainer"},
		{name: "totalVolume twice", req: frontReq{method: "POST", target: NchfBase,
			body: body("imsi-1", 0, `"multipleUnitUsage":[{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5,"totalVolume":7}]}]`)},
			status: 400, cause: "CHARGING_FAILED", param: "/multipleUnitUsage/0/usedUnitContainer/0/totalVolume"},
		{name: "multipleUnitUsage twice", req: frontReq{method: "POST", target: NchfBase,
			body: body("imsi-1", 0, `"multipleUnitUsage":[{"ratingGroup":10}],"multipleUnitUsage":[{"ratingGroup":20}]`)},
			status: 400, cause: "CHARGING_FAILED", param: "/multipleUnitUsage"},
		{name: "notifyUri ok", req: frontReq{method: "POST", target: NchfBase, body: body("imsi-001010000000001", 0, `"notifyUri":"https://[::1]:9443/cb?x=1"`)}, status: 201},
		{name: "notifyUri relative", req: frontReq{method: "POST", target: NchfBase, body: body("imsi-1", 0, `"notifyUri":"/callback"`)},
			status: 400, cause: "CHARGING_FAILED", param: "/notifyUri"},
		{name: "notifyUri ftp", req: frontReq{method: "POST", target: NchfBase, body: body("imsi-1", 0, `"notifyUri":"ftp://smf.example/cb"`)},
			status: 400, cause: "CHARGING_FAILED", param: "/notifyUri"},
		{name: "notifyUri without host", req: frontReq{method: "POST", target: NchfBase, body: body("imsi-1", 0, `"notifyUri":"http:///cb"`)},
			status: 400, cause: "CHARGING_FAILED", param: "/notifyUri"},
		{name: "notifyUri bad port", req: frontReq{method: "POST", target: NchfBase, body: body("imsi-1", 0, `"notifyUri":"http://smf:99999/cb"`)},
			status: 400, cause: "CHARGING_FAILED", param: "/notifyUri"},
		{name: "notifyUri on update", req: frontReq{method: "POST", target: NchfBase + ref + "/update", body: body("", 9, `"notifyUri":"smf.example"`)},
			status: 400, cause: "CHARGING_FAILED", param: "/notifyUri"},
	}
	got := map[string][]answer{}
	for _, name := range []string{"http1", "h2c"} {
		c := clients(t)[name]
		for _, tc := range cases {
			got[tc.name] = append(got[tc.name], send(t, c, s.Addr(), tc.req))
		}
	}
	for _, tc := range cases {
		h1, h2 := got[tc.name][0], got[tc.name][1]
		if h1.status != h2.status || h1.body != h2.body || !equalHeaders(h1.header, h2.header) {
			t.Errorf("%s: the fronts differ:\nhttp1 %d %v %s\nh2c   %d %v %s", tc.name, h1.status, h1.header, h1.body, h2.status, h2.header, h2.body)
			continue
		}
		if h1.status != tc.status {
			t.Errorf("%s: %s %s: %d %v %s, want %d", tc.name, tc.req.method, tc.req.target, h1.status, h1.header, h1.body, tc.status)
			continue
		}
		for k, v := range tc.header {
			if h1.header[k] != v {
				t.Errorf("%s: %s %q, want %q", tc.name, k, h1.header[k], v)
			}
		}
		if tc.status >= 400 && tc.req.method != "HEAD" {
			checkProblem(t, tc.name, h1, tc.cause, tc.param)
		}
		if tc.status == 405 && h1.header["Allow"] == "" {
			t.Errorf("%s: 405 without Allow", tc.name)
		}
	}
}

func equalHeaders(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRefusedRequestsChargeNothing: a refused request (415, 413, a
// duplicate member, a bad notifyUri) never reaches the charging core.
func TestRefusedRequestsChargeNothing(t *testing.T) {
	fc := &fakeCharger{}
	s := startWith(t, Config{Handler: HandlerConfig{Charger: fc}})
	for name, c := range clients(t) {
		for _, r := range []frontReq{
			{method: "POST", target: NchfBase, body: body("imsi-1", 0, `"multipleUnitUsage":[{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5}]}]`),
				header: map[string]string{"Content-Type": "text/plain"}},
			{method: "POST", target: NchfBase, body: body("imsi-1", 0, `"multipleUnitUsage":[{"ratingGroup":1,"usedUnitContainer":[],"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5}]}]`)},
			{method: "POST", target: NchfBase, body: body("imsi-1", 0, `"notifyUri":"mailto:smf@example"`)},
			{method: "POST", target: NchfBase + "?x", body: body("imsi-1", 0, "")},
		} {
			if a := send(t, c, s.Addr(), r); a.status < 400 {
				t.Errorf("%s: %s answered %d", name, r.body, a.status)
			}
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.reqs) != 0 {
		t.Fatalf("refused requests reached the core: %+v", fc.reqs)
	}
}

// TestLocationIsTheServers: Location carries the server's own scheme and
// authority (https under TLS, --advertise when set), never the request's
// Host, on both fronts.
func TestLocationIsTheServers(t *testing.T) {
	create := body("imsi-001010000000001", 0, `"multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{}}]`)
	const path = NchfBase + "/imsi-001010000000001.0000000000c0ffee"
	check := func(what string, c *http.Client, url, wantPrefix string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url, bytes.NewReader(create))
		req.Header.Set("Content-Type", "application/json")
		req.Host = "evil.example:666" // Host (HTTP/1.1) or :authority (HTTP/2)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 || resp.Header.Get("Location") != wantPrefix+path {
			t.Errorf("%s: %d Location %q, want %q", what, resp.StatusCode, resp.Header.Get("Location"), wantPrefix+path)
		}
	}

	// Cleartext, the listener's address.
	plain := startWith(t, Config{})
	for name, c := range clients(t) {
		check(name, c, "http://"+plain.Addr()+NchfBase, "http://"+plain.Addr())
	}
	// Cleartext with --advertise (an apiRoot with a prefix).
	adv := startWith(t, Config{Advertise: "https://cgw.chf.example:8443/sbi/"})
	for name, c := range clients(t) {
		check(name+" advertised", c, "http://"+adv.Addr()+NchfBase, "https://cgw.chf.example:8443/sbi")
	}
	// HTTP/1.1 absolute-form: the authority in the target is not used either.
	conn, err := net.DialTimeout("tcp", plain.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "POST http://evil.example"+NchfBase+" HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(create))+"\r\n\r\n"+string(create))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("Location") != "http://"+plain.Addr()+path {
		t.Errorf("absolute-form: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// TLS: https, on both ALPN protocols.
	ca := tlstest.NewCA(t, "ca")
	pair := ca.Issue(t, "127.0.0.1")
	tcfg := tlsconfig.Config{Cert: pair.Cert, Key: pair.Key}
	files, err := tcfg.Files(nil)
	if err != nil {
		t.Fatal(err)
	}
	secure := startWith(t, Config{TLS: tcfg.Server(files, "h2", "http/1.1")})
	roots := x509.NewCertPool()
	if pem, err := os.ReadFile(ca.File); err != nil || !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("cannot read the test CA: %v", err)
	}
	h1 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	h2 := &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	t.Cleanup(func() { h1.CloseIdleConnections(); h2.CloseIdleConnections() })
	for name, rt := range map[string]http.RoundTripper{"http/1.1": h1, "h2": h2} {
		check("TLS "+name, &http.Client{Transport: rt, Timeout: 10 * time.Second}, "https://"+secure.Addr()+NchfBase, "https://"+secure.Addr())
	}
}

// TestOperatorTokenGuardsBalance: with an operator token the balance
// inquiry and the operator API answer 401 with WWW-Authenticate without
// it or with a wrong one, on both fronts; without a token (loopback) the
// balance inquiry stays open.
func TestOperatorTokenGuardsBalance(t *testing.T) {
	const tok = "0123456789abcdef-token"
	guarded := startWith(t, Config{Handler: HandlerConfig{OperatorToken: tok}})
	open := startWith(t, Config{Handler: HandlerConfig{OperatorOpen: true}})
	balance := AccountsBase + "imsi-001010000000001"
	topUp := AccountsBase + "imsi-001010000000001" + TopUpSuffix
	for name, c := range clients(t) {
		for _, tc := range []struct {
			srv        *Server
			req        frontReq
			status     int
			www        string
			wantFields bool
		}{
			{guarded, frontReq{method: "GET", target: balance}, 401, `Bearer realm="chf-operator"`, false},
			{guarded, frontReq{method: "GET", target: balance, header: map[string]string{"Authorization": "Bearer wrong-token-0123456789"}}, 401,
				`Bearer realm="chf-operator", error="invalid_token"`, false},
			{guarded, frontReq{method: "GET", target: balance, header: map[string]string{"Authorization": "Basic " + tok}}, 401,
				`Bearer realm="chf-operator", error="invalid_token"`, false},
			{guarded, frontReq{method: "GET", target: balance, header: map[string]string{"Authorization": "Bearer " + tok}}, 200, "", true},
			{guarded, frontReq{method: "POST", target: topUp, body: []byte(`{"amount":5}`)}, 401, `Bearer realm="chf-operator"`, false},
			{guarded, frontReq{method: "POST", target: topUp, body: []byte(`{"amount":5}`), header: map[string]string{"Authorization": "Bearer " + tok}}, 200, "", true},
			{open, frontReq{method: "GET", target: balance}, 200, "", true},
		} {
			a := send(t, c, tc.srv.Addr(), tc.req)
			what := name + " " + tc.req.method + " " + tc.req.target + " " + tc.req.header["Authorization"]
			if a.status != tc.status || a.header["WWW-Authenticate"] != tc.www {
				t.Errorf("%s: %d WWW-Authenticate %q, want %d %q", what, a.status, a.header["WWW-Authenticate"], tc.status, tc.www)
				continue
			}
			if tc.status == 401 {
				checkProblem(t, what, a, "", "")
			}
			if tc.wantFields && !strings.Contains(a.body, `"balance":`) {
				t.Errorf("%s: body %s", what, a.body)
			}
		}
	}
}

// TestAdmissionMetrics: the adaptive limiter's limit, in-flight and
// sheds are on /metrics (scraped over HTTP/1.1 and h2c alike), and pass
// promtool.
func TestAdmissionMetrics(t *testing.T) {
	lim := admission.New(admission.Config{MinLimit: 8, MaxLimit: 8})
	s := startWith(t, Config{Handler: HandlerConfig{Limiter: lim, MaxInFlight: 64}})
	url := "http://" + s.Addr()
	before := telemetrytest.Scrape(t, url+"/metrics")
	if v := telemetrytest.Value(t, before, "chf_cgw_admission_limit", nil); v != 8 {
		t.Errorf("chf_cgw_admission_limit %v, want 8", v)
	}
	if v := telemetrytest.Value(t, before, "chf_cgw_admission_inflight", nil); v != 0 {
		t.Errorf("chf_cgw_admission_inflight %v, want 0", v)
	}
	held := 0
	for lim.Acquire() {
		held++
	}
	before = telemetrytest.Scrape(t, url+"/metrics") // the failed Acquire above was a shed too
	for name, c := range clients(t) {
		if a := send(t, c, s.Addr(), frontReq{method: "POST", target: NchfBase, body: createBody}); a.status != 503 || a.header["Retry-After"] != "1" {
			t.Errorf("%s: create at the limit: %d %v", name, a.status, a.header)
		}
	}
	// Over h2c: the same exposition.
	a := send(t, clients(t)["h2c"], s.Addr(), frontReq{method: "GET", target: "/metrics"})
	if a.status != 200 || !strings.Contains(a.body, "chf_cgw_admission_shed_total") {
		t.Fatalf("/metrics over h2c: %d %.200s", a.status, a.body)
	}
	after := telemetrytest.Scrape(t, url+"/metrics")
	if v := telemetrytest.Value(t, after, "chf_cgw_admission_inflight", nil); v != float64(held) {
		t.Errorf("chf_cgw_admission_inflight %v, want %d", v, held)
	}
	if d := telemetrytest.Value(t, after, "chf_cgw_admission_shed_total", nil) - telemetrytest.Value(t, before, "chf_cgw_admission_shed_total", nil); d != 2 {
		t.Errorf("chf_cgw_admission_shed_total grew by %v, want 2", d)
	}
	for range held {
		lim.Done(time.Millisecond, false)
	}
	telemetrytest.Promtool(t, after)
}

// TestRouteAllocs: routing a percent-encoded update target allocates
// nothing beyond what serving it does.
func TestRouteAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	var p reqPath
	target := []byte(NchfBase + "/imsi-00101%2E0000000000c0ffee/update")
	allocs := testing.AllocsPerRun(100, func() {
		if msg := p.parse(target); msg != "" || p.route() != routeUpdate || string(p.id) != "imsi-00101.0000000000c0ffee" {
			t.Fatalf("parse: %q %q", msg, p.id)
		}
	})
	if allocs != 0 {
		t.Fatalf("routing allocates %.1f times", allocs)
	}
}
