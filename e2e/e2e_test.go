// Package e2e holds the end-to-end tests of the CHF: real cgw, ocp, abm
// and aslite servers on 127.0.0.1:0 in this process, talking over real
// HTTP (HTTP/2 prior knowledge and HTTP/1.1 clients on the Nchf side,
// fasthttp between the services, the Aerospike protocol to aslite), and
// one test that runs the built `chf local` as separate processes. Every
// Nchf exchange is validated against the 3GPP OpenAPI definition.
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/abmclient"
	"github.com/chf-testbed/testbed/abm/aslite/aslitetest"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/cgw/nchfspec"
	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/server"
	"github.com/chf-testbed/testbed/ocp"
	"github.com/chf-testbed/testbed/ocp/ocpclient"
	"github.com/chf-testbed/testbed/tariff"
)

// Subscribers provisioned by startCHF: first..first+accounts-1.
const (
	first    = "imsi-001010000000001"
	accounts = 20
	balance  = 1_000_000 // minor units
)

// clock is the ABM's injected clock (reservation expiry tests move it).
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

type env struct {
	base  string // http://host:port of the CGW
	clock *clock
	as    *as.Client
	abm   *gate // the ABM's requests pass through it (stall tests)
	core  *ocpclient.Client
	gy    *gyRef // the Diameter server startGy starts, for RAR/ASR
	// The services themselves (sweep, tariff reload, notification poll).
	svc  *abm.Service
	proc *ocp.Processor
	cgw  *cgw.Handler
}

// gyRef is the CGW's GyNotifier: the Diameter server once startGy ran.
type gyRef struct {
	s atomic.Pointer[diameter.Server]
}

func (g *gyRef) Notify(ctx context.Context, host, sid string, abort bool) error {
	s := g.s.Load()
	if s == nil {
		return diameter.ErrPeerGone
	}
	return s.Notify(ctx, host, sid, abort)
}

// startCHF starts aslite, abm, ocp and cgw in process, each on its own
// 127.0.0.1:0 listener, wired over real connections, and provisions the
// accounts. Everything stops at the end of the test.
func startCHF(t *testing.T) *env {
	t.Helper()
	return startCHFTariff(t, nil)
}

// startCHFTariff is startCHF with the OCP rating on tariff (nil = the
// default).
func startCHFTariff(t *testing.T, tf *tariff.Tariff) *env {
	t.Helper()
	asc := aslitetest.Start(t)
	if _, err := provision.Run(context.Background(), asc, provision.Config{First: first, Count: accounts, Balance: balance, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
	clk := &clock{}
	svc := abm.New(asc, abm.Config{Now: clk.now})
	g := newGate(t, svc.Handler())
	abmSrv := startService(t, "abm", g.serve)
	abmCl := newClient(t, "abm", abmSrv.Addr())
	proc := ocp.NewProcessor(tf, abmclient.New(abmCl, batcher.Config{}))
	ocpSrv := startService(t, "ocp", ocp.Handler(proc))
	ocpCl := newClient(t, "ocp", ocpSrv.Addr())
	core := ocpclient.New(ocpCl, batcher.Config{})
	gy := &gyRef{}
	notifier := cgw.NewNotifier(cgw.NotifierConfig{Timeout: 200 * time.Millisecond, Backoff: 10 * time.Millisecond, PerDestination: 2})
	t.Cleanup(notifier.Close)
	srv, err := cgw.NewServer(cgw.Config{Listen: "127.0.0.1:0", Handler: cgw.HandlerConfig{Charger: core, MaxBody: 8192,
		OperatorToken: operatorToken, Notifier: notifier, Gy: gy}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, srv.Shutdown) })
	return &env{base: "http://" + srv.Addr(), clock: clk, as: asc, abm: g, core: core, gy: gy, svc: svc, proc: proc, cgw: srv.Handler()}
}

func startService(t *testing.T, name string, h fasthttp.RequestHandler) *server.Server {
	t.Helper()
	s, err := server.New(server.Config{Service: name, Listen: "127.0.0.1:0", Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, s.Shutdown) })
	return s
}

