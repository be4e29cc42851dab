package e2e

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/cgw"
	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// Checked arithmetic through the real services: a sum or product of money,
// units or times from a request that would overflow is refused naming the
// field (Nchf and the operator API: 400 with invalidParams; Gy: 5004 with
// the AVP as Failed-AVP), and the account is left as it was.

// problemParam posts body to path and returns the status and the param of
// the answer's first invalidParams entry.
func (c *client) problemParam(path, token string, body []byte) (int, string) {
	c.t.Helper()
	status, b := c.postJSON(path, token, body)
	var p struct {
		InvalidParams []struct{ Param string }
	}
	if status != 400 {
		return status, string(b)
	}
	if err := json.Unmarshal(b, &p); err != nil || len(p.InvalidParams) != 1 {
		c.t.Fatalf("400 answer %s: want ProblemDetails with one invalidParams entry (%v)", b, err)
	}
	return status, p.InvalidParams[0].Param
}

// sameAccount fails unless the account's money and buckets are as before.
func sameAccount(t *testing.T, what string, before, after bal) {
	t.Helper()
	if before.Balance != after.Balance || before.Reserved != after.Reserved || before.Debited != after.Debited ||
		before.Overage != after.Overage || before.Credited != after.Credited || len(before.Buckets) != len(after.Buckets) {
		t.Fatalf("%s changed the account: %+v, was %+v", what, after, before)
	}
}

func TestTopUpOverflowRefused(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			topUp := func(s, body string) (int, string) {
				return c.problemParam(cgw.AccountsBase+s+cgw.TopUpSuffix, operatorToken, []byte(body))
			}
			for _, tc := range []struct {
				name string
				plan provision.Config
				body string
				want string // the param named
			}{
				{"balance wraps", provision.Config{Balance: math.MaxInt64 - 10}, `{"amount":11}`, "/amount"},
				{"balance + credit limit wraps", provision.Config{Balance: 10, CreditLimit: 1000}, `{"amount":` + strconv.FormatInt(math.MaxInt64-1005, 10) + `}`, "/amount"},
				{"validity wraps", provision.Config{Balance: 100}, `{"bucket":{"service":"data","units":5,"validity":` + strconv.FormatInt(math.MaxInt64, 10) + `}}`, "/bucket/validity"},
				{"validity wraps with money", provision.Config{Balance: 100}, `{"amount":5,"bucket":{"service":"voice","units":5,"validity":` + strconv.FormatInt(math.MaxInt64-1000, 10) + `}}`, "/bucket/validity"},
				{"bucket units wrap", provision.Config{Balance: 100, Buckets: []chf.Bucket{{Service: chf.ServiceData, Units: 1 << 63}}}, `{"bucket":{"service":"data","units":` + strconv.FormatUint(1<<63, 10) + `}}`, "/bucket/units"},
			} {
				s := supi(3 + i)
				provisionAccounts(t, e, s, tc.plan)
				before := c.balance(s)
				if st, p := topUp(s, tc.body); st != 400 || p != tc.want {
					t.Fatalf("%s: top-up %s answered %d %s, want 400 naming %s", tc.name, tc.body, st, p, tc.want)
				}
				sameAccount(t, tc.name, before, c.balance(s))
			}
			// What fits is credited: up to the last minor unit, and a
			// validity that ends before int64 Unix seconds do.
			s := supi(3 + i)
			provisionAccounts(t, e, s, provision.Config{Balance: math.MaxInt64 - 10})
			if st, b := c.topUp(s, operatorToken, `{"amount":10}`); st != 200 || b.Balance != math.MaxInt64 || b.Credited != 10 {
				t.Fatalf("top-up to the limit: %d %+v", st, b)
			}
			v := math.MaxInt64 - e.clock.now().Unix() - 3600
			if st, b := c.topUp(s, operatorToken, `{"bucket":{"service":"sms","units":3,"validity":`+strconv.FormatInt(v, 10)+`}}`); st != 200 || len(b.Buckets) != 1 || b.Buckets[0].Units != 3 {
				t.Fatalf("top-up of a bucket valid until the end of time: %d %+v", st, b)
			}
		})
	}
}

func TestProvisionOverflowRefused(t *testing.T) {
	e := startCHF(t)
	for _, cfg := range []provision.Config{
		{Balance: math.MaxInt64, CreditLimit: 1},
		{Balance: 1, Buckets: []chf.Bucket{{Service: chf.ServiceData, Units: 1, Expires: math.MaxInt64}}},
		{Balance: 1, Buckets: []chf.Bucket{{Service: chf.ServiceSMS, Units: 1 << 63}, {Service: chf.ServiceSMS, Units: 1 << 63}}},
	} {
		cfg.First, cfg.Count, cfg.Overwrite, cfg.Now = supi(5), 1, true, e.clock.now
		if _, err := provision.Run(t.Context(), e.as, cfg, nil); err == nil {
			t.Errorf("Provision(%+v) succeeded, want an overflow error", cfg)
		}
	}
}

