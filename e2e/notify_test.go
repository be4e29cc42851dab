package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// smf is a notifyUri endpoint (HTTP/2 cleartext) that records the
// ChargingNotify requests it gets and answers as told: the first fail
// requests 503, the first slow ones after a delay beyond the CHF's
// per-attempt timeout, then 204.
type smf struct {
	t      *testing.T
	url    string
	fail   atomic.Int32
	slow   atomic.Int32
	mu     sync.Mutex
	bodies [][]byte
	hits   atomic.Int32
}

func startSMF(t *testing.T) *smf {
	t.Helper()
	s := &smf{t: t}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v := validator(t)
	srv := &http.Server{Handler: h2c.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.hits.Add(1)
		if r.ProtoMajor != 2 || r.Method != "POST" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("notification over HTTP/%d %s %s", r.ProtoMajor, r.Method, r.Header.Get("Content-Type"))
		}
		status := http.StatusNoContent
		switch {
		case s.fail.Add(-1) >= 0:
			status = http.StatusServiceUnavailable
		case s.slow.Add(-1) >= 0:
			time.Sleep(400 * time.Millisecond)
		}
		if v != nil {
			if err := v.ValidateNotify(b, status, nil); err != nil {
				t.Errorf("ChargingNotify %s → %d: %v", b, status, err)
			}
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
		w.WriteHeader(status)
	}), &http2.Server{})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.url = "http://" + ln.Addr().String() + "/nsmf-pdusession/v1/charging-notify"
	return s
}

func (s *smf) types() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.bodies {
		var n struct{ NotificationType string }
		json.Unmarshal(b, &n)
		out = append(out, n.NotificationType)
	}
	return out
}

// operator posts to the operator API with the token and decodes the
// notification summary.
func (c *client) operator(s, suffix string) (int, map[string]int) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+cgw.AccountsBase+s+suffix, nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]int
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("operator answer %s: %v", b, err)
		}
	}
	return resp.StatusCode, m
}

// TestNotifications: the CHF keeps a session's notifyUri and sends
// ChargingNotify REAUTHORIZATION / ABORT_CHARGING to it on the operator's
// reauthorize, top-up and abort, retrying a client that fails or is slow,
// within bounds. Every notification is validated against the spec.
func TestNotifications(t *testing.T) {
	e := startCHF(t)
	sm := startSMF(t)
	c := clients(t, e)[0]
	s := supi(3)
	nu := `"notifyUri":"` + sm.url + `"`
	ref, _ := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`, nu))
	// A second session without a notifyUri is counted, not notified.
	ref2, _ := c.create(req(s, 0, `{"ratingGroup":20,"requestedUnit":{}}`))

	if st, _ := c.topUp(s, "", ""); st != 401 {
		t.Fatalf("reauthorize without token: %d", st)
	}
	st, m := c.operator(s, cgw.ReauthorizeSuffix)
	if st != 200 || m["sessions"] != 2 || m["withNotifyUri"] != 1 || m["notified"] != 1 || m["failed"] != 0 || sm.hits.Load() != 1 {
		t.Fatalf("reauthorize: %d %v, %d hits", st, m, sm.hits.Load())
	}
	// A failing client: retried until it accepts.
	sm.fail.Store(2)
	if st, m = c.operator(s, cgw.ReauthorizeSuffix); m["notified"] != 1 || sm.hits.Load() != 4 {
		t.Fatalf("reauthorize with 2 failures: %d %v, %d hits", st, m, sm.hits.Load())
	}
	// A slow client: the attempt times out and is retried.
	sm.slow.Store(1)
	start := time.Now()
	if st, m = c.operator(s, cgw.ReauthorizeSuffix); m["notified"] != 1 || sm.hits.Load() != 6 {
		t.Fatalf("reauthorize with a slow client: %d %v, %d hits", st, m, sm.hits.Load())
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("slow client held the operator call %v", el)
	}
	// A client that keeps failing: bounded attempts, reported failed.
	sm.fail.Store(100)
	if st, m = c.operator(s, cgw.ReauthorizeSuffix); m["failed"] != 1 || m["notified"] != 0 || sm.hits.Load() != 9 {
		t.Fatalf("reauthorize, always failing: %d %v, %d hits", st, m, sm.hits.Load())
	}
	sm.fail.Store(0)
	// A top-up re-authorises too.
	if st, _ := c.topUp(s, operatorToken, `{"amount":10}`); st != 200 || sm.hits.Load() != 10 {
		t.Fatalf("top-up: %d, %d hits", st, sm.hits.Load())
	}
	// Abort.
	if st, m = c.operator(s, cgw.AbortSuffix); m["notified"] != 1 {
		t.Fatalf("abort: %d %v", st, m)
	}
	ty := sm.types()
	// (The slow client's first, abandoned attempt may not be recorded
	// yet.)
	reauth := 0
	for _, x := range ty[:len(ty)-1] {
		if x == "REAUTHORIZATION" {
			reauth++
		}
	}
	if len(ty) < 10 || reauth != len(ty)-1 || ty[len(ty)-1] != "ABORT_CHARGING" {
		t.Fatalf("notification types %v", ty)
	}
	// The abort barred both sessions: an update is refused (the
	// session must be released), a release still takes the final usage.
	for i, r := range []string{ref, ref2} {
		up := c.do("POST", r+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"totalVolume":1000,"localSequenceNumber":1}]}`))
		if up.status != 403 || !strings.Contains(string(up.body), "END_USER_REQUEST_DENIED") || !strings.Contains(string(up.body), "aborted") {
			t.Fatalf("update %d after abort: %d %s", i, up.status, up.body)
		}
	}
	// The SMF releases; the account has no session left to notify.
	for i, r := range []string{ref, ref2} {
		if r := c.do("POST", r+"/release", req("", 2, "")); r.status != 204 {
			t.Fatalf("release %d: %d %s", i, r.status, r.body)
		}
	}
	if st, m = c.operator(s, cgw.ReauthorizeSuffix); st != 200 || m["sessions"] != 0 {
		t.Fatalf("after release: %d %v", st, m)
	}
	if st, _ := c.operator("imsi-999999999999999", cgw.AbortSuffix); st != 404 {
		t.Fatalf("unknown account: %d", st)
	}
	if !strings.HasPrefix(sm.url, "http://127.0.0.1:") || bytes.Contains([]byte(sm.url), []byte(" ")) {
		t.Fatal(sm.url)
	}
}