func newClient(t *testing.T, name, addr string) *peer.Client {
	t.Helper()
	c, err := peer.New(peer.Config{Peer: name, Source: discovery.Static(addr), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func shutdown(t *testing.T, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

var (
	specOnce sync.Once
	spec     *nchfspec.Validator
	specErr  error
)

// validator returns the spec validator, nil when the files are missing
// outside CI (the exchanges are then not validated; CI=true fails).
func validator(t *testing.T) *nchfspec.Validator {
	t.Helper()
	specOnce.Do(func() { spec, specErr = nchfspec.Load("") })
	if errors.Is(specErr, nchfspec.ErrMissing) && os.Getenv("CI") != "true" {
		t.Logf("not validating against the spec: %v", specErr)
		return nil
	}
	if specErr != nil {
		t.Fatal(specErr)
	}
	return spec
}

// client is one Nchf client (HTTP/2 or HTTP/1.1) of a test.
type client struct {
	t    *testing.T
	name string
	hc   *http.Client
	base string
	v    *nchfspec.Validator
}

func clients(t *testing.T, e *env) []*client {
	h1 := &http.Transport{MaxIdleConnsPerHost: 64}
	h2 := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(func() { h1.CloseIdleConnections(); h2.CloseIdleConnections() })
	v := validator(t)
	return []*client{
		{t: t, name: "h2c", hc: &http.Client{Transport: h2, Timeout: 20 * time.Second}, base: e.base, v: v},
		{t: t, name: "http1", hc: &http.Client{Transport: h1, Timeout: 20 * time.Second}, base: e.base, v: v},
	}
}

type reply struct {
	status  int
	header  http.Header
	body    []byte
	charged int64
}

// do sends a request; Nchf exchanges with a conforming request are
// validated against the spec, others have their response validated.
func (c *client) do(method, path string, body []byte) reply {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(path, cgw.AccountsBase) {
		// The balance inquiry takes the operator token the CGW has.
		req.Header.Set("Authorization", "Bearer "+operatorToken)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	want := map[string]int{"h2c": 2, "http1": 1}[c.name]
	if resp.ProtoMajor != want {
		c.t.Fatalf("%s: served over HTTP/%d", c.name, resp.ProtoMajor)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	if h := resp.Header.Get(cgw.ChargedHeader); h != "" {
		r.charged, _ = strconv.ParseInt(h, 10, 64)
	}
	if c.v != nil && nchfspec.Covers(path) && resp.StatusCode != http.StatusRequestEntityTooLarge {
		var err error
		if c.v.ValidateRequest(method, path, body) == nil {
			err = c.v.Validate(method, path, body, r.status, r.header, r.body)
		} else {
			err = c.v.ValidateResponseOnly(method, path, r.status, r.header, r.body)
		}
		if err != nil {
			c.t.Fatalf("%s %s %s → %d %s: %v", c.name, method, path, r.status, r.body, err)
		}
	}
	return r
}

// stamp makes every invocationTimeStamp req writes distinct, so two
// requests are the same request (a retransmission) only when a test sends
// the same body twice.
var stamp atomic.Int64

// req builds a ChargingDataRequest.
func req(supi string, seq int, muu string, extra ...string) []byte {
	var b strings.Builder
	b.WriteString(`{"nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"0b4c52a2-1f9e-4a8e-9f3e-7d2b6c9e1a11"},"invocationTimeStamp":"`)
	b.WriteString(time.Now().Add(time.Duration(stamp.Add(1))).UTC().Format(time.RFC3339Nano))
	b.WriteString(`","invocationSequenceNumber":` + strconv.Itoa(seq))
	if supi != "" {
		b.WriteString(`,"subscriberIdentifier":"` + supi + `"`)
	}
	if muu != "" {
		b.WriteString(`,"multipleUnitUsage":[` + muu + `]`)
	}
	for _, e := range extra {
		b.WriteString("," + e)
	}
	b.WriteString("}")
	return []byte(b.String())
}

type grant struct {
	ResultCode       string
	RatingGroup      uint32
	GrantedUnit      map[string]uint64
	ValidityTime     uint32
	QuotaHoldingTime uint32
	FUI              *struct{ FinalUnitAction string } `json:"finalUnitIndication"`
}

func grants(t *testing.T, r reply) []grant {
	t.Helper()
	var cdr struct {
		MUI []grant `json:"multipleUnitInformation"`
	}
	if err := json.Unmarshal(r.body, &cdr); err != nil {
		t.Fatalf("cannot decode ChargingDataResponse %s: %v", r.body, err)
	}
	return cdr.MUI
}

type bal struct {
	SUPI                         string
	Balance, Reserved, Available int64
	Debited, Overage             int64
	Offline, Credited            int64
	CreditLimit                  int64
	Currency                     string
	Barred                       bool
	Buckets                      []struct {
		Service     string
		Units, Held uint64
		Expires     int64
	}
}

func (c *client) balance(supi string) bal {
	c.t.Helper()
	r := c.do("GET", cgw.AccountsBase+supi, nil)
	if r.status != 200 {
		c.t.Fatalf("balance of %s: %d %s", supi, r.status, r.body)
	}
	var b bal
	if err := json.Unmarshal(r.body, &b); err != nil {
		c.t.Fatal(err)
	}
	if b.Available != b.Balance-b.Reserved || b.SUPI != supi {
		c.t.Fatalf("inconsistent balance %s", r.body)
	}
	return b
}

func supi(i int) string {
	s, err := provision.SUPI(first, i)
	if err != nil {
		panic(err)
	}
	return s
}

// create posts a create and returns the ChargingDataRef path base.
func (c *client) create(body []byte) (string, reply) {
	c.t.Helper()
	r := c.do("POST", cgw.NchfBase, body)
	if r.status != 201 {
		c.t.Fatalf("create: %d %s", r.status, r.body)
	}
	loc := r.header.Get("Location")
	i := strings.Index(loc, cgw.NchfBase+"/")
	if i < 0 {
		c.t.Fatalf("Location %q", loc)
	}
	return loc[i:], r
}

func TestDataSession(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(i)
			b0 := c.balance(s)
			if b0.Balance != balance || b0.Reserved != 0 || b0.Currency != "EUR" {
				t.Fatalf("initial balance %+v", b0)
			}
			// Create: RG 10 data, the CHF picks the grant (10 MB = 10 minor units).
			ref, r := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`))
			g := grants(t, r)
			if len(g) != 1 || g[0].ResultCode != "SUCCESS" || g[0].GrantedUnit["totalVolume"] != 10_000_000 || g[0].ValidityTime != 1800 || g[0].QuotaHoldingTime != 300 {
				t.Fatalf("create grants %s", r.body)
			}
			if r.charged != 0 {
				t.Fatalf("create charged %d", r.charged)
			}
			if b := c.balance(s); b.Balance != balance || b.Reserved != 10 {
				t.Fatalf("after create %+v", b)
			}
			// Update: 2.5 MB used → ceil(2.5) = 3 minor units; new 5 MB grant.
			r = c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{"totalVolume":5000000},"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":2500000,"uplinkVolume":500000,"downlinkVolume":2000000}]}`))
			if r.status != 200 || r.charged != 3 {
				t.Fatalf("update: %d charged %d %s", r.status, r.charged, r.body)
			}
			if g := grants(t, r); len(g) != 1 || g[0].GrantedUnit["totalVolume"] != 5_000_000 {
				t.Fatalf("update grants %s", r.body)
			}
			if b := c.balance(s); b.Balance != balance-3 || b.Reserved != 5 {
				t.Fatalf("after update %+v", b)
			}
			// Release: 4,000,001 octets → 5 minor units.
			r = c.do("POST", ref+"/release", req("", 2, `{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":2,"totalVolume":4000001}]}`))
			if r.status != 204 || r.charged != 5 || len(r.body) != 0 {
				t.Fatalf("release: %d charged %d %s", r.status, r.charged, r.body)
			}
			if b := c.balance(s); b.Balance != balance-8 || b.Reserved != 0 || b.Available != balance-8 {
				t.Fatalf("after release %+v", b)
			}
			// The released session is gone for new sequence numbers.
			if r := c.do("POST", ref+"/update", req("", 3, `{"ratingGroup":10,"requestedUnit":{}}`)); r.status != 404 {
				t.Fatalf("update after release: %d %s", r.status, r.body)
			}
		})
	}
}

func TestVoiceAndMultipleRatingGroups(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(2 + i)
			ref, r := c.create(req(s, 0, `{"ratingGroup":20,"requestedUnit":{"time":120}},{"ratingGroup":10,"requestedUnit":{}},{"ratingGroup":777,"requestedUnit":{}}`))
			g := grants(t, r)
			if len(g) != 3 || g[0].GrantedUnit["time"] != 120 || g[1].GrantedUnit["totalVolume"] != 10_000_000 || g[2].ResultCode != "RATING_FAILED" {
				t.Fatalf("create grants %s", r.body)
			}
			if b := c.balance(s); b.Reserved != 130 {
				t.Fatalf("after create %+v", b)
			}
			r = c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":20,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"time":95}]}`))
			if r.status != 200 || r.charged != 95 {
				t.Fatalf("update: %d charged %d %s", r.status, r.charged, r.body)
			}
			if g := grants(t, r); len(g) != 1 || g[0].GrantedUnit["time"] != 300 {
				t.Fatalf("update grants %s", r.body)
			}
			r = c.do("POST", ref+"/release", req("", 2, `{"ratingGroup":20,"usedUnitContainer":[{"localSequenceNumber":2,"time":61}]},{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":1}]}`))
			if r.status != 204 || r.charged != 62 {
				t.Fatalf("release: %d charged %d", r.status, r.charged)
			}
			if b := c.balance(s); b.Balance != balance-157 || b.Reserved != 0 {
				t.Fatalf("after release %+v", b)
			}
		})
	}
}

