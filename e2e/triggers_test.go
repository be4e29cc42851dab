package e2e

import (
	"encoding/json"
	"testing"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/gy"
	"github.com/chf-testbed/testbed/tariff"
)

// A tariff whose data grants redirect and whose voice grants restrict
// access when they are final, both arming thresholds and triggers.
const fuiTariff = `ratingGroups:
  - ratingGroup: 10
    service: data
    price: 1
    defaultGrant: 10000000
    validityTime: 1800
    quotaHoldingTime: 300
    quotaThreshold: 2000000
    triggers: [QUOTA_THRESHOLD, QUOTA_EXHAUSTED, VALIDITY_TIME]
    finalUnitAction: REDIRECT
    redirectServer: http://top-up.example/
  - ratingGroup: 20
    service: voice
    price: 1
    defaultGrant: 300
    validityTime: 1800
    quotaHoldingTime: 300
    quotaThreshold: 60
    triggers: [QUOTA_THRESHOLD, QHT]
    finalUnitAction: RESTRICT_ACCESS
    filterId: restricted-voice
`

// fullGrant is a MultipleUnitInformation with the trigger fields.
type fullGrant struct {
	ResultCode           string
	RatingGroup          uint32
	GrantedUnit          map[string]uint64
	VolumeQuotaThreshold uint64
	TimeQuotaThreshold   uint64
	Triggers             []struct{ TriggerType, TriggerCategory string }
	FUI                  *struct {
		FinalUnitAction string
		FilterID        string `json:"filterId"`
		RedirectServer  *struct{ RedirectAddressType, RedirectServerAddress string }
	} `json:"finalUnitIndication"`
}

func fullGrants(t *testing.T, r reply) map[uint32]fullGrant {
	t.Helper()
	var cdr struct {
		MUI []fullGrant `json:"multipleUnitInformation"`
	}
	if err := json.Unmarshal(r.body, &cdr); err != nil {
		t.Fatalf("cannot decode ChargingDataResponse %s: %v", r.body, err)
	}
	m := map[uint32]fullGrant{}
	for _, g := range cdr.MUI {
		m[g.RatingGroup] = g
	}
	return m
}

func loadFUITariff(t *testing.T) *tariff.Tariff {
	t.Helper()
	tf, err := tariff.Parse([]byte(fuiTariff))
	if err != nil {
		t.Fatal(err)
	}
	return tf
}

// TestNchfTriggersAndFinalUnitActions: grants carry the tariff's
// thresholds and triggers; a final grant carries REDIRECT with the
// redirect server or RESTRICT_ACCESS with the filter; a usage report
// naming FINAL is rated and gets no new grant. Every exchange is validated
// against the OpenAPI spec.
func TestNchfTriggersAndFinalUnitActions(t *testing.T) {
	e := startCHFTariff(t, loadFUITariff(t))
	for i, c := range clients(t, e) {
		t.Run(c.name, func(t *testing.T) {
			c.t = t
			s := supi(2 + i)
			ref, r := c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}},{"ratingGroup":20,"requestedUnit":{}}`))
			g := fullGrants(t, r)
			d, v := g[10], g[20]
			if d.VolumeQuotaThreshold != 2_000_000 || len(d.Triggers) != 3 || d.Triggers[0].TriggerType != "QUOTA_THRESHOLD" ||
				d.Triggers[0].TriggerCategory != "IMMEDIATE_REPORT" || d.FUI != nil {
				t.Fatalf("data grant %s", r.body)
			}
			if v.TimeQuotaThreshold != 60 || len(v.Triggers) != 2 || v.Triggers[1].TriggerType != "QHT" || v.FUI != nil {
				t.Fatalf("voice grant %s", r.body)
			}
			// The threshold is reached: report it; the report names the
			// trigger; a new grant comes back.
			r = c.do("POST", ref+"/update", req("", 1, `{"ratingGroup":10,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":8000000,"triggers":[{"triggerType":"QUOTA_THRESHOLD","triggerCategory":"IMMEDIATE_REPORT"}]}]}`))
			if r.status != 200 || r.charged != 8 || fullGrants(t, r)[10].GrantedUnit["totalVolume"] != 10_000_000 {
				t.Fatalf("threshold update: %d %s", r.status, r.body)
			}
			// FINAL: charged, no grant even though one is asked for.
			r = c.do("POST", ref+"/update", req("", 2, `{"ratingGroup":20,"requestedUnit":{},"usedUnitContainer":[{"localSequenceNumber":1,"time":100,"triggers":[{"triggerType":"FINAL","triggerCategory":"IMMEDIATE_REPORT"}]}]}`))
			if vg := fullGrants(t, r)[20]; r.status != 200 || r.charged != 100 || len(vg.GrantedUnit) != 0 && vg.GrantedUnit["time"] != 0 {
				t.Fatalf("FINAL update: %d %s", r.status, r.body)
			}
			if r := c.do("POST", ref+"/release", req("", 3, "")); r.status != 204 {
				t.Fatalf("release: %d %s", r.status, r.body)
			}
			if b := c.balance(s); b.Reserved != 0 || b.Debited != 108 {
				t.Fatalf("balance after session %+v", b)
			}

			// A small balance: final grants with the tariff's actions.
			s = supi(12 + i)
			setBalance(t, e, s, 15)
			_, r = c.create(req(s, 0, `{"ratingGroup":10,"requestedUnit":{}}`))
			dg := fullGrants(t, r)[10]
			if dg.FUI == nil || dg.FUI.FinalUnitAction != "REDIRECT" || dg.FUI.RedirectServer == nil ||
				dg.FUI.RedirectServer.RedirectAddressType != "URL" || dg.FUI.RedirectServer.RedirectServerAddress != "http://top-up.example/" {
				t.Fatalf("final data grant %s", r.body)
			}
			_, r = c.create(req(s, 0, `{"ratingGroup":20,"requestedUnit":{}}`))
			vg := fullGrants(t, r)[20]
			if vg.GrantedUnit["time"] != 5 || vg.FUI == nil || vg.FUI.FinalUnitAction != "RESTRICT_ACCESS" || vg.FUI.FilterID != "restricted-voice" ||
				vg.TimeQuotaThreshold != 0 {
				t.Fatalf("final voice grant %s", r.body)
			}
		})
	}
}

