package ocp

import (
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

func TestRateAllocations(t *testing.T) {
	p := NewProcessor(nil, nil)
	req := &chf.ChargeRequest{Op: chf.OpUpdate, SUPI: "imsi-001010000000001", Session: "0123456789abcdef", Seq: 2,
		Lines: []chf.UsageLine{{RatingGroup: 10, Used: chf.Units{TotalVolume: 5_000_000}, Request: true}, {RatingGroup: 20, Used: chf.Units{Time: 30}, Request: true}}}
	var ar chf.ApplyRequest
	p.Rate(req, &ar)
	if n := testing.AllocsPerRun(100, func() { p.Rate(req, &ar) }); n != 0 {
		t.Fatalf("Rate allocates %v times per request", n)
	}
	if ar.Lines[0].UsedCost != 5 || ar.Lines[0].GrantUnits != 10_000_000 || ar.Lines[1].UsedCost != 30 || ar.Lines[1].GrantUnits != 300 {
		t.Fatalf("rated %+v", ar.Lines)
	}
}