func TestSMSEvent(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(4 + i)
			for n := 1; n <= 3; n++ {
				r := c.do("POST", cgw.NchfBase, req(s, 0, `{"ratingGroup":30,"requestedUnit":{"serviceSpecificUnits":1}}`, `"oneTimeEvent":true`, `"oneTimeEventType":"IEC"`))
				if r.status != 201 || r.charged != 5 || r.header.Get("Location") != "" {
					t.Fatalf("SMS %d: %d charged %d %s", n, r.status, r.charged, r.body)
				}
				if g := grants(t, r); len(g) != 1 || g[0].ResultCode != "SUCCESS" || g[0].GrantedUnit["serviceSpecificUnits"] != 1 {
					t.Fatalf("SMS grants %s", r.body)
				}
				if b := c.balance(s); b.Balance != balance-5*int64(n) || b.Reserved != 0 {
					t.Fatalf("after SMS %d: %+v", n, b)
				}
			}
		})
	}
}

// setBalance overwrites one account with a fresh balance.
func setBalance(t *testing.T, e *env, s string, b int64) {
	t.Helper()
	if _, err := provision.Run(context.Background(), e.as, provision.Config{First: s, Count: 1, Balance: b, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestInsufficientBalance(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(6 + i)
			setBalance(t, e, s, 500)
			// 300 s voice grant: fits, but another would not → FUI TERMINATE.
			ref, r := c.create(req(s, 0, `{"ratingGroup":20,"requestedUnit":{}}`))
			g := grants(t, r)
			if len(g) != 1 || g[0].GrantedUnit["time"] != 300 || g[0].FUI == nil || g[0].FUI.FinalUnitAction != "TERMINATE" {
				t.Fatalf("create grants %s", r.body)
			}
			// Use it all and ask for more: only 200 s remain, again final.
			r = c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":20,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"time":300}]}`))
			g = grants(t, r)
			if r.status != 200 || r.charged != 300 || len(g) != 1 || g[0].GrantedUnit["time"] != 200 || g[0].FUI == nil {
				t.Fatalf("update: %d %s", r.status, r.body)
			}
			r = c.do("POST", ref+"/update", req("", 2, `{"ratingGroup":20,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":2,"time":200}]}`))
			g = grants(t, r)
			if r.status != 200 || r.charged != 200 || len(g) != 1 || g[0].ResultCode != "QUOTA_LIMIT_REACHED" {
				t.Fatalf("exhausted update: %d %s", r.status, r.body)
			}
			r = c.do("POST", ref+"/release", req("", 3, ""))
			if r.status != 204 {
				t.Fatalf("release: %d %s", r.status, r.body)
			}
			// A new session on the empty account is refused as a whole.
			r = c.do("POST", cgw.NchfBase, req(s, 0, `{"ratingGroup":20,"requestedUnit":{}}`))
			if r.status != 403 || !bytes.Contains(r.body, []byte(`"cause":"QUOTA_LIMIT_REACHED"`)) || r.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("create on empty account: %d %s", r.status, r.body)
			}
			if b := c.balance(s); b.Balance != 0 || b.Reserved != 0 {
				t.Fatalf("final %+v", b)
			}
		})
	}
}