func TestNchfUsageOverflowRefused(t *testing.T) {
	e := startCHF(t)
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(7 + i)
			ref, r := c.create(req(s, 0, `{"ratingGroup":30,"requestedUnit":{}},{"ratingGroup":10,"requestedUnit":{}}`))
			if r.status != 201 {
				t.Fatalf("create %d %s", r.status, r.body)
			}
			before := c.balance(s)
			// 2^63 messages at 5 minor units each: the price overflows.
			huge := strconv.FormatUint(1<<63, 10)
			st, p := c.problemParam(ref+"/update", "", req("", 1,
				`{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":1000000}]},`+
					`{"ratingGroup":30,"usedUnitContainer":[{"localSequenceNumber":1,"serviceSpecificUnits":`+huge+`}]}`))
			if st != 400 || p != "/multipleUnitUsage/1/usedUnitContainer" {
				t.Fatalf("update with an overflowing price: %d %s", st, p)
			}
			sameAccount(t, "the refused update", before, c.balance(s))
			// The same number with sane usage is then charged once.
			r = c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":1000000}]}`))
			if r.status != 200 || r.charged != 1 {
				t.Fatalf("update after the refusal: %d charged %d %s", r.status, r.charged, r.body)
			}
			// An event reporting usage (after delivery) likewise.
			before = c.balance(s)
			st, p = c.problemParam(cgw.NchfBase, "", req(s, 0,
				`{"ratingGroup":30,"usedUnitContainer":[{"localSequenceNumber":1,"serviceSpecificUnits":`+huge+`}]}`, `"oneTimeEvent":true`, `"oneTimeEventType":"PEC"`))
			if st != 400 || p != "/multipleUnitUsage/0/usedUnitContainer" {
				t.Fatalf("event with an overflowing price: %d %s", st, p)
			}
			sameAccount(t, "the refused event", before, c.balance(s))
		})
	}
}

func TestGyRepeatedUnitAVPsOverflowRefused(t *testing.T) {
	e := startCHF(t)
	c := startGy(t, e)
	cl := clients(t, e)[1]
	s := supi(9)
	sid := c.NewSessionID()
	gyDo(t, c, &gy.Request{SessionID: sid, Type: gy.Initial, IMSI: imsiOf(9),
		Services: []gy.Service{{RatingGroup: 10, Request: true}, {RatingGroup: 30, Request: true}}}, wire.ResultSuccess)
	before := cl.balance(s)
	huge := uint64(1<<64 - 1_000_000)
	for n, tc := range []struct {
		name   string
		svc    gy.Service
		failed uint32
	}{
		{"two CC-Total-Octets", gy.Service{RatingGroup: 10, Used: chf.Units{TotalVolume: huge},
			UsedAVPs: wire.AppendUint64(nil, wire.CodeCCTotalOctets, wire.AVPMandatory, 0, 2_000_000)}, wire.CodeCCTotalOctets},
		{"two CC-Input-Octets", gy.Service{RatingGroup: 10, Used: chf.Units{UplinkVolume: huge},
			UsedAVPs: wire.AppendUint64(nil, wire.CodeCCInputOctets, wire.AVPMandatory, 0, huge)}, wire.CodeCCInputOctets},
		{"CC-Input + CC-Output", gy.Service{RatingGroup: 10, Used: chf.Units{UplinkVolume: huge, DownlinkVolume: huge}}, wire.CodeUsedServiceUnit},
		{"two CC-Time", gy.Service{RatingGroup: 10, Used: chf.Units{Time: math.MaxUint32},
			UsedAVPs: wire.AppendUint32(nil, wire.CodeCCTime, wire.AVPMandatory, 0, 1)}, wire.CodeCCTime},
		{"price of the units", gy.Service{RatingGroup: 30, Used: chf.Units{ServiceSpecific: 1 << 63}}, wire.CodeUsedServiceUnit},
	} {
		a := gyDo(t, c, &gy.Request{SessionID: sid, Type: gy.Update, Number: uint32(n + 1), IMSI: imsiOf(9),
			Services: []gy.Service{tc.svc}}, wire.ResultInvalidAVPValue)
		if a.FailedAVP != tc.failed {
			t.Fatalf("%s: Failed-AVP %d, want %d", tc.name, a.FailedAVP, tc.failed)
		}
		sameAccount(t, tc.name, before, cl.balance(s))
	}
	// The session still charges what fits.
	a := gyDo(t, c, &gy.Request{SessionID: sid, Type: gy.Termination, Number: 10, IMSI: imsiOf(9),
		Services: []gy.Service{{RatingGroup: 10, Used: chf.Units{TotalVolume: 2_000_000}}}}, wire.ResultSuccess)
	if b := cl.balance(s); a.Charged != 2 || b.Balance != before.Balance-2 || b.Reserved != 0 {
		t.Fatalf("CCR-T charged %d, balance %+v (was %+v)", a.Charged, b, before)
	}
}
