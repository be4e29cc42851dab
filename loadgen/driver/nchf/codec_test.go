package nchf

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

func TestBodiesDecodeWithTheCHFDecoder(t *testing.T) {
	now := time.Date(2026, 11, 30, 4, 0, 0, 123e6, time.UTC)
	used := chf.Units{TotalVolume: 5 << 20}
	cases := []struct {
		name string
		req  Request
		want chf.UsageLine
		one  bool
	}{
		{"create", Request{SUPI: []byte("imsi-001010000000001"), NFName: "n1", Seq: 0, Now: now,
			Line: Line{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 10 << 20}}},
			chf.UsageLine{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 10 << 20}}, false},
		{"update", Request{SUPI: []byte("imsi-001010000000002"), NFName: "n1", Seq: 3, Now: now,
			Line: Line{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 1}, Used: &used}},
			chf.UsageLine{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 1}, Used: chf.Units{TotalVolume: 5 << 20}}, false},
		{"release voice", Request{SUPI: []byte("imsi-1"), NFName: "n1", Seq: 4, Now: now,
			Line: Line{RatingGroup: 20, Used: &chf.Units{Time: 30}}},
			chf.UsageLine{RatingGroup: 20, Used: chf.Units{Time: 30}}, false},
		{"sms", Request{SUPI: []byte("imsi-1"), Node: "SMSF", NFName: "n1", Now: now, OneTime: true,
			Line: Line{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}},
			chf.UsageLine{RatingGroup: 30, Request: true, Requested: chf.Units{ServiceSpecific: 1}}, true},
	}
	var d chf.NchfDecoder
	for _, c := range cases {
		body := AppendBody(nil, &c.req)
		if !json.Valid(body) {
			t.Fatalf("%s: invalid JSON %s", c.name, body)
		}
		var r chf.NchfRequest
		if err := d.Decode(body, &r); err != nil {
			t.Fatalf("%s: CHF decoder refused %s: %v", c.name, body, err)
		}
		if r.SUPI != string(c.req.SUPI) || r.Seq != c.req.Seq || r.OneTimeEvent != c.one || len(r.Lines) != 1 || r.Lines[0] != c.want {
			t.Fatalf("%s: decoded %+v from %s", c.name, r, body)
		}
		if c.one && (r.OneTimeEventType != "IEC" || r.NodeFunctionality != "SMSF") {
			t.Fatalf("%s: decoded %+v", c.name, r)
		}
	}
}

func TestAppendBodyDoesNotAllocate(t *testing.T) {
	used := chf.Units{Time: 30}
	r := Request{SUPI: []byte("imsi-001010000000001"), NFName: "x", Seq: 7, Now: time.Now(),
		Line: Line{RatingGroup: 20, Request: true, Requested: chf.Units{Time: 60}, Used: &used}}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = AppendBody(buf[:0], &r) }); n != 0 {
		t.Fatalf("AppendBody allocates %v times", n)
	}
}

func TestScanners(t *testing.T) {
	for loc, want := range map[string]string{
		"http://h:1/nchf-convergedcharging/v3/chargingdata/imsi-1.00aa": "imsi-1.00aa",
		"/nchf-convergedcharging/v3/chargingdata/imsi-1.ff/":            "imsi-1.ff",
		"/nchf-convergedcharging/v3/chargingdata/":                      "",
		"nothing": "",
	} {
		if got := string(RefFromLocation([]byte(loc))); got != want {
			t.Errorf("RefFromLocation(%q) = %q, want %q", loc, got, want)
		}
	}
	var codes []string
	FailedResultCodes([]byte(`{"multipleUnitInformation":[{"resultCode":"SUCCESS"},{"resultCode" : "QUOTA_LIMIT_REACHED"},{"resultCode":"USER_UNKNOWN"}]}`),
		func(c []byte) { codes = append(codes, string(c)) })
	if len(codes) != 2 || codes[0] != "QUOTA_LIMIT_REACHED" || codes[1] != "USER_UNKNOWN" {
		t.Fatalf("codes %v", codes)
	}
	if v, ok := ParseCharged([]byte(" 1250 ")); !ok || v != 1250 {
		t.Fatalf("ParseCharged = %v %v", v, ok)
	}
	if _, ok := ParseCharged([]byte("x")); ok {
		t.Fatal("ParseCharged accepted x")
	}
}

func BenchmarkAppendBody(b *testing.B) {
	used := chf.Units{TotalVolume: 5 << 20}
	r := Request{SUPI: []byte("imsi-001010000000001"), NFName: "6b4f6e1c-2d3a-4c5b-9e8f-0a1b2c3d4e5f", Seq: 7, Now: time.Now(),
		Line: Line{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 10 << 20}, Used: &used}}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendBody(buf[:0], &r)
	}
}

// TestScanGrant reads grants as the CHF's own encoder writes them.
func TestScanGrant(t *testing.T) {
	f := func(g chf.GrantLine, want driver.Grant) {
		t.Helper()
		body := chf.AppendChargingDataResponse(nil, time.Now(), 1, []chf.GrantLine{g})
		var got driver.Grant
		ScanGrant(body, &got)
		if got != want {
			t.Fatalf("%s: got %+v, want %+v", body, got, want)
		}
	}
	f(chf.GrantLine{RatingGroup: 10, Result: chf.ResultSuccess, Granted: chf.Units{TotalVolume: 10 << 20}, ValidityTime: 60,
		Threshold: 2 << 20, Triggers: chf.TriggerQuotaThreshold | chf.TriggerValidityTime},
		driver.Grant{Has: true, Granted: chf.Units{TotalVolume: 10 << 20}, Threshold: 2 << 20, Validity: 60})
	f(chf.GrantLine{RatingGroup: 20, Result: chf.ResultSuccess, Granted: chf.Units{Time: 60}, Threshold: 10},
		driver.Grant{Has: true, Granted: chf.Units{Time: 60}, Threshold: 10})
	f(chf.GrantLine{RatingGroup: 20, Result: chf.ResultQuotaLimitReached}, driver.Grant{})
	var g driver.Grant
	ScanGrant([]byte(`{"invocationSequenceNumber":1}`), &g)
	if g.Has {
		t.Fatal(g)
	}
}