func TestUnknownUser(t *testing.T) {
	e := startCHF(t)
	for _, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			r := c.do("POST", cgw.NchfBase, req("imsi-999990000000001", 0, `{"ratingGroup":10,"requestedUnit":{}}`))
			if r.status != 404 || !bytes.Contains(r.body, []byte(`"cause":"USER_UNKNOWN"`)) {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			if r := c.do("GET", cgw.AccountsBase+"imsi-999990000000001", nil); r.status != 404 {
				t.Fatalf("balance: %d %s", r.status, r.body)
			}
			r = c.do("POST", cgw.NchfBase+"/"+supi(0)+".0123456789abcdef/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{}}`))
			if r.status != 404 {
				t.Fatalf("unknown ref: %d %s", r.status, r.body)
			}
		})
	}
}

func TestRetriesChargeOnce(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(8 + i)
			b0 := c.balance(s).Balance
			ref, _ := c.create(req(s, 0, `{"ratingGroup":20,"requestedUnit":{"time":100}}`))
			upd := req("", 1, `{"ratingGroup":20,"requestedUnit":{"time":100},"usedUnitContainer":[{"localSequenceNumber":1,"time":40}]}`, `"retransmissionIndicator":true`)
			first := c.do("POST", ref+"/update", upd)
			if first.status != 200 || first.charged != 40 {
				t.Fatalf("update: %d charged %d %s", first.status, first.charged, first.body)
			}
			for range 3 {
				again := c.do("POST", ref+"/update", upd)
				// answered as the first, X-Chf-Charged included
				if again.status != 200 || again.charged != 40 {
					t.Fatalf("repeated update: %d charged %d %s", again.status, again.charged, again.body)
				}
				if fmt.Sprint(grants(t, again)) != fmt.Sprint(grants(t, first)) {
					t.Fatalf("repeated update answered %s, first %s", again.body, first.body)
				}
			}
			// An older sequence number is refused, naming the field.
			stale := c.do("POST", ref+"/update", req("", 0, `{"ratingGroup":20,"usedUnitContainer":[{"localSequenceNumber":1,"time":40}]}`))
			if stale.status != 400 || !bytes.Contains(stale.body, []byte("/invocationSequenceNumber")) {
				t.Fatalf("stale update: %d %s", stale.status, stale.body)
			}
			rel := req("", 2, `{"ratingGroup":20,"usedUnitContainer":[{"localSequenceNumber":2,"time":10}]}`)
			// Each repeat is answered as the first, X-Chf-Charged included.
			for n := range 3 {
				if r := c.do("POST", ref+"/release", rel); r.status != 204 || r.charged != 10 {
					t.Fatalf("release %d: %d charged %d %s", n, r.status, r.charged, r.body)
				}
			}
			if b := c.balance(s); b.Balance != b0-50 || b.Reserved != 0 {
				t.Fatalf("balance %+v, want %d: every request charged once", b, b0-50)
			}
			if b := c.balance(s); b.Balance != balance-50 || b.Reserved != 0 {
				t.Fatalf("final %+v", b)
			}
		})
	}
}

