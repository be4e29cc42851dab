package cgw

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"

	"github.com/chf-testbed/testbed/cgw/admission"
	"github.com/chf-testbed/testbed/cgw/nchfspec"
	"github.com/chf-testbed/testbed/chf"
)

// fakeCharger answers by SUPI: "imsi-unknown" is unknown, "imsi-broke"
// has no balance, "imsi-fail" makes the core fail; everyone else gets what
// they ask (1 MB when they let the CHF pick) and is charged 1 per used
// octet of total volume. It tracks the last Seq per session.
type fakeCharger struct {
	mu   sync.Mutex
	last map[string]uint32
	reqs []chf.ChargeRequest
}

func (f *fakeCharger) Charge(_ context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := *req
	r.Lines = append([]chf.UsageLine(nil), req.Lines...)
	f.reqs = append(f.reqs, r)
	switch req.SUPI {
	case "imsi-unknown":
		resp.Result = chf.ResultUserUnknown
		return nil
	case "imsi-broke":
		resp.Result = chf.ResultQuotaLimitReached
		return nil
	case "imsi-fail":
		return errors.New("boom")
	case "imsi-pool":
		return fmt.Errorf("cannot charge through ocp: cannot call ocp at 127.0.0.1:1: %w", fasthttp.ErrNoFreeConns)
	}
	if req.Op == chf.OpBalance {
		resp.Balance, resp.Reserved, resp.Currency, resp.Debited = 1000, 100, "EUR", 250
		return nil
	}
	if f.last == nil {
		f.last = map[string]uint32{}
	}
	if req.Op == chf.OpUpdate || req.Op == chf.OpRelease {
		if last, ok := f.last[req.Session]; ok && req.Seq < last {
			resp.Result = chf.ResultStaleSequence
			return nil
		}
	}
	f.last[req.Session] = req.Seq
	for _, l := range req.Lines {
		resp.Charged += int64(l.Used.TotalVolume)
		if !l.Request {
			continue
		}
		g := chf.GrantLine{RatingGroup: l.RatingGroup, Granted: l.Requested, ValidityTime: 3600, QuotaHoldingTime: 300}
		if g.Granted.IsZero() {
			g.Granted.TotalVolume = 1 << 20
		}
		if l.RatingGroup == 99 {
			g = chf.GrantLine{RatingGroup: 99, Result: chf.ResultRatingFailed}
		}
		if l.RatingGroup == 98 {
			g.FinalUnit = true
		}
		resp.Lines = append(resp.Lines, g)
	}
	return nil
}

var (
	specOnce sync.Once
	spec     *nchfspec.Validator
	specErr  error
)

// validator returns the shared spec validator; it skips the test when the
// spec is missing, except under CI=true.
func validator(t *testing.T) *nchfspec.Validator {
	t.Helper()
	specOnce.Do(func() { spec, specErr = nchfspec.Load("") })
	if errors.Is(specErr, nchfspec.ErrMissing) && os.Getenv("CI") != "true" {
		t.Skip(specErr)
	}
	if specErr != nil {
		t.Fatal(specErr)
	}
	return spec
}

func startServer(t *testing.T, c chf.Charger, maxInFlight int) *Server {
	t.Helper()
	return serve(t, Config{Listen: "127.0.0.1:0", Handler: HandlerConfig{
		Charger: c, MaxBody: 4096, MaxInFlight: maxInFlight,
		Now: func() time.Time { return time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC) },
	}})
}

// serve starts a CGW with cfg and stops it at the end of the test.
func serve(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := NewServer(cfg)
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
	return s
}

// clients returns an HTTP/1.1 and an HTTP/2 prior-knowledge client.
func clients(t *testing.T) map[string]*http.Client {
	h1 := &http.Transport{}
	h2 := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(func() { h1.CloseIdleConnections(); h2.CloseIdleConnections() })
	return map[string]*http.Client{
		"http1": {Transport: h1, Timeout: 10 * time.Second},
		"h2c":   {Transport: h2, Timeout: 10 * time.Second},
	}
}

