package ocp

import (
	"strconv"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/tariff"
)

// rateUsed sets out's used units, n, and their price on r. A price that
// does not fit an int64 marks the line chf.ResultOverflow: the request is
// then refused whole (refuseOverflow), never charged a saturated amount.
func rateUsed(out *chf.RatedLine, r *tariff.Rate, n uint64) {
	c, ok := chf.CheckedCost(n, r.Price, r.UnitSize())
	if !ok {
		out.Result = chf.ResultOverflow
	}
	out.UsedUnits, out.UsedCost = n, c
}

// refuseOverflow answers resp with chf.ResultOverflow, before the ABM is
// asked, when a line of ar could not be rated without overflow (the line
// marked, so the fronts can name it), and reports whether it did. The
// grants need no such check: the ABM shrinks a grant to what the balance
// covers, so its saturating chf.Cost only ever shrinks it.
func refuseOverflow(ar *chf.ApplyRequest, resp *chf.ChargeResponse) bool {
	bad := -1
	for i := range ar.Lines {
		if ar.Lines[i].Result == chf.ResultOverflow {
			bad = i
			break
		}
	}
	if bad < 0 {
		return false
	}
	*resp = chf.ChargeResponse{Result: chf.ResultOverflow, Lines: resp.Lines[:0],
		Detail: "the usage of rating group " + strconv.FormatUint(uint64(ar.Lines[bad].RatingGroup), 10) + " costs more than int64 minor units"}
	for i := range ar.Lines {
		l := &ar.Lines[i]
		resp.Lines = append(resp.Lines, chf.GrantLine{RatingGroup: l.RatingGroup, Result: l.Result})
	}
	return true
}
