package audit

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/ocp"
)

func TestTariffRate(t *testing.T) {
	tr, err := LoadTariff("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    driver.Charge
		want int64
	}{
		{driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 10, Used: chf.Units{TotalVolume: 1}}, 1},
		{driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 10, Used: chf.Units{TotalVolume: 3_000_000}}, 3},
		{driver.Charge{Op: driver.ChargeRelease, RatingGroup: 10, Used: chf.Units{UplinkVolume: 4_000_000, DownlinkVolume: 5_000_001}}, 10},
		{driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 20, Used: chf.Units{Time: 61}}, 61},
		{driver.Charge{Op: driver.ChargeCreate, RatingGroup: 10, Request: true}, 0},
		{driver.Charge{Op: driver.ChargeEvent, RatingGroup: 30, Request: true}, 5},
		{driver.Charge{Op: driver.ChargeEvent, RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 3}}, 15},
		{driver.Charge{Op: driver.ChargeEvent, RatingGroup: 30, Used: chf.Units{ServiceSpecific: 2}}, 10},
		{driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 99, Used: chf.Units{TotalVolume: 1}}, 0},
		{driver.Charge{Op: driver.ChargeBalance}, 0},
		{driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 10, Used: chf.Units{TotalVolume: 1 << 63}}, 9_223_372_036_855},
	} {
		if got := tr.Rate(&tc.c); got != tc.want {
			t.Errorf("Rate(%+v) = %d, want %d", tc.c, got, tc.want)
		}
	}
	c := driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 10, Used: chf.Units{TotalVolume: 5}}
	if n := testing.AllocsPerRun(100, func() { tr.Rate(&c) }); n != 0 {
		t.Fatalf("Rate allocates %v times", n)
	}
}

func TestLoadTariffFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tariff.yaml")
	if err := os.WriteFile(p, []byte(`{"ratingGroups":[{"ratingGroup":7,"service":"data","price":3,"defaultGrant":1000000}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := LoadTariff(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Rate(&driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 7, Used: chf.Units{TotalVolume: 1_500_000}}); got != 5 {
		t.Fatalf("1.5 MB at 3 per MB = %d, want ceil(4.5) = 5", got)
	}
	for body, field := range map[string]string{
		`ratingGroups: [{ratingGroup: 1, service: fax, price: 1, defaultGrant: 1}]`:              "ratingGroups[0].service",
		`ratingGroups: [{ratingGroup: 1, service: sms, price: -1, defaultGrant: 1}]`:             "ratingGroups[0].price",
		`ratingGroups: [{ratingGroup: 1, service: sms, price: 1, defaultGrant: 1, colour: red}]`: "colour",
		`ratingGroups: []`: "ratingGroups",
	} {
		if _, err := ParseTariff([]byte(body)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err %v, want one naming %s", body, err, field)
		}
	}
}

// TestDefaultTariffMirrorsOCP differentially checks the audit's rating of
// the built-in tariff against the OCP's own (the only place the audit
// meets the OCP's code: a test).
func TestDefaultTariffMirrorsOCP(t *testing.T) {
	tr, err := LoadTariff("")
	if err != nil {
		t.Fatal(err)
	}
	p := ocp.NewProcessor(nil, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	ops := []struct {
		d driver.ChargeOp
		c chf.Op
	}{{driver.ChargeUpdate, chf.OpUpdate}, {driver.ChargeRelease, chf.OpRelease}, {driver.ChargeEvent, chf.OpEvent}}
	for range 2000 {
		op := ops[rng.IntN(len(ops))]
		rg := []uint32{10, 20, 30, 40}[rng.IntN(4)]
		var u chf.Units
		switch rng.IntN(4) {
		case 0:
			u.TotalVolume = rng.Uint64N(50_000_000)
		case 1:
			u.UplinkVolume, u.DownlinkVolume = rng.Uint64N(20_000_000), rng.Uint64N(20_000_000)
		case 2:
			u.Time = uint32(rng.IntN(4000))
		case 3:
			u.ServiceSpecific = rng.Uint64N(4)
		}
		var ar chf.ApplyRequest
		// The CHF's fronts fill TotalVolume per container (chf.Units.Add).
		cu := u
		if cu.TotalVolume == 0 {
			cu.TotalVolume = u.UplinkVolume + u.DownlinkVolume
		}
		p.Rate(&chf.ChargeRequest{Op: op.c, SUPI: "imsi-1", Session: "s", Lines: []chf.UsageLine{{RatingGroup: rg, Used: cu, Request: true}}}, &ar)
		got := tr.Rate(&driver.Charge{Op: op.d, RatingGroup: rg, Used: u, Request: true})
		if want := ar.Lines[0].UsedCost; got != want {
			t.Fatalf("%+v on RG %d op %d: audit %d, OCP %d", u, rg, op.d, got, want)
		}
	}
}

func TestCheckIndependent(t *testing.T) {
	first, _ := scenario.ParseSUPI("imsi-001010000000001")
	snap := func(over int64, bal ...int64) *Snapshot {
		s := &Snapshot{}
		for i, b := range bal {
			s.Index = append(s.Index, int32(i))
			s.Accounts = append(s.Accounts, Account{Balance: b, Overage: over, Found: true})
		}
		return s
	}
	l := engine.NewLedger(2)
	l.Touch(0)
	l.Add(0, 30)
	exp := expectation{0: 30}
	ok := Check(Input{First: first, Initial: snap(0, 100, 100), Final: snap(0, 70, 100), Ledger: l, Expected: exp})
	if !ok.OK || !ok.Independent || ok.Expected != 30 || ok.ExpectedMismatches != 0 {
		t.Fatalf("consistent run judged %+v", ok)
	}
	// A CHF that overcharges and reports it: the reported check passes,
	// the independent one does not.
	exp[0] = 25
	bad := Check(Input{First: first, Initial: snap(0, 100, 100), Final: snap(0, 70, 100), Ledger: l, Expected: exp})
	if bad.OK || bad.Mismatches != 0 || bad.ExpectedMismatches != 1 || !strings.Contains(bad.Reason, "1 with the tariff") {
		t.Fatalf("overcharging judged %+v", bad)
	}
	// Usage beyond the balance: debit + overage is the expectation.
	exp[0] = 130
	fin := snap(0, 70, 100)
	fin.Accounts[0].Overage = 100
	over := Check(Input{First: first, Initial: snap(0, 100, 100), Final: fin, Ledger: l, Expected: exp})
	if !over.OK || over.Overage != 100 {
		t.Fatalf("overage judged %+v", over)
	}
}

type expectation map[int32]int64

func (e expectation) Expected(i int32) int64 { return e[i] }
