package nchf

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

func TestUnknownProto(t *testing.T) {
	if _, err := New(driver.Config{Proto: "h3", Targets: []string{"127.0.0.1:1"}}); !errors.Is(err, driver.ErrProto) {
		t.Fatalf("err %v", err)
	}
}

// Building a request and classifying its answer allocate nothing once the
// buffers have grown: the driver's per-request path.
func TestRequestPathAllocs(t *testing.T) {
	for _, token := range []string{"", "operator-token-0123456789"} {
		requestPathAllocs(t, token)
	}
}

func requestPathAllocs(t *testing.T, token string) {
	t.Helper()
	d, err := New(driver.Config{Targets: []string{"127.0.0.1:1"}, NFName: "nf", OperatorToken: token})
	if err != nil {
		t.Fatal(err)
	}
	ref := []byte("imsi-001010000000006.0123456789abcdef")
	location := []byte("http://cgw/nchf-convergedcharging/v3/chargingdata/imsi-001010000000006.0123456789abcdef")
	body := []byte(`{"multipleUnitInformation":[{"resultCode":"SUCCESS","ratingGroup":10}]}`)
	var m message
	var o driver.Outcome
	for _, c := range []struct {
		op     driver.ChargeOp
		status int
	}{
		{driver.ChargeCreate, 201}, {driver.ChargeUpdate, 200}, {driver.ChargeRelease, 204},
		{driver.ChargeEvent, 201}, {driver.ChargeBalance, 200},
	} {
		ch := driver.Charge{Op: c.op, SUPI: []byte("imsi-001010000000006"), Session: ref, Seq: 2, RatingGroup: 10,
			Request: true, Requested: chf.Units{TotalVolume: 10 << 20}, Used: chf.Units{TotalVolume: 5 << 20}, Invoked: time.Now()}
		one := func() {
			d.build(&m, &ch)
			m.status = c.status
			m.location = append(m.location[:0], location...)
			m.rbody = append(m.rbody[:0], body...)
			classify(c.op, &m, &o)
			if o.Class != "" || !o.Resolved {
				t.Fatalf("op %d: outcome %+v", c.op, o)
			}
		}
		one()
		if n := testing.AllocsPerRun(200, one); n > 0 {
			t.Errorf("op %d, token %q: %.1f allocations per request, want 0", c.op, token, n)
		}
	}
}

// Answers map onto outcomes as the engine expects them.
func TestClassify(t *testing.T) {
	var m message
	var o driver.Outcome
	for _, c := range []struct {
		op       driver.ChargeOp
		status   int
		location string
		body     string
		class    string
		ref      string
		resolved bool
		gone     bool
	}{
		{driver.ChargeCreate, 201, "/nchf-convergedcharging/v3/chargingdata/r1", `{}`, "", "r1", true, false},
		{driver.ChargeCreate, 201, "", `{}`, "no_location", "", true, false},
		{driver.ChargeCreate, 201, "/nchf-convergedcharging/v3/chargingdata/r1", `{"resultCode":"QUOTA_LIMIT_REACHED"}`, "rg_QUOTA_LIMIT_REACHED", "r1", true, false},
		{driver.ChargeUpdate, 404, "", ``, "http_404", "", true, true},
		{driver.ChargeUpdate, 403, "", ``, "http_403", "", true, false}, // barred
		{driver.ChargeUpdate, 503, "", ``, "http_503", "", true, false}, // refused: not charged
		{driver.ChargeUpdate, 504, "", ``, "http_504", "", false, false},
		{driver.ChargeUpdate, 500, "", ``, "http_500", "", false, false},
		{driver.ChargeRelease, 204, "", ``, "", "", true, false},
	} {
		m.resetAnswer()
		m.status, m.location, m.rbody = c.status, []byte(c.location), []byte(c.body)
		classify(c.op, &m, &o)
		barred := c.status == 403 // END_USER_REQUEST_DENIED: what an account bar answers
		if o.Class != c.class || string(o.Ref) != c.ref || o.Resolved != c.resolved || o.Gone != c.gone || o.Barred != barred || o.RatingGroupRefused != strings.HasPrefix(c.class, "rg_") {
			t.Errorf("op %d status %d: outcome %+v ref %q", c.op, c.status, o, o.Ref)
		}
	}
}

// The operator token goes on balance inquiries only, as a never-indexed
// h2c field (never in a template); a token a header cannot carry is
// refused.
func TestOperatorToken(t *testing.T) {
	const token = "operator-token-0123456789"
	d, err := New(driver.Config{Targets: []string{"127.0.0.1:1"}, OperatorToken: token})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var m message
	for _, c := range []struct {
		op   driver.ChargeOp
		auth string
	}{
		{driver.ChargeBalance, "Bearer " + token}, {driver.ChargeCreate, ""}, {driver.ChargeUpdate, ""},
		{driver.ChargeRelease, ""}, {driver.ChargeEvent, ""}, {driver.ChargeBalance, "Bearer " + token},
	} {
		d.build(&m, &driver.Charge{Op: c.op, SUPI: []byte("imsi-001010000000006"), Session: []byte("r")})
		cr := d.h2.targets[0].request(&m)
		var got string
		for _, f := range cr.Fields {
			if f.Name == AuthorizationHeader {
				got = string(f.Value)
			}
		}
		if got != c.auth || string(m.auth) != c.auth {
			t.Errorf("op %d: authorization %q (message %q), want %q", c.op, got, m.auth, c.auth)
		}
	}
	for _, bad := range []string{"with space-0123456789", "new\nline-0123456789", "caf\u00e9-0123456789"} {
		if _, err := New(driver.Config{Targets: []string{"127.0.0.1:1"}, OperatorToken: bad}); err == nil || !strings.Contains(err.Error(), "operator token") {
			t.Errorf("token %q: err = %v, want a refusal", bad, err)
		}
	}
}
