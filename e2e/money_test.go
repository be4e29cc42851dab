package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// TestLocalUsageNeverDropped runs `chf local` (the binaries, accounts of
// 12 minor units) and checks, over Nchf h2c, HTTP/1.1 and Gy, that usage
// reported on an account that cannot cover it is never dropped: an event
// charged after delivery (PEC, Gy CCR-E with Used-Service-Unit) is debited
// as far as the balance goes and the rest recorded as overage; an
// immediate event (IEC, Gy DIRECT_DEBITING) is refused with nothing
// charged; usage reported OFFLINE_CHARGING for a rating group holding an
// online grant is debited as online usage. Every account reconciles:
// balance = 12 - debited, debited + overage = all usage rated.
func TestLocalUsageNeverDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gyAddr := ln.Addr().String()
	ln.Close()
	const start = 12
	lr := startLocal(t, "--accounts", "8", "--balance", "12", "--nchf", "127.0.0.1:0", "--diameter", gyAddr, "--quiet")
	e := &env{base: strings.TrimSuffix(lr.nchfURL, cgw.NchfBase)}
	if want := e.base + cgw.AccountsBase; lr.balURL != want {
		t.Fatalf("balance URL %s, want %s", lr.balURL, want)
	}
	wantAccount := func(c *client, s string, debited, overage, offline int64) {
		t.Helper()
		b := c.balance(s)
		if b.Debited != debited || b.Overage != overage || b.Offline != offline || b.Balance != start-b.Debited || b.Reserved != 0 {
			t.Fatalf("%s: %+v, want debited %d overage %d offline %d from %d", s, b, debited, overage, offline, start)
		}
	}
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			// PEC: 4 messages (20) delivered on 12: 12 debited, 8 overage.
			s := supi(i)
			pec := req(s, 0, `{"ratingGroup":30,"usedUnitContainer":[{"localSequenceNumber":1,"serviceSpecificUnits":4}]}`,
				`"oneTimeEvent":true,"oneTimeEventType":"PEC"`)
			if r := c.do("POST", cgw.NchfBase, pec); r.status != 201 || r.charged != 12 {
				t.Fatalf("PEC: %d charged %d %s", r.status, r.charged, r.body)
			}
			wantAccount(c, s, 12, 8, 0)
			// The same without oneTimeEventType: usage reported, so PEC.
			pec = req(s, 1, `{"ratingGroup":30,"usedUnitContainer":[{"localSequenceNumber":1,"serviceSpecificUnits":1}]}`, `"oneTimeEvent":true`)
			if r := c.do("POST", cgw.NchfBase, pec); r.status != 201 || r.charged != 0 {
				t.Fatalf("event reporting usage: %d charged %d %s", r.status, r.charged, r.body)
			}
			wantAccount(c, s, 12, 13, 0)
			// IEC on the empty account: refused before delivery.
			iec := req(s, 2, `{"ratingGroup":30,"requestedUnit":{"serviceSpecificUnits":1}}`, `"oneTimeEvent":true,"oneTimeEventType":"IEC"`)
			r := c.do("POST", cgw.NchfBase, iec)
			wantProblem(t, "IEC on an empty account", r, 403, "")
			if !strings.Contains(string(r.body), "QUOTA_LIMIT_REACHED") {
				t.Fatalf("IEC refused with %s", r.body)
			}
			wantAccount(c, s, 12, 13, 0)

			// OFFLINE_CHARGING reported on an online grant: debited.
			s = supi(2 + i)
			ref, r := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`))
			if g := grants(t, r); len(g) != 1 || g[0].GrantedUnit["totalVolume"] != 10_000_000 {
				t.Fatalf("create: %s", r.body)
			}
			r = c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5000000,"quotaManagementIndicator":"OFFLINE_CHARGING"}]}`))
			if g := grants(t, r); r.status != 200 || r.charged != 5 || len(g) != 1 || g[0].GrantedUnit["totalVolume"] != 7_000_000 {
				t.Fatalf("offline usage on an online grant: %d charged %d %s", r.status, r.charged, r.body)
			}
			r = c.do("POST", ref+"/release", req("", 2, `{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":2,"totalVolume":20000000,"quotaManagementIndicator":"OFFLINE_CHARGING"}]}`))
			if r.status != 204 || r.charged != 7 {
				t.Fatalf("offline release on an online grant: %d charged %d %s", r.status, r.charged, r.body)
			}
			wantAccount(c, s, 12, 13, 0) // 5 + 20 rated: 12 debited, 13 overage
		})
	}

	t.Run("gy", func(t *testing.T) {
		c := clients(t, e)[0]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gc, err := gy.DialConfig(ctx, gy.Config{Addr: gyAddr, OriginHost: "pgw.e2e.test", OriginRealm: "e2e.test"})
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		// CCR-E reporting 4 delivered messages (20) on 12.
		s := 4
		gyDo(t, gc, &gy.Request{SessionID: gc.NewSessionID(), Type: gy.Event, IMSI: imsiOf(s), Action: gy.DirectDebiting, HasAction: true,
			Services: []gy.Service{{RatingGroup: 30, Used: chf.Units{ServiceSpecific: 4}}}}, wire.ResultSuccess)
		wantAccount(c, supi(s), 12, 8, 0)
		// DIRECT_DEBITING of one message on the empty account: 4012.
		gyDo(t, gc, &gy.Request{SessionID: gc.NewSessionID(), Type: gy.Event, IMSI: imsiOf(s), Action: gy.DirectDebiting, HasAction: true,
			Services: []gy.Service{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}}}, wire.ResultCreditLimitReached)
		wantAccount(c, supi(s), 12, 8, 0)
		// A session reporting beyond its grant and the balance at CCR-T.
		s = 5
		sid := gc.NewSessionID()
		gyDo(t, gc, &gy.Request{SessionID: sid, Type: gy.Initial, IMSI: imsiOf(s), Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultSuccess)
		gyDo(t, gc, &gy.Request{SessionID: sid, Type: gy.Termination, Number: 1, IMSI: imsiOf(s),
			Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{TotalVolume: 30_000_000}}}}, wire.ResultSuccess)
		wantAccount(c, supi(s), 12, 18, 0)
	})
}