type result struct {
	status int
	header http.Header
	body   []byte
	proto  int
}

func do(t *testing.T, c *http.Client, method, url string, body []byte) result {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{resp.StatusCode, resp.Header, b, resp.ProtoMajor}
}

func body(supi string, seq int, extra string) []byte {
	s := `{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":` + strconv.Itoa(seq)
	if supi != "" {
		s += `,"subscriberIdentifier":"` + supi + `"`
	}
	if extra != "" {
		s += "," + extra
	}
	return []byte(s + "}")
}

func TestNchfConformance(t *testing.T) {
	v := validator(t)
	s := startServer(t, &fakeCharger{}, 0)
	base := "http://" + s.Addr()
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			// check sends one request, checks status and conformance of both
			// the request (when valid) and the response.
			check := func(path string, b []byte, wantStatus int, requestValid bool) result {
				t.Helper()
				r := do(t, c, "POST", base+path, b)
				if wantProto := map[string]int{"http1": 1, "h2c": 2}[name]; r.proto != wantProto {
					t.Fatalf("served over HTTP/%d", r.proto)
				}
				if r.status != wantStatus {
					t.Fatalf("POST %s %s: status %d (%s), want %d", path, b, r.status, r.body, wantStatus)
				}
				var err error
				if requestValid {
					err = v.Validate("POST", path, b, r.status, r.header, r.body)
				} else {
					if v.ValidateRequest("POST", path, b) == nil {
						t.Fatalf("request %s unexpectedly conforms", b)
					}
					err = v.ValidateResponseOnly("POST", path, r.status, r.header, r.body)
				}
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			muu := `"multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{}},{"ratingGroup":20,"requestedUnit":{"time":60}},{"ratingGroup":98,"requestedUnit":{}},{"ratingGroup":99,"requestedUnit":{}}]`
			r := check(NchfBase, body("imsi-001010000000001", 0, muu), 201, true)
			loc := r.header.Get("Location")
			prefix := base + NchfBase + "/imsi-001010000000001."
			if !strings.HasPrefix(loc, prefix) || len(loc) != len(prefix)+16 {
				t.Fatalf("Location %q", loc)
			}
			if r.header.Get(ChargedHeader) != "0" {
				t.Fatalf("X-Chf-Charged %q", r.header.Get(ChargedHeader))
			}
			var cdr struct {
				MUI []struct {
					ResultCode  string
					RatingGroup uint32
					GrantedUnit map[string]uint64
					FUI         *struct{ FinalUnitAction string } `json:"finalUnitIndication"`
				} `json:"multipleUnitInformation"`
			}
			if err := json.Unmarshal(r.body, &cdr); err != nil {
				t.Fatal(err)
			}
			if len(cdr.MUI) != 4 || cdr.MUI[0].GrantedUnit["totalVolume"] != 1<<20 || cdr.MUI[1].GrantedUnit["time"] != 60 ||
				cdr.MUI[2].FUI == nil || cdr.MUI[2].FUI.FinalUnitAction != "TERMINATE" || cdr.MUI[3].ResultCode != "RATING_FAILED" {
				t.Fatalf("unexpected ChargingDataResponse %s", r.body)
			}
			ref := loc[len(base+NchfBase)+1:]
			used := `"multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":500,"uplinkVolume":200,"downlinkVolume":300}]}]`
			r = check(NchfBase+"/"+ref+"/update", body("", 1, used), 200, true)
			if r.header.Get(ChargedHeader) != "500" {
				t.Fatalf("update X-Chf-Charged %q", r.header.Get(ChargedHeader))
			}
			check(NchfBase+"/"+ref+"/update", body("", 0, used), 400, true) // stale
			final := `"multipleUnitUsage":[{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":2,"totalVolume":7}]}]`
			r = check(NchfBase+"/"+ref+"/release", body("", 2, final), 204, true)
			if r.header.Get(ChargedHeader) != "7" || len(r.body) != 0 {
				t.Fatalf("release: charged %q body %q", r.header.Get(ChargedHeader), r.body)
			}
			sms := `"oneTimeEvent":true,"oneTimeEventType":"IEC","multipleUnitUsage":[{"ratingGroup":30,"requestedUnit":{"serviceSpecificUnits":1}}]`
			r = check(NchfBase, body("imsi-001010000000002", 0, sms), 201, true)
			if r.header.Get("Location") != "" {
				t.Fatalf("event create got Location %q", r.header.Get("Location"))
			}
			check(NchfBase, body("imsi-unknown", 0, muu), 404, true)
			check(NchfBase, body("imsi-broke", 0, muu), 403, true)
			check(NchfBase, body("imsi-fail", 0, muu), 500, true)
			check(NchfBase+"/imsi-1.nothex/update", body("", 1, ""), 404, true)
			check(NchfBase, []byte(`{"nfConsumerIdentification":`), 400, false)
			check(NchfBase, body("imsi-001010000000001", 0, `"multipleUnitUsage":[{"ratingGroup":"10"}]`), 400, false)
			check(NchfBase, []byte(`{"subscriberIdentifier":"imsi-1","nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationSequenceNumber":1}`), 400, false)
			check(NchfBase, body("imsi-001010000000001", 0, `"x":"`+strings.Repeat("a", 5000)+`"`), 413, true)
		})
	}
}