// TestGyReAuthAndAbort: the operator's reauthorize sends a RAR to the
// Gy session's peer, which answers and re-authorises with a CCR-U; abort
// sends an ASR, answered, and the PGW terminates with a CCR-T.
func TestGyReAuthAndAbort(t *testing.T) {
	e := startCHF(t)
	type serverReq struct {
		abort bool
		sid   string
	}
	got := make(chan serverReq, 4)
	c := startGyConfig(t, e, gy.Config{OnServerRequest: func(abort bool, sid string) { got <- serverReq{abort, sid} }})
	cl := clients(t, e)[1]
	sid := c.NewSessionID()
	imsi := imsiOf(9)
	gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestInitial, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultSuccess)
	st, m := cl.operator(supi(9), cgw.ReauthorizeSuffix)
	if st != 200 || m["sessions"] != 1 || m["notified"] != 1 {
		t.Fatalf("reauthorize: %d %v", st, m)
	}
	select {
	case r := <-got:
		if r.abort || r.sid != sid {
			t.Fatalf("RAR %+v, want session %s", r, sid)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no RAR")
	}
	// Re-authorise: report and ask again.
	a := gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestUpdate, Number: 1, IMSI: imsi,
		Services: []gy.Service{{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 1_000_000}, Reason: wire.ReasonForcedReauth, HasReason: true}}}, wire.ResultSuccess)
	if a.Charged != 1 || a.Grants[0].Granted.TotalVolume == 0 {
		t.Fatalf("CCR-U after RAR %+v", a)
	}
	if st, m = cl.operator(supi(9), cgw.AbortSuffix); st != 200 || m["notified"] != 1 {
		t.Fatalf("abort: %d %v", st, m)
	}
	select {
	case r := <-got:
		if !r.abort || r.sid != sid {
			t.Fatalf("ASR %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ASR")
	}
	// The abort barred the session: a CCR-U is refused, the CCR-T is not.
	gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestUpdate, Number: 2, IMSI: imsi,
		Services: []gy.Service{{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 1}}}}, wire.ResultEndUserServiceDenied)
	gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestTermination, Number: 3, IMSI: imsi,
		Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{TotalVolume: 500_000}}}}, wire.ResultSuccess)
	if st, m = cl.operator(supi(9), cgw.ReauthorizeSuffix); m["sessions"] != 0 {
		t.Fatalf("after CCR-T: %d %v", st, m)
	}
	if b := cl.balance(supi(9)); b.Reserved != 0 || b.Debited != 2 {
		t.Fatalf("balance %+v", b)
	}
}

// unbar posts the operator's unbar with the given bearer token ("" =
// none) and decodes the balance it answers.
func (c *client) unbar(s, token string) (int, bal) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+cgw.AccountsBase+s+cgw.UnbarSuffix, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out bal
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &out); err != nil {
			c.t.Fatalf("unbar answer %s: %v", b, err)
		}
	}
	return resp.StatusCode, out
}

