package tariff

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

func TestDefaultFile(t *testing.T) {
	tr := Default()
	f := func(rg uint32, svc chf.Service, units uint64, cost int64) {
		t.Helper()
		r := tr.Rate(rg)
		if r == nil || r.ServiceOf() != svc {
			t.Fatalf("rating group %d: %+v", rg, r)
		}
		if got := r.Cost(units); got != cost {
			t.Fatalf("rating group %d: cost of %d = %d, want %d", rg, units, got, cost)
		}
	}
	f(10, chf.ServiceData, 0, 0)
	f(10, chf.ServiceData, 1, 1)
	f(10, chf.ServiceData, 1_000_000, 1)
	f(10, chf.ServiceData, 1_000_001, 2)
	f(10, chf.ServiceData, 2_500_000, 3)
	f(20, chf.ServiceVoice, 61, 61)
	f(30, chf.ServiceSMS, 2, 10)
	if tr.Rate(11) != nil {
		t.Fatal("rating group 11 rated")
	}
	// Every default rate caps a requested grant.
	for _, c := range []struct {
		rg              uint32
		requested, want uint64
	}{
		{10, 0, 10_000_000}, {10, 1 << 60, 100_000_000}, {10, 100_000_000, 100_000_000}, {10, 5, 5},
		{20, 0, 300}, {20, 1 << 40, 3600}, {20, 3601, 3600},
		{30, 0, 1}, {30, 11, 10}, {30, 10, 10},
	} {
		if got := tr.Rate(c.rg).Grant(c.requested); got != c.want {
			t.Errorf("rating group %d: grant for %d = %d, want %d", c.rg, c.requested, got, c.want)
		}
	}
}

func TestCostRounding(t *testing.T) {
	f := func(n uint64, price int64, unit uint64, want int64) {
		t.Helper()
		if got := chf.Cost(n, price, unit); got != want {
			t.Fatalf("Cost(%d, %d, %d) = %d, want %d", n, price, unit, got, want)
		}
		if want > 0 && want < 1<<62 {
			// Covered is the inverse: the units the cost buys.
			if c := chf.Covered(want, price, unit); c < n || chf.Cost(c, price, unit) > want {
				t.Fatalf("Covered(%d, %d, %d) = %d", want, price, unit, c)
			}
		}
	}
	f(1, 7, 1_000_000, 1)
	f(999_999, 7, 1_000_000, 7)
	f(1_000_000, 7, 1_000_000, 7)
	f(1_000_001, 7, 1_000_000, 8)
	f(3, 0, 1, 0)
	f(1<<63, 1<<62, 1, 1<<63-1) // saturates
	f(^uint64(0), 3, 4, 1<<63-1)
}

