package gy

import (
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/loadgen/driver"
	gyc "github.com/chf-testbed/testbed/loadgen/gy"
)

// A CCA maps onto the outcome the engine expects: the class, and the
// typed facts the engine acts on (Shed, Gone, Barred) without reading
// the class.
func TestClassifyOutcome(t *testing.T) {
	for _, c := range []struct {
		name               string
		ans                gyc.Answer
		class              string
		resolved           bool
		shed, gone, barred bool
	}{
		{"success", gyc.Answer{ResultCode: wire.ResultSuccess}, "", true, false, false, false},
		{"too busy", gyc.Answer{ResultCode: wire.ResultTooBusy}, "gy_3004", false, true, false, false},
		{"unknown session", gyc.Answer{ResultCode: wire.ResultUnknownSessionID}, "gy_5002", true, false, true, false},
		{"barred", gyc.Answer{ResultCode: wire.ResultEndUserServiceDenied}, "gy_4010", true, false, false, true},
		{"barred MSCC", gyc.Answer{ResultCode: wire.ResultSuccess, Grants: []gyc.Grant{{RatingGroup: 10, ResultCode: wire.ResultEndUserServiceDenied}}}, "rg_4010", true, false, false, true},
		{"other MSCC", gyc.Answer{ResultCode: wire.ResultSuccess, Grants: []gyc.Grant{{RatingGroup: 10, ResultCode: 4012}}}, "rg_4012", true, false, false, false},
	} {
		e := exchange{ans: c.ans}
		var o driver.Outcome
		e.classify(driver.ChargeUpdate, &o)
		if o.Class != c.class || o.Resolved != c.resolved || o.Shed != c.shed || o.Gone != c.gone || o.Barred != c.barred || o.RatingGroupRefused != strings.HasPrefix(c.class, "rg_") {
			t.Errorf("%s: outcome %+v", c.name, o)
		}
	}
}
