package diameter

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/aslite/aslitetest"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
	"github.com/chf-testbed/testbed/loadgen/gy/gytest"
	"github.com/chf-testbed/testbed/ocp"
)

// realCore is the charging core as `chf local` runs it in process:
// ocp.Processor (default tariff) over abm.Service over aslite.
func realCore(t testing.TB, accounts int, balance int64) chf.Charger {
	t.Helper()
	cl := aslitetest.Start(t)
	if _, err := provision.Run(context.Background(), cl, provision.Config{First: supi1, Count: accounts, Balance: balance, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
	return ocp.NewProcessor(nil, abm.New(cl, abm.Config{}))
}

// balanceOf reads an account through the core.
func balanceOf(t testing.TB, core chf.Charger, supi string) (balance, reserved int64) {
	t.Helper()
	var resp chf.ChargeResponse
	if err := core.Charge(context.Background(), &chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Result != chf.ResultSuccess {
		t.Fatalf("balance of %s: result %d %s", supi, resp.Result, resp.Detail)
	}
	return resp.Balance, resp.Reserved
}

func imsi(i int) string { return "00101000000000" + strconv.Itoa(i) }

// TestRealCore runs Gy sessions through the real OCP + ABM + aslite and
// checks the balances and every result code the core produces.
func TestRealCore(t *testing.T) {
	core := realCore(t, 5, 1000)
	s := startServer(t, Config{}, core)
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	var charged int64

	t.Run("data session with retransmission", func(t *testing.T) {
		sid := c.NewSessionID()
		a := do(t, c, &gy.Request{SessionID: sid, Type: gy.Initial, IMSI: imsi(1), Services: []gy.Service{{RatingGroup: 10, Request: true}}})
		expectResult(t, a, 2001)
		if g := a.Grants[0]; g.Granted.TotalVolume != 10_000_000 || g.ResultCode != 2001 || g.ValidityTime != 1800 {
			t.Fatalf("grant %+v", g)
		}
		if b, r := balanceOf(t, core, "imsi-"+imsi(1)); b != 1000 || r != 10 {
			t.Fatalf("after I: balance %d reserved %d", b, r)
		}
		u := &gy.Request{SessionID: sid, Type: gy.Update, Number: 1, IMSI: imsi(1), Services: []gy.Service{
			{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 5_000_000}, Used: chf.Units{UplinkVolume: 1_500_000, DownlinkVolume: 2_000_000}}}}
		a = do(t, c, u)
		expectResult(t, a, 2001)
		charged += a.Charged
		u.Retransmit, u.EndToEnd = true, a.EndToEnd
		again := do(t, c, u)
		expectResult(t, again, 2001)
		// The same answer again, its Cost-Information included: the
		// balance below shows it was charged once.
		if a.Charged != 4 || again.Charged != 4 || again.Grants[0].Granted != a.Grants[0].Granted {
			t.Fatalf("U charged %d, retransmission charged %d (%+v vs %+v)", a.Charged, again.Charged, a.Grants, again.Grants)
		}
		a = do(t, c, &gy.Request{SessionID: sid, Type: gy.Termination, Number: 2, IMSI: imsi(1),
			Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{TotalVolume: 2_000_000}}}})
		expectResult(t, a, 2001)
		charged += a.Charged
		if b, r := balanceOf(t, core, "imsi-"+imsi(1)); b != 994 || r != 0 || charged != 6 {
			t.Fatalf("after T: balance %d reserved %d charged %d", b, r, charged)
		}
		a = do(t, c, &gy.Request{SessionID: sid, Type: gy.Update, Number: 3, IMSI: imsi(1), Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{TotalVolume: 1}}}})
		if a.ResultCode != 5002 && a.ResultCode != 5004 {
			t.Fatalf("update after release: %d", a.ResultCode)
		}
	})

	t.Run("voice session", func(t *testing.T) {
		sid := c.NewSessionID()
		a := do(t, c, &gy.Request{SessionID: sid, Type: gy.Initial, IMSI: imsi(2), ServiceContextID: "32260@3gpp.org",
			Services: []gy.Service{{RatingGroup: 20, Request: true, Requested: chf.Units{Time: 60}}}})
		expectResult(t, a, 2001)
		if a.Grants[0].Granted.Time != 60 {
			t.Fatalf("grant %+v", a.Grants[0])
		}
		a = do(t, c, &gy.Request{SessionID: sid, Type: gy.Termination, Number: 1, IMSI: imsi(2),
			Services: []gy.Service{{RatingGroup: 20, Used: chf.Units{Time: 45}}}})
		expectResult(t, a, 2001)
		if b, r := balanceOf(t, core, "imsi-"+imsi(2)); b != 955 || r != 0 || a.Charged != 45 {
			t.Fatalf("balance %d reserved %d charged %d", b, r, a.Charged)
		}
	})

	t.Run("sms events and balance check", func(t *testing.T) {
		a := do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi(3), Action: gy.DirectDebiting, HasAction: true,
			ServiceContextID: "32274@3gpp.org", Services: []gy.Service{{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}}})
		expectResult(t, a, 2001)
		if a.Charged != 5 || a.CurrencyCode != 978 {
			t.Fatalf("sms %+v", a)
		}
		a = do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi(3), Action: gy.CheckBalance, HasAction: true})
		expectResult(t, a, 2001)
		if !a.HasCheckBalance || a.CheckBalanceResult != gy.EnoughCredit {
			t.Fatalf("check balance %+v", a)
		}
		if b, _ := balanceOf(t, core, "imsi-"+imsi(3)); b != 995 {
			t.Fatalf("balance %d", b)
		}
	})

	t.Run("credit limit and no credit", func(t *testing.T) {
		// Drain account 4 with one event reporting 200 delivered messages
		// (PEC; an immediate event is capped at the tariff's maxGrant)...
		// then nothing is left.
		a := do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi(4), Action: gy.DirectDebiting, HasAction: true,
			Services: []gy.Service{{RatingGroup: 30, Used: chf.Units{ServiceSpecific: 200}}}})
		expectResult(t, a, 2001)
		a = do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: imsi(4), Services: []gy.Service{{RatingGroup: 10, Request: true}}})
		expectResult(t, a, 4012)
		a = do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi(4), Action: gy.DirectDebiting, HasAction: true,
			Services: []gy.Service{{RatingGroup: 30, Request: true}}})
		expectResult(t, a, 4012)
		a = do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi(4), Action: gy.CheckBalance, HasAction: true})
		if a.CheckBalanceResult != gy.NoCredit {
			t.Fatalf("check balance %+v", a)
		}
	})

	t.Run("partial grant with final unit", func(t *testing.T) {
		a := do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: imsi(5),
			Services: []gy.Service{{RatingGroup: 20, Request: true, Requested: chf.Units{Time: 1500}}}})
		expectResult(t, a, 2001)
		if g := a.Grants[0]; g.Granted.Time != 1000 || !g.FinalUnit {
			t.Fatalf("grant %+v, want 1000 s with FUI", g)
		}
	})

	for _, tc := range []struct {
		name     string
		req      gy.Request
		want     uint32
		wantMSCC uint32
	}{
		{"user unknown", gy.Request{Type: gy.Initial, IMSI: "001019999999999", Services: []gy.Service{{RatingGroup: 10, Request: true}}}, 5030, 0},
		{"rating failed", gy.Request{Type: gy.Initial, IMSI: imsi(1), Services: []gy.Service{{RatingGroup: 99, Request: true}}}, 2001, 5031},
		{"unknown session", gy.Request{Type: gy.Update, Number: 1, IMSI: imsi(1), Services: []gy.Service{{RatingGroup: 10}}}, 5002, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.SessionID = c.NewSessionID()
			a := do(t, c, &tc.req)
			expectResult(t, a, tc.want)
			if tc.wantMSCC != 0 && (len(a.Grants) != 1 || a.Grants[0].ResultCode != tc.wantMSCC) {
				t.Fatalf("MSCC %+v, want Result-Code %d", a.Grants, tc.wantMSCC)
			}
		})
	}
}