func TestParseTariffErrorsNameTheField(t *testing.T) {
	rg := func(extra string) string {
		return "ratingGroups:\n  - ratingGroup: 10\n    service: data\n    price: 1\n    defaultGrant: 100\n" +
			"  - ratingGroup: 20\n    service: voice\n    price: 1\n    defaultGrant: 60\n" + extra
	}
	tests := []struct {
		name, in, want string
	}{
		{"empty", "ratingGroups: []\n", "ratingGroups: at least one"},
		{"unknown field", rg("    cost: 3\n"), "field cost not found"},
		{"duplicate", rg("  - ratingGroup: 10\n    service: sms\n    price: 1\n    defaultGrant: 1\n"), "ratingGroups[2].ratingGroup: duplicate"},
		{"service", rg("  - ratingGroup: 30\n    service: fax\n    price: 1\n    defaultGrant: 1\n"), "ratingGroups[2].service: unknown service"},
		{"missing service", rg("  - ratingGroup: 30\n    price: 1\n    defaultGrant: 1\n"), "ratingGroups[2].service: missing"},
		{"price", rg("  - ratingGroup: 30\n    service: sms\n    price: -1\n    defaultGrant: 1\n"), "ratingGroups[2].price: must not be negative"},
		{"grant", rg("  - ratingGroup: 30\n    service: sms\n    price: 1\n"), "ratingGroups[2].defaultGrant: must be positive"},
		{"max grant", rg("  - ratingGroup: 30\n    service: sms\n    price: 1\n    defaultGrant: 5\n    maxGrant: 2\n"), "ratingGroups[2].maxGrant"},
		{"validity", rg("  - ratingGroup: 30\n    service: sms\n    price: 1\n    defaultGrant: 1\n    validityTime: -5\n"), "ratingGroups[2].validityTime"},
		{"holding", rg("  - ratingGroup: 30\n    service: sms\n    price: 1\n    defaultGrant: 1\n    quotaHoldingTime: 99999999999\n"), "ratingGroups[2].quotaHoldingTime"},
		{"json", `{"ratingGroups":[{"ratingGroup":1,"service":"data","price":"x","defaultGrant":1}]}`, "cannot decode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadTariffJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tariff.json")
	js := `{"ratingGroups":[{"ratingGroup":7,"service":"VOICE","price":3,"defaultGrant":60,"maxGrant":120,"validityTime":90,"quotaHoldingTime":10}]}`
	if err := os.WriteFile(p, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r := tr.Rate(7)
	if r == nil || r.ServiceOf() != chf.ServiceVoice || r.Cost(10) != 30 || r.Grant(0) != 60 || r.Grant(500) != 120 || r.Grant(70) != 70 {
		t.Fatalf("rate %+v", r)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file loaded")
	}
	if tr, err := Load(""); err != nil || tr.Rate(10) == nil {
		t.Fatalf("default: %v", err)
	}
}

func TestTariffTriggersAndFinalUnitAction(t *testing.T) {
	base := "ratingGroups:\n  - {ratingGroup: 10, service: data, price: 1, defaultGrant: 1000, validityTime: 60, quotaHoldingTime: 30"
	bad := map[string]string{
		", quotaThreshold: 1000}":                              "ratingGroups[0].quotaThreshold: 1000 must be below defaultGrant",
		", triggers: [QUOTA_THRESHOLD]}":                       "ratingGroups[0].quotaThreshold: required with trigger QUOTA_THRESHOLD",
		", triggers: [QHT, QHT]}":                              "ratingGroups[0].triggers[1]: QHT named twice",
		", triggers: [RAT_CHANGE]}":                            `ratingGroups[0].triggers[0]: unknown trigger "RAT_CHANGE"`,
		", finalUnitAction: REDIRECT}":                         "ratingGroups[0].redirectServer: REDIRECT needs",
		", finalUnitAction: REDIRECT, redirectServer: top-up}": "ratingGroups[0].redirectServer: REDIRECT needs",
		", finalUnitAction: RESTRICT_ACCESS}":                  "ratingGroups[0].filterId: required with RESTRICT_ACCESS",
		", finalUnitAction: BLOCK}":                            `ratingGroups[0].finalUnitAction: unknown action "BLOCK"`,
		", filterId: x}":                                       "ratingGroups[0].filterId: only with finalUnitAction RESTRICT_ACCESS",
		", redirectServer: 10.0.0.1}":                          "ratingGroups[0].redirectServer: only with finalUnitAction REDIRECT",
		", finalUnitAction: RESTRICT_ACCESS, filterId: f, redirectServer: 10.0.0.1}": "ratingGroups[0].redirectServer: only with",
	}
	for tail, want := range bad {
		_, err := Parse([]byte(base + tail + "\n"))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", tail, err, want)
		}
	}
	for addr, typ := range map[string]chf.RedirectType{"10.0.0.1": chf.RedirectIPv4, "2001:db8::1": chf.RedirectIPv6, "https://top-up.example/x": chf.RedirectURL, "sip:top-up@example.org": chf.RedirectURI} {
		tr, err := Parse([]byte(base + ", quotaThreshold: 200, triggers: [QUOTA_THRESHOLD, VALIDITY_TIME], finalUnitAction: REDIRECT, redirectServer: '" + addr + "'}\n"))
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		g := chf.GrantLine{RatingGroup: 10, Granted: chf.Units{TotalVolume: 1000}, FinalUnit: true}
		tr.Rate(10).Arm(&g)
		if g.Threshold != 200 || g.Triggers != chf.TriggerQuotaThreshold|chf.TriggerValidityTime || g.FinalAction != chf.FinalRedirect || g.RedirectType != typ || g.Redirect != addr {
			t.Fatalf("%s: armed %+v", addr, g)
		}
		// A grant at or below the threshold carries none; a refused line
		// carries no triggers.
		g = chf.GrantLine{RatingGroup: 10, Granted: chf.Units{TotalVolume: 200}}
		tr.Rate(10).Arm(&g)
		if g.Threshold != 0 || g.Triggers == 0 || g.FinalAction != chf.FinalTerminate {
			t.Fatalf("small grant armed %+v", g)
		}
		g = chf.GrantLine{RatingGroup: 10, Result: chf.ResultQuotaLimitReached}
		tr.Rate(10).Arm(&g)
		if g.Triggers != 0 || g.Threshold != 0 {
			t.Fatalf("refused line armed %+v", g)
		}
	}
}

// TestMarshalRoundTrip: a tariff built as a value and marshalled parses
// back to the same rates (the same epoch), so callers change a rate on a
// value instead of patching the YAML text.
func TestMarshalRoundTrip(t *testing.T) {
	def := Default()
	b, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if back.Epoch() != def.Epoch() || len(back.Changed(def)) != 0 {
		t.Fatalf("round trip changed rating groups %v\n%s", back.Changed(def), b)
	}
	rates := slices.Clone(def.RatingGroups)
	rates[1].ValidityTime = 7
	if b, err = (&Tariff{RatingGroups: rates}).Marshal(); err != nil {
		t.Fatal(err)
	}
	if back, err = Parse(b); err != nil {
		t.Fatal(err)
	}
	if ch := back.Changed(def); len(ch) != 1 || ch[0] != rates[1].RatingGroup || back.Rate(rates[1].RatingGroup).ValidityTime != 7 {
		t.Fatalf("changed %v\n%s", ch, b)
	}
}