func TestProblemNamesField(t *testing.T) {
	s := startServer(t, &fakeCharger{}, 0)
	for name, c := range clients(t) {
		for _, tc := range []struct{ body, param string }{
			{`{"a":`, ""},
			{`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-11-30T04:00:00Z","subscriberIdentifier":"imsi-1"}`, "/invocationSequenceNumber"},
			{`{"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":1,"subscriberIdentifier":"imsi-1"}`, "/nfConsumerIdentification"},
			{`{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationSequenceNumber":1,"subscriberIdentifier":"imsi-1"}`, "/invocationTimeStamp"},
			{string(body("imsi-1", 1, `"multipleUnitUsage":[{"ratingGroup":1,"usedUnitContainer":[{"localSequenceNumber":1,"time":"5"}]}]`)), "/multipleUnitUsage/0/usedUnitContainer/0/time"},
			{string(body("", 1, "")), "/subscriberIdentifier"},
		} {
			r := do(t, c, "POST", "http://"+s.Addr()+NchfBase, []byte(tc.body))
			var pd struct {
				Status        int
				Cause, Detail string
				InvalidParams []struct{ Param, Reason string }
			}
			if err := json.Unmarshal(r.body, &pd); err != nil {
				t.Fatalf("%s: %s: %v", name, r.body, err)
			}
			if r.status != 400 || pd.Status != 400 || pd.Cause != "CHARGING_FAILED" || r.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s: %s → %d %s", name, tc.body, r.status, r.body)
			}
			if tc.param != "" && (len(pd.InvalidParams) != 1 || pd.InvalidParams[0].Param != tc.param || !strings.Contains(pd.Detail, tc.param)) {
				t.Fatalf("%s: %s → %s, want param %s", name, tc.body, r.body, tc.param)
			}
		}
	}
}

func TestBalanceAndRouting(t *testing.T) {
	s := startServer(t, &fakeCharger{}, 0)
	for name, c := range clients(t) {
		r := do(t, c, "GET", "http://"+s.Addr()+AccountsBase+"imsi-001010000000001", nil)
		want := `{"supi":"imsi-001010000000001","balance":1000,"reserved":100,"available":900,"currency":"EUR","debited":250,"overage":0,"offline":0,"credited":0,"creditLimit":0}`
		if r.status != 200 || string(r.body) != want || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: balance %d %s", name, r.status, r.body)
		}
		if r := do(t, c, "GET", "http://"+s.Addr()+AccountsBase+"imsi-unknown", nil); r.status != 404 {
			t.Fatalf("%s: unknown balance %d %s", name, r.status, r.body)
		}
		if r := do(t, c, "GET", "http://"+s.Addr()+NchfBase, nil); r.status != 405 {
			t.Fatalf("%s: GET chargingdata %d", name, r.status)
		}
		if r := do(t, c, "POST", "http://"+s.Addr()+"/nope", nil); r.status != 404 {
			t.Fatalf("%s: /nope %d", name, r.status)
		}
		for _, p := range []string{"/healthz", "/readyz"} {
			if r := do(t, c, "GET", "http://"+s.Addr()+p, nil); r.status != 200 {
				t.Fatalf("%s: %s %d", name, p, r.status)
			}
		}
	}
}

