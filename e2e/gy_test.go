package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// The Gy side of the charged-twice-or-lost cases: a Diameter front on the
// same real OCP, ABM and aslite (over HTTP) as the Nchf tests.

func startGy(t *testing.T, e *env) *gy.Conn {
	t.Helper()
	return startGyConfig(t, e, gy.Config{})
}

// startGyConfig is startGy with the client's OnServerRequest from cfg.
func startGyConfig(t *testing.T, e *env, cfg gy.Config) *gy.Conn {
	t.Helper()
	srv, err := diameter.NewServer(diameter.Config{CoreTimeout: 300 * time.Millisecond}, e.core)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, srv.Shutdown) })
	e.gy.s.Store(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := gy.DialConfig(ctx, gy.Config{Addr: srv.Addr(), OriginHost: "pgw.e2e.test", OriginRealm: "e2e.test", OnServerRequest: cfg.OnServerRequest})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func gyDo(t *testing.T, c *gy.Conn, r *gy.Request, wantResult uint32) *gy.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var a gy.Answer
	if err := c.Do(ctx, r, &a); err != nil {
		t.Fatalf("CCR %+v: %v", r, err)
	}
	if a.ResultCode != wantResult {
		t.Fatalf("CCR type %d number %d: Result-Code %d, want %d (%+v)", r.Type, r.Number, a.ResultCode, wantResult, a)
	}
	return &a
}

func imsiOf(i int) string { return supi(i)[len("imsi-"):] }

func TestGyChargesOnce(t *testing.T) {
	e := startCHF(t)
	c := startGy(t, e)
	cl := clients(t, e)[1]
	s := supi(5)
	b0 := cl.balance(s).Balance
	sid := c.NewSessionID()
	data := func(used chf.Units, request bool) []gy.Service {
		return []gy.Service{{RatingGroup: 10, Request: request, Used: used}}
	}
	// A retransmitted CCR-I (T flag) opens one session.
	ini := &gy.Request{SessionID: sid, Type: gy.Initial, IMSI: imsiOf(5), Services: data(chf.Units{}, true)}
	first := gyDo(t, c, ini, wire.ResultSuccess)
	again := *ini
	again.Retransmit, again.EndToEnd = true, first.EndToEnd
	gyDo(t, c, &again, wire.ResultSuccess)
	if b := cl.balance(s); b.Reserved != 10 {
		t.Fatalf("after a retransmitted CCR-I %+v, want one 10 MB reservation", b)
	}
	// A USU with a total charges the total (case 3: the CCR-T's input +
	// output USU below charges their sum; mixed USUs in one MSCC are
	// decoded each as reported, see cgw/diameter TestDecodeGoDiameterCCR).
	upd := &gy.Request{SessionID: sid, Type: gy.Update, Number: 1, IMSI: imsiOf(5), Services: []gy.Service{
		{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 1_000_000}},
	}}
	if a := gyDo(t, c, upd, wire.ResultSuccess); a.Charged != 1 {
		t.Fatalf("CCR-U charged %d, want 1", a.Charged)
	}
	// The repeat is answered as the first, Cost-Information included.
	if a := gyDo(t, c, upd, wire.ResultSuccess); a.Charged != 1 {
		t.Fatalf("repeated CCR-U answered charged %d, want the first answer's 1", a.Charged)
	}
	// Case 1: the number reused with other content or by a CCR-T.
	other := *upd
	other.Services = data(chf.Units{TotalVolume: 9_000_000}, true)
	if a := gyDo(t, c, &other, wire.ResultInvalidAVPValue); a.FailedAVP != wire.CodeCCRequestNumber {
		t.Fatalf("changed CCR-U: Failed-AVP %d", a.FailedAVP)
	}
	term := &gy.Request{SessionID: sid, Type: gy.Termination, Number: 1, IMSI: imsiOf(5), Services: data(chf.Units{UplinkVolume: 4_000_000, DownlinkVolume: 5_000_000}, false)}
	gyDo(t, c, term, wire.ResultInvalidAVPValue)
	term.Number = 2
	if a := gyDo(t, c, term, wire.ResultSuccess); a.Charged != 9 {
		t.Fatalf("CCR-T charged %d, want 9", a.Charged)
	}
	// Case 5: after the CCR-T, a CCR-U with its number is an unknown session.
	late := *upd
	late.Number = 2
	gyDo(t, c, &late, wire.ResultUnknownSessionID)
	// Case 4: a rating group in two MSCCs is refused.
	twice := &gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: imsiOf(5), Services: []gy.Service{
		{RatingGroup: 10, Request: true}, {RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 5_000_000}},
	}}
	if a := gyDo(t, c, twice, wire.ResultInvalidAVPValue); a.FailedAVP != wire.CodeRatingGroup {
		t.Fatalf("rating group twice: Failed-AVP %d", a.FailedAVP)
	}
	// Case 2: a retransmitted event charges once.
	ev := &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsiOf(5), Action: gy.DirectDebiting, HasAction: true,
		Services: []gy.Service{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}}}
	a1 := gyDo(t, c, ev, wire.ResultSuccess)
	ev.Retransmit, ev.EndToEnd = true, a1.EndToEnd
	// The retransmission is answered as the first (Cost-Information 5);
	// the balance below shows it charged once.
	if a := gyDo(t, c, ev, wire.ResultSuccess); a1.Charged != 5 || a.Charged != 5 {
		t.Fatalf("event answered charged %d then %d, want 5 both times", a1.Charged, a.Charged)
	}
	if b := cl.balance(s); b.Balance != b0-15 || b.Reserved != 0 {
		t.Fatalf("balance %+v, want %d", b, b0-15)
	}
}

// Case 7 on Gy: a stalled ABM is answered 3002 within CoreTimeout.
func TestGyStalledABM(t *testing.T) {
	e := startCHF(t)
	c := startGy(t, e)
	e.abm.stall()
	defer e.abm.release()
	start := time.Now()
	gyDo(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: imsiOf(6), Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultUnableToDeliver)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("3002 after %v, want about the 300 ms CoreTimeout", took)
	}
}