func TestConcurrentSessionsSameAccount(t *testing.T) {
	e := startCHF(t)
	const start = 2000
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(10 + i)
			setBalance(t, e, s, start)
			const sessions = 40
			var charged atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, sessions)
			for n := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- session(c, s, n, &charged)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			b := c.balance(s)
			if b.Balance < 0 || b.Reserved != 0 || b.Balance != start-charged.Load() {
				t.Fatalf("balance %+v, charged %d: want %d", b, charged.Load(), start-charged.Load())
			}
			if charged.Load() == 0 {
				t.Fatal("nothing charged")
			}
		})
	}
}

// session runs create, update, release on supi s (voice: 60 s grants,
// 30 s then 25 s used), adding what was charged to total.
func session(c *client, s string, n int, total *atomic.Int64) error {
	r, err := c.raw("POST", cgw.NchfBase, req(s, 0, `{"ratingGroup":20,"requestedUnit":{"time":60}}`))
	if err != nil {
		return err
	}
	total.Add(r.charged)
	if r.status == 403 {
		return nil // balance exhausted: refused as a whole
	}
	if r.status != 201 {
		return fmt.Errorf("session %d create: %d %s", n, r.status, r.body)
	}
	loc := r.header.Get("Location")
	ref := loc[strings.Index(loc, cgw.NchfBase):]
	r, err = c.raw("POST", ref+"/update", req("", 1, `{"ratingGroup":20,"requestedUnit":{"time":60},"usedUnitContainer":[{"localSequenceNumber":1,"time":30}]}`))
	if err != nil {
		return err
	}
	if r.status != 200 {
		return fmt.Errorf("session %d update: %d %s", n, r.status, r.body)
	}
	total.Add(r.charged)
	r, err = c.raw("POST", ref+"/release", req("", 2, `{"ratingGroup":20,"usedUnitContainer":[{"localSequenceNumber":2,"time":25}]}`))
	if err != nil {
		return err
	}
	if r.status != 204 {
		return fmt.Errorf("session %d release: %d %s", n, r.status, r.body)
	}
	total.Add(r.charged)
	return nil
}