// blockingCharger holds every request until release is closed.
type blockingCharger struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingCharger) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	b.entered <- struct{}{}
	<-b.release
	return nil
}

func TestOverload(t *testing.T) {
	bc := &blockingCharger{entered: make(chan struct{}, 4), release: make(chan struct{})}
	s := startServer(t, bc, 2)
	c := clients(t)["h2c"]
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(t, c, "POST", "http://"+s.Addr()+NchfBase, body("imsi-1", 0, ""))
		}()
	}
	<-bc.entered
	<-bc.entered
	r := do(t, c, "POST", "http://"+s.Addr()+NchfBase, body("imsi-1", 0, ""))
	close(bc.release)
	wg.Wait()
	if r.status != 503 || !bytes.Contains(r.body, []byte("NF_CONGESTION")) || r.header.Get("Retry-After") != "1" {
		t.Fatalf("third request: %d %v %s", r.status, r.header, r.body)
	}
}

// TestCoreOverload: an exhausted connection pool to the core answers 503
// NF_CONGESTION (not 500), and repeated core failures log one line per
// second per kind, with a count.
func TestCoreOverload(t *testing.T) {
	var logs bytes.Buffer
	h, err := NewHandler(HandlerConfig{Charger: &fakeCharger{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		supi   string
		status int
		cause  string
	}{
		{"imsi-pool", 503, "NF_CONGESTION"},
		{"imsi-fail", 500, "SYSTEM_FAILURE"},
	} {
		for range 5 {
			x := h.Acquire()
			x.RequestType = jsonType
			h.Serve(context.Background(), x, []byte("POST"), []byte(NchfBase), body(tt.supi, 0, ""))
			if x.Status != tt.status || !bytes.Contains(x.Body, []byte(tt.cause)) {
				t.Errorf("%s: %d %s, want %d %s", tt.supi, x.Status, x.Body, tt.status, tt.cause)
			}
			h.Release(x)
		}
	}
	if n := bytes.Count(logs.Bytes(), []byte("charging core failed")); n != 1 {
		t.Errorf("logged %d lines for 5 failures in a second, want 1:\n%s", n, logs.Bytes())
	}
}

type nopCharger struct{}

func (nopCharger) Charge(_ context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	for _, l := range req.Lines {
		resp.Lines = append(resp.Lines, chf.GrantLine{RatingGroup: l.RatingGroup, Granted: chf.Units{TotalVolume: 1 << 20}, ValidityTime: 3600})
	}
	return nil
}

var jsonType = []byte("application/json")

var createBody = body("imsi-001010000000001", 0, `"multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{}}]`)

func TestServeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	h, err := NewHandler(HandlerConfig{Charger: nopCharger{}})
	if err != nil {
		t.Fatal(err)
	}
	method, path := []byte("POST"), []byte(NchfBase)
	maxRsp := []byte("500")
	allocs := testing.AllocsPerRun(200, func() {
		x := h.Acquire()
		x.RequestType = jsonType
		h.Serve(x.Context(context.Background(), time.Now(), maxRsp), x, method, path, createBody)
		if x.Status != 201 {
			t.Fatalf("status %d: %s", x.Status, x.Body)
		}
		h.Release(x)
	})
	// The SUPI and the session id strings handed to the Charger.
	if allocs > 2 {
		t.Fatalf("create allocates %.1f times, want <= 2", allocs)
	}
}

func BenchmarkServeCreate(b *testing.B) {
	h, err := NewHandler(HandlerConfig{Charger: nopCharger{}})
	if err != nil {
		b.Fatal(err)
	}
	method, path := []byte("POST"), []byte(NchfBase)
	b.ReportAllocs()
	for b.Loop() {
		x := h.Acquire()
		x.RequestType = jsonType
		h.Serve(context.Background(), x, method, path, createBody)
		h.Release(x)
	}
}

// TestExchangeContext checks the deadline a request is served with.
func TestExchangeContext(t *testing.T) {
	var x Exchange
	start := time.Now()
	f := func(parent context.Context, maxRsp string, want time.Duration) {
		t.Helper()
		var h []byte
		if maxRsp != "" {
			h = []byte(maxRsp)
		}
		d, ok := x.Context(parent, start, h).Deadline()
		if !ok || d.Sub(start) != want {
			t.Errorf("parent %v, max-rsp %q: deadline in %v, want %v", parent, maxRsp, d.Sub(start), want)
		}
	}
	f(context.Background(), "", DefaultBudget-50*time.Millisecond)
	f(context.Background(), "400", 360*time.Millisecond)
	f(context.Background(), "junk", DefaultBudget-50*time.Millisecond)
	f(context.Background(), "99999999", DefaultBudget-50*time.Millisecond)
	short, cancel := context.WithDeadline(context.Background(), start.Add(100*time.Millisecond))
	defer cancel()
	f(short, "400", 90*time.Millisecond)
}

func TestOperatorAPIAuthorization(t *testing.T) {
	topUp := []byte(`{"amount":5}`)
	path := []byte(AccountsBase + "imsi-001010000000001" + TopUpSuffix)
	serve := func(cfg HandlerConfig, auth string) int {
		t.Helper()
		cfg.Charger = &fakeCharger{}
		h, err := NewHandler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		x := h.Acquire()
		defer h.Release(x)
		if auth != "" {
			x.Authorization = []byte(auth)
		}
		x.RequestType = jsonType
		h.Serve(context.Background(), x, []byte("POST"), path, topUp)
		return x.Status
	}
	const tok = "0123456789abcdef-token"
	for _, c := range []struct {
		cfg  HandlerConfig
		auth string
		want int
	}{
		{HandlerConfig{}, "", 403},                   // beyond loopback, no token: refused
		{HandlerConfig{OperatorOpen: true}, "", 200}, // loopback, no token: open
		{HandlerConfig{OperatorToken: tok}, "", 401}, // token required
		{HandlerConfig{OperatorToken: tok, OperatorOpen: true}, "", 401},
		{HandlerConfig{OperatorToken: tok}, "Bearer nope", 401},
		{HandlerConfig{OperatorToken: tok}, "Bearer " + tok, 200},
		{HandlerConfig{OperatorToken: tok}, "bearer " + tok, 200},
	} {
		if got := serve(c.cfg, c.auth); got != c.want {
			t.Errorf("%+v with %q: %d, want %d", c.cfg, c.auth, got, c.want)
		}
	}

	dir := t.TempDir()
	short, good := dir+"/short", dir+"/good"
	os.WriteFile(short, []byte("abc\n"), 0o600)
	os.WriteFile(good, []byte(tok+"\n"), 0o600)
	for _, c := range []struct {
		listen, file string
		open, err    bool
		token        string
	}{
		{"127.0.0.1:8080", "", true, false, ""},
		{"[::1]:8080", "", true, false, ""},
		{"0.0.0.0:8080", "", false, false, ""},
		{"10.0.0.1:8080", good, false, false, tok},
		{"10.0.0.1:8080", short, false, true, ""},
		{"10.0.0.1:8080", dir + "/missing", false, true, ""},
	} {
		sc := ServiceConfig{OperatorTokenFile: c.file}
		sc.Listen = c.listen
		token, open, err := sc.operatorToken()
		if open != c.open || (err != nil) != c.err || token != c.token {
			t.Errorf("%s %s: token %q open %v err %v", c.listen, c.file, token, open, err)
		}
	}
}

// TestOverloadNeverShedsReleases: with the adaptive limit reached, a
// create and an update are shed (503) but the release of an open session
// is served, so its reservations are freed now rather than at expiry.
func TestOverloadNeverShedsReleases(t *testing.T) {
	lim := admission.New(admission.Config{MinLimit: 16, MaxLimit: 16})
	h, err := NewHandler(HandlerConfig{Charger: &fakeCharger{}, Limiter: lim, MaxInFlight: 64})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(path string, b []byte) (int, string) {
		x := h.Acquire()
		defer h.Release(x)
		x.RequestType = jsonType
		h.Serve(context.Background(), x, []byte("POST"), []byte(path), b)
		return x.Status, string(x.Location)
	}
	code, loc := serve(NchfBase, body("imsi-1", 0, ""))
	if code != 201 || loc == "" {
		t.Fatalf("create: %d %q", code, loc)
	}
	ref := loc[strings.LastIndexByte(loc, '/')+1:]
	for lim.Acquire() {
	}
	if code, _ := serve(NchfBase, body("imsi-2", 0, "")); code != 503 {
		t.Fatalf("create at the limit: %d, want 503", code)
	}
	if code, _ := serve(NchfBase+"/"+ref+"/update", body("", 1, "")); code != 503 {
		t.Fatalf("update at the limit: %d, want 503", code)
	}
	if code, _ := serve(NchfBase+"/"+ref+"/release", body("", 2, "")); code != 204 {
		t.Fatalf("release at the limit: %d, want 204", code)
	}
}

// TestAdmissionFlags: the adaptive admission flags (and the bounds of
// the others) parse, and a bad value is an error naming its flag.
func TestAdmissionFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string // "" = valid
	}{
		{nil, ""},
		{[]string{"--admission-target", "2ms", "--admission-interval", "0", "--admission-tolerance", "1.5"}, ""},
		{[]string{"--admission", "fixed"}, ""},
		{[]string{"--advertise", "https://cgw.chf.svc:8443/sbi"}, ""},
		{[]string{"--advertise", "ftp://cgw"}, "--advertise"},
		{[]string{"--advertise", "http://"}, "--advertise"},
		{[]string{"--advertise", "http://cgw?x=1"}, "--advertise"},
		{[]string{"--advertise", "cgw:8080"}, "--advertise"},
		{[]string{"--admission", "gradient"}, "--admission \"gradient\""},
		{[]string{"--admission-target", "0"}, "--admission-target"},
		{[]string{"--admission-target", "-1ms"}, "--admission-target"},
		{[]string{"--admission-target", "1m"}, "--admission-target"},
		{[]string{"--admission-interval", "-1ms"}, "--admission-interval"},
		{[]string{"--admission-interval", "11s"}, "--admission-interval"},
		{[]string{"--admission-tolerance", "0.9"}, "--admission-tolerance"},
		{[]string{"--admission-tolerance", "NaN"}, "--admission-tolerance"},
		{[]string{"--admission-tolerance", "+Inf"}, "--admission-tolerance"},
		// Bounds that keep memory bounded and the runtime alive.
		{[]string{"--max-body", "0"}, "--max-body 0"},
		{[]string{"--max-body", "999999999999"}, "--max-body 999999999999"},
		{[]string{"--max-inflight", "999999999999"}, "--max-inflight 999999999999"},
		{[]string{"--batch-inflight", "999999999999"}, "--batch-inflight 999999999999"},
		{[]string{"--gomaxprocs", "999999999999"}, "--gomaxprocs 999999999999"},
	} {
		sc := DefaultServiceConfig()
		fs := flag.NewFlagSet("cgw", flag.ContinueOnError)
		sc.RegisterFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		err := sc.Validate()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v: error %v, want one naming %s", c.args, err, c.err)
		}
	}
}