// TestGyTriggersAndFinalUnitActions is the same on Gy: thresholds as
// Volume-/Time-Quota-Threshold, FUI with Redirect-Server or Filter-Id, and
// Reporting-Reason FINAL honoured.
func TestGyTriggersAndFinalUnitActions(t *testing.T) {
	e := startCHFTariff(t, loadFUITariff(t))
	c := startGy(t, e)
	cl := clients(t, e)[1]
	sid := c.NewSessionID()
	imsi := imsiOf(4)
	a := gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestInitial, IMSI: imsi, Services: []gy.Service{
		{RatingGroup: 10, Request: true}, {RatingGroup: 20, Request: true}}}, wire.ResultSuccess)
	if len(a.Grants) != 2 || a.Grants[0].Threshold != 2_000_000 || a.Grants[1].Threshold != 60 || a.Grants[0].FinalUnit {
		t.Fatalf("CCA-I grants %+v", a.Grants)
	}
	a = gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestUpdate, Number: 1, IMSI: imsi, Services: []gy.Service{
		{RatingGroup: 10, Request: true, Used: chf.Units{TotalVolume: 8_000_000}, Reason: wire.ReasonThreshold, HasReason: true},
		{RatingGroup: 20, Request: true, Used: chf.Units{Time: 100}, Reason: wire.ReasonFinal, HasReason: true}}}, wire.ResultSuccess)
	if len(a.Grants) != 2 || a.Grants[0].Granted.TotalVolume != 10_000_000 || !a.Grants[1].Granted.IsZero() || a.Charged != 108 {
		t.Fatalf("CCA-U %+v", a)
	}
	gyDo(t, c, &gy.Request{SessionID: sid, Type: wire.RequestTermination, Number: 2, IMSI: imsi}, wire.ResultSuccess)
	if b := cl.balance(supi(4)); b.Reserved != 0 || b.Debited != 108 {
		t.Fatalf("balance %+v", b)
	}

	setBalance(t, e, supi(14), 15)
	imsi = imsiOf(14)
	a = gyDo(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: wire.RequestInitial, IMSI: imsi, Services: []gy.Service{{RatingGroup: 10, Request: true}}}, wire.ResultSuccess)
	if g := a.Grants[0]; !g.FinalUnit || g.FinalUnitAction != wire.FinalUnitRedirect || g.RedirectAddressType != 2 || g.RedirectServer != "http://top-up.example/" {
		t.Fatalf("final data grant %+v", g)
	}
	a = gyDo(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: wire.RequestInitial, IMSI: imsi, Services: []gy.Service{{RatingGroup: 20, Request: true}}}, wire.ResultSuccess)
	if g := a.Grants[0]; !g.FinalUnit || g.FinalUnitAction != wire.FinalUnitRestrictAccess || g.FilterID != "restricted-voice" || g.Granted.Time != 5 || g.Threshold != 0 {
		t.Fatalf("final voice grant %+v", g)
	}
}