// TestAbortBarsAccount: the operator's abort bars the account as well as
// its open sessions: a new create or event is refused (Nchf 403
// END_USER_REQUEST_DENIED, Gy 4010) and charges nothing, a retransmitted
// create answered before the abort still gets its first answer, a top-up
// does not lift the bar, the operator's unbar does. Every Nchf exchange is
// validated against the spec (client.do).
func TestAbortBarsAccount(t *testing.T) {
	e := startCHF(t)
	c := clients(t, e)[0]
	g := startGy(t, e)
	s := supi(12)
	imsi := imsiOf(12)
	create := req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`)
	ref, _ := c.create(create)
	if st, m := c.operator(s, cgw.AbortSuffix); st != 200 || m["sessions"] != 1 {
		t.Fatalf("abort: %d %v", st, m)
	}
	b0 := c.balance(s)
	if !b0.Barred {
		t.Fatalf("balance after the abort: %+v", b0)
	}
	refused := func(what string, r reply) {
		t.Helper()
		if r.status != 403 || !strings.Contains(string(r.body), "END_USER_REQUEST_DENIED") || !strings.Contains(string(r.body), "barred") || r.charged != 0 {
			t.Fatalf("%s on a barred account: %d charged %d %s", what, r.status, r.charged, r.body)
		}
	}
	refused("create", c.do("POST", cgw.NchfBase, req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`)))
	refused("event", c.do("POST", cgw.NchfBase, req(s, 0, `{"ratingGroup":30,"requestedUnit":{"serviceSpecificUnits":1}}`, `"oneTimeEvent":true`, `"oneTimeEventType":"IEC"`)))
	// The create answered before the abort, sent again: its first answer.
	if r := c.do("POST", cgw.NchfBase, create); r.status != 201 || !strings.HasSuffix(r.header.Get("Location"), ref) {
		t.Fatalf("retransmitted create: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	// Gy: CCR-I and CCR-E refused with 4010, nothing charged.
	gyDo(t, g, &gy.Request{SessionID: g.NewSessionID(), Type: wire.RequestInitial, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultEndUserServiceDenied)
	gyDo(t, g, &gy.Request{SessionID: g.NewSessionID(), Type: gy.Event, IMSI: imsi, Action: gy.DirectDebiting, HasAction: true,
		Services: []gy.Service{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}}}, wire.ResultEndUserServiceDenied)
	// A top-up credits but does not lift the bar.
	if st, b := c.topUp(s, operatorToken, `{"amount":10}`); st != 200 || !b.Barred {
		t.Fatalf("top-up: %d %+v", st, b)
	}
	refused("create after a top-up", c.do("POST", cgw.NchfBase, req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`)))
	if b := c.balance(s); b.Debited != b0.Debited || b.Reserved != b0.Reserved || b.Balance != b0.Balance+10 {
		t.Fatalf("refused requests charged: %+v, before %+v", b, b0)
	}
	// The unbar needs the operator token; then the account takes new
	// sessions and events on both fronts.
	if st, _ := c.unbar(s, ""); st != 401 {
		t.Fatalf("unbar without a token: %d", st)
	}
	if st, b := c.unbar(s, operatorToken); st != 200 || b.Barred || b.SUPI != s {
		t.Fatalf("unbar: %d %+v", st, b)
	}
	ref2, _ := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`))
	sid := g.NewSessionID()
	gyDo(t, g, &gy.Request{SessionID: sid, Type: wire.RequestInitial, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultSuccess)
	gyDo(t, g, &gy.Request{SessionID: g.NewSessionID(), Type: gy.Event, IMSI: imsi, Action: gy.DirectDebiting, HasAction: true,
		Services: []gy.Service{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}}}, wire.ResultSuccess)
	// The session open before the abort stays barred from updates; all
	// three release.
	if r := c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{}}`)); r.status != 403 {
		t.Fatalf("update of the aborted session after the unbar: %d %s", r.status, r.body)
	}
	for i, r := range []string{ref, ref2} {
		if r := c.do("POST", r+"/release", req("", 2, "")); r.status != 204 {
			t.Fatalf("release %d: %d %s", i, r.status, r.body)
		}
	}
	gyDo(t, g, &gy.Request{SessionID: sid, Type: wire.RequestTermination, Number: 1, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10}}}, wire.ResultSuccess)
	if b := c.balance(s); b.Reserved != 0 || b.Debited != b0.Debited+5 || b.Barred {
		t.Fatalf("after the releases: %+v (event 5)", b)
	}
	if st, _ := c.unbar("imsi-999999999999999", operatorToken); st != 404 {
		t.Fatalf("unbar of an unknown account: %d", st)
	}
}
