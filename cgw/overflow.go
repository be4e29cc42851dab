package cgw

import (
	"net/http"
	"strconv"

	"github.com/chf-testbed/testbed/chf"
)

// overflowProblem answers a chf.ResultOverflow (a sum or product of the
// request's money, units or times would overflow; nothing was changed):
// 400 with invalidParams naming the field. A top-up's field is
// x.resp.Param; for a charging request it is the usedUnitContainer (an
// event without usage: the requestedUnit) of the multipleUnitUsage whose
// line overflowed, x.req.Lines being in the body's order.
func (h *Handler) overflowProblem(x *Exchange, detail string) {
	param := x.resp.Param
	if param == "" {
		for i := range x.resp.Lines {
			if x.resp.Lines[i].Result != chf.ResultOverflow || i >= len(x.req.Lines) {
				continue
			}
			member := "/usedUnitContainer"
			if x.req.Lines[i].Used.IsZero() {
				member = "/requestedUnit"
			}
			param = "/multipleUnitUsage/" + strconv.Itoa(i) + member
			break
		}
	}
	cause := "CHARGING_FAILED"
	if x.req.Op == chf.OpTopUp {
		cause = "" // the operator API: no Nchf cause
	}
	h.problem(x, http.StatusBadRequest, cause, orDefault(detail, "a sum of the request's values overflows"), param, "overflows")
}