// BenchmarkRoundTripRealCore is a Gy CCR-U/CCA over loopback through the
// server and the real core (ocp.Processor, abm.Service, aslite in
// process): what one Gy update costs end to end on this machine.
func BenchmarkRoundTripRealCore(b *testing.B) {
	const accounts = 256
	core := realCore(b, accounts, 1_000_000_000)
	s := startServer(b, Config{}, core)
	p, err := gytest.DialPool(context.Background(), gy.Config{Addr: s.Addr(), OriginHost: "pgw%d.loadgen.test", OriginRealm: "loadgen.test"}, 2)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1))
		c := p.Conn(i)
		ctx := context.Background()
		req := gy.Request{SessionID: c.NewSessionID(), Type: gy.Initial, IMSI: fmt.Sprintf("0010100000%05d", 1+i%accounts),
			Services: []gy.Service{{RatingGroup: 10, Request: true}}}
		var a gy.Answer
		if err := c.Do(ctx, &req, &a); err != nil || a.ResultCode != 2001 {
			b.Errorf("create: %v %d", err, a.ResultCode)
			return
		}
		req.Type = gy.Update
		req.Services[0].Used = chf.Units{TotalVolume: 1_000_000}
		for pb.Next() {
			req.Number++
			if err := c.Do(ctx, &req, &a); err != nil || a.ResultCode != 2001 {
				b.Errorf("update: %v %d", err, a.ResultCode)
				return
			}
		}
	})
}