// raw is do without t.Fatal (for goroutines) and without validation.
func (c *client) raw(method, path string, body []byte) (reply, error) {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	r.charged, _ = strconv.ParseInt(resp.Header.Get(cgw.ChargedHeader), 10, 64)
	return r, nil
}

func TestReservationExpiry(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(12 + i)
			c.create(req(s, 0, `{"ratingGroup":20,"requestedUnit":{"time":250}}`))
			if b := c.balance(s); b.Reserved != 250 || b.Available != balance-250 {
				t.Fatalf("after create %+v", b)
			}
			e.clock.advance(1801 * time.Second) // past the 1800 s validity time
			if b := c.balance(s); b.Reserved != 0 || b.Balance != balance || b.Available != balance {
				t.Fatalf("after expiry %+v", b)
			}
		})
	}
}

func TestMalformedRequests(t *testing.T) {
	e := startCHF(t)
	for _, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			muu := `{"ratingGroup":10,"requestedUnit":{}}`
			for _, tc := range []struct {
				name, body, param string
			}{
				{"malformed JSON", `{"subscriberIdentifier":"imsi-001010000000001",`, ""},
				{"not an object", `"hello"`, "/"},
				{"missing nfConsumerIdentification", `{"subscriberIdentifier":"` + supi(0) + `","invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":0}`, "/nfConsumerIdentification"},
				{"missing invocationTimeStamp", `{"subscriberIdentifier":"` + supi(0) + `","nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationSequenceNumber":0}`, "/invocationTimeStamp"},
				{"missing invocationSequenceNumber", `{"subscriberIdentifier":"` + supi(0) + `","nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-11-30T04:00:00Z"}`, "/invocationSequenceNumber"},
				{"missing nodeFunctionality", `{"subscriberIdentifier":"` + supi(0) + `","nfConsumerIdentification":{},"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":0}`, "/nfConsumerIdentification/nodeFunctionality"},
				{"sequence number as string", strings.Replace(string(req(supi(0), 0, muu)), `"invocationSequenceNumber":0`, `"invocationSequenceNumber":"0"`, 1), "/invocationSequenceNumber"},
				{"rating group as string", string(req(supi(0), 0, `{"ratingGroup":"10"}`)), "/multipleUnitUsage/0/ratingGroup"},
				{"missing ratingGroup", string(req(supi(0), 0, `{"requestedUnit":{}}`)), "/multipleUnitUsage/0/ratingGroup"},
				{"negative volume", string(req(supi(0), 0, `{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":-1}]}`)), "/multipleUnitUsage/0/usedUnitContainer/0/totalVolume"},
				{"missing localSequenceNumber", string(req(supi(0), 0, `{"ratingGroup":10,"usedUnitContainer":[{"time":1}]}`)), "/multipleUnitUsage/0/usedUnitContainer/0/localSequenceNumber"},
				{"missing subscriberIdentifier on create", string(req("", 0, muu)), "/subscriberIdentifier"},
			} {
				r := c.do("POST", cgw.NchfBase, []byte(tc.body))
				var pd struct {
					Status        int
					Cause, Detail string
					InvalidParams []struct{ Param, Reason string }
				}
				if err := json.Unmarshal(r.body, &pd); err != nil {
					t.Fatalf("%s: %s: %v", tc.name, r.body, err)
				}
				if r.status != 400 || pd.Status != 400 || pd.Cause != "CHARGING_FAILED" || r.header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("%s: %d %s", tc.name, r.status, r.body)
				}
				if tc.param != "" && (len(pd.InvalidParams) != 1 || pd.InvalidParams[0].Param != tc.param || !strings.Contains(pd.Detail, tc.param)) {
					t.Fatalf("%s: %s does not name %s", tc.name, r.body, tc.param)
				}
			}
			if b := c.balance(supi(0)); b.Balance != balance || b.Reserved != 0 {
				t.Fatalf("malformed requests changed the balance: %+v", b)
			}
			big := req(supi(0), 0, muu, `"serviceSpecificationInfo":"`+strings.Repeat("x", 9000)+`"`)
			r := c.do("POST", cgw.NchfBase, big)
			if r.status != 413 || r.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("oversize: %d %s", r.status, r.body)
			}
			if c.v != nil {
				if err := c.v.ValidateResponseOnly("POST", cgw.NchfBase, r.status, r.header, r.body); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
