package chf

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

const validCreate = `{"subscriberIdentifier":"imsi-001010000000001",
 "nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"5d1f2f6c-3e2b-4b7e-9f1a-3c2d1e0f9a8b"},
 "invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":0,
 "multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{}},
   {"ratingGroup":20,"requestedUnit":{"time":60},"usedUnitContainer":[
     {"localSequenceNumber":1,"time":5,"totalVolume":100,"uplinkVolume":40,"downlinkVolume":60},
     {"localSequenceNumber":2,"time":1,"serviceSpecificUnits":2}]}]}`

func TestNchfDecode(t *testing.T) {
	var d NchfDecoder
	var r NchfRequest
	if err := d.Decode([]byte(validCreate), &r); err != nil {
		t.Fatal(err)
	}
	want := NchfRequest{
		SUPI: "imsi-001010000000001", NodeFunctionality: "SMF",
		Lines: []UsageLine{
			{RatingGroup: 10, Request: true},
			{RatingGroup: 20, Request: true, Requested: Units{Time: 60},
				Used: Units{Time: 6, TotalVolume: 100, UplinkVolume: 40, DownlinkVolume: 60, ServiceSpecific: 2}},
		},
	}
	if r.Key == 0 {
		t.Fatal("no identity key")
	}
	want.Key = r.Key
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	ev := `{"subscriberIdentifier":"imsi-1","nfConsumerIdentification":{"nodeFunctionality":"SMSF"},
	 "invocationTimeStamp":"2026-11-30T04:00:00+01:00","invocationSequenceNumber":4294967295,
	 "oneTimeEvent":true,"oneTimeEventType":"IEC","multipleUnitUsage":[{"ratingGroup":30,"requestedUnit":{"serviceSpecificUnits":1}}]}`
	if err := d.Decode([]byte(ev), &r); err != nil {
		t.Fatal(err)
	}
	if !r.OneTimeEvent || r.OneTimeEventType != "IEC" || r.Seq != 4294967295 || len(r.Lines) != 1 || r.Lines[0].Requested.ServiceSpecific != 1 {
		t.Fatalf("event decoded as %+v", r)
	}
}

// TestNchfIdentity checks what makes two requests the same one: member
// order and fields outside the identity do not matter; the consumer,
// subscriber, sequence number and timestamp do (a retransmission with a
// new timestamp is another request).
func TestNchfIdentity(t *testing.T) {
	var d NchfDecoder
	keys := func(body string) uint64 {
		t.Helper()
		var r NchfRequest
		if err := d.Decode([]byte(body), &r); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return r.Key
	}
	const base = `{"subscriberIdentifier":"imsi-1","nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"a"},"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":3}`
	k := keys(base)
	if k2 := keys(`{"invocationSequenceNumber":3,"nfConsumerIdentification":{"nFName":"a","nodeFunctionality":"SMF"},"retransmissionIndicator":true,"invocationTimeStamp":"2026-11-30T04:00:00Z","subscriberIdentifier":"imsi-1"}`); k2 != k {
		t.Fatal("reordered members changed the identity")
	}
	for _, other := range []string{
		`{"subscriberIdentifier":"imsi-2","nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"a"},"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":3}`,
		`{"subscriberIdentifier":"imsi-1","nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"b"},"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":3}`,
		`{"subscriberIdentifier":"imsi-1","nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"a"},"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":4}`,
		`{"subscriberIdentifier":"imsi-1","nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"a"},"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":3,"pduSessionChargingInformation":{"chargingId":7}}`,
	} {
		if k2 := keys(other); k2 == k {
			t.Errorf("%s: same identity as %s", other, base)
		}
	}
	if k2 := keys(`{"subscriberIdentifier":"imsi-1","nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"a"},"invocationTimeStamp":"2026-11-30T04:00:01Z","invocationSequenceNumber":3,"retransmissionIndicator":true}`); k2 == k {
		t.Error("a new timestamp must change Key, retransmission or not")
	}
}

// TestNchfContainersAsReported checks each used unit container counts
// its own volume: totalVolume when present, else uplink + downlink.
func TestNchfContainersAsReported(t *testing.T) {
	var d NchfDecoder
	var r NchfRequest
	body := `{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":1,
	 "multipleUnitUsage":[{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":1000000},{"localSequenceNumber":2,"uplinkVolume":4000000,"downlinkVolume":5000000}]}]}`
	if err := d.Decode([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Lines[0].Used.Amount(ServiceData); got != 10_000_000 {
		t.Fatalf("data amount %d, want 10,000,000 (%+v)", got, r.Lines[0].Used)
	}
}

func TestNchfDecodeErrors(t *testing.T) {
	base := func(mod func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(validCreate), &m); err != nil {
			t.Fatal(err)
		}
		mod(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	muu := func(m map[string]any, i int) map[string]any {
		return m["multipleUnitUsage"].([]any)[i].(map[string]any)
	}
	for _, tc := range []struct {
		name, body, param string
	}{
		{"not json", `{"a":`, ""},
		{"not object", `[1]`, "/"},
		{"no nf", base(func(m map[string]any) { delete(m, "nfConsumerIdentification") }), "/nfConsumerIdentification"},
		{"no node functionality", base(func(m map[string]any) { m["nfConsumerIdentification"] = map[string]any{} }), "/nfConsumerIdentification/nodeFunctionality"},
		{"nf not object", base(func(m map[string]any) { m["nfConsumerIdentification"] = "SMF" }), "/nfConsumerIdentification"},
		{"no timestamp", base(func(m map[string]any) { delete(m, "invocationTimeStamp") }), "/invocationTimeStamp"},
		{"bad timestamp", base(func(m map[string]any) { m["invocationTimeStamp"] = "yesterday" }), "/invocationTimeStamp"},
		{"no seq", base(func(m map[string]any) { delete(m, "invocationSequenceNumber") }), "/invocationSequenceNumber"},
		{"seq string", base(func(m map[string]any) { m["invocationSequenceNumber"] = "1" }), "/invocationSequenceNumber"},
		{"seq negative", base(func(m map[string]any) { m["invocationSequenceNumber"] = -1 }), "/invocationSequenceNumber"},
		{"seq too big", base(func(m map[string]any) { m["invocationSequenceNumber"] = 1 << 32 }), "/invocationSequenceNumber"},
		{"seq fraction", base(func(m map[string]any) { m["invocationSequenceNumber"] = 1.5 }), "/invocationSequenceNumber"},
		{"supi number", base(func(m map[string]any) { m["subscriberIdentifier"] = 1 }), "/subscriberIdentifier"},
		{"supi empty", base(func(m map[string]any) { m["subscriberIdentifier"] = "" }), "/subscriberIdentifier"},
		{"event not bool", base(func(m map[string]any) { m["oneTimeEvent"] = "true" }), "/oneTimeEvent"},
		{"muu not array", base(func(m map[string]any) { m["multipleUnitUsage"] = map[string]any{} }), "/multipleUnitUsage"},
		{"muu entry not object", base(func(m map[string]any) { m["multipleUnitUsage"] = []any{1} }), "/multipleUnitUsage/0"},
		{"no rating group", base(func(m map[string]any) { delete(muu(m, 1), "ratingGroup") }), "/multipleUnitUsage/1/ratingGroup"},
		{"rating group twice", base(func(m map[string]any) { muu(m, 1)["ratingGroup"] = 10 }), "/multipleUnitUsage/1/ratingGroup"},
		{"volume overflow", base(func(m map[string]any) {
			muu(m, 1)["usedUnitContainer"].([]any)[1].(map[string]any)["totalVolume"] = uint64(1<<64 - 50)
		}), "/multipleUnitUsage/1/usedUnitContainer/1"},
		{"uplink + downlink overflow", base(func(m map[string]any) {
			c := muu(m, 1)["usedUnitContainer"].([]any)[0].(map[string]any)
			delete(c, "totalVolume")
			c["uplinkVolume"], c["downlinkVolume"] = uint64(1<<63), uint64(1<<63)
		}), "/multipleUnitUsage/1/usedUnitContainer/0"},
		{"time overflow", base(func(m map[string]any) {
			cs := muu(m, 1)["usedUnitContainer"].([]any)
			cs[0].(map[string]any)["time"], cs[1].(map[string]any)["time"] = uint32(1<<32-1), 1
		}), "/multipleUnitUsage/1/usedUnitContainer/1"},
		{"requested uplink + downlink overflow", base(func(m map[string]any) {
			muu(m, 0)["requestedUnit"] = map[string]any{"uplinkVolume": uint64(1<<64 - 1), "downlinkVolume": 1}
		}), "/multipleUnitUsage/0/requestedUnit"},
		{"rating group string", base(func(m map[string]any) { muu(m, 0)["ratingGroup"] = "10" }), "/multipleUnitUsage/0/ratingGroup"},
		{"requested not object", base(func(m map[string]any) { muu(m, 0)["requestedUnit"] = 5 }), "/multipleUnitUsage/0/requestedUnit"},
		{"requested time string", base(func(m map[string]any) { muu(m, 1)["requestedUnit"] = map[string]any{"time": "60"} }), "/multipleUnitUsage/1/requestedUnit/time"},
		{"used not array", base(func(m map[string]any) { muu(m, 1)["usedUnitContainer"] = map[string]any{} }), "/multipleUnitUsage/1/usedUnitContainer"},
		{"used no lsn", base(func(m map[string]any) {
			muu(m, 1)["usedUnitContainer"].([]any)[1].(map[string]any)["localSequenceNumber"] = nil
			delete(muu(m, 1)["usedUnitContainer"].([]any)[1].(map[string]any), "localSequenceNumber")
		}), "/multipleUnitUsage/1/usedUnitContainer/1/localSequenceNumber"},
		{"used volume negative", base(func(m map[string]any) {
			muu(m, 1)["usedUnitContainer"].([]any)[0].(map[string]any)["totalVolume"] = -5
		}), "/multipleUnitUsage/1/usedUnitContainer/0/totalVolume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d NchfDecoder
			var r NchfRequest
			err := d.Decode([]byte(tc.body), &r)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Decode(%s) = %v, want *FieldError", tc.body, err)
			}
			if fe.Param != tc.param {
				t.Fatalf("Decode(%s): param %q (%s), want %q", tc.body, fe.Param, fe.Reason, tc.param)
			}
		})
	}
}

func TestAppendChargingDataResponse(t *testing.T) {
	ts := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	got := string(AppendChargingDataResponse(nil, ts, 3, []GrantLine{
		{RatingGroup: 10, Granted: Units{TotalVolume: 1048576}, ValidityTime: 3600, QuotaHoldingTime: 300},
		{RatingGroup: 20, Granted: Units{Time: 30}, FinalUnit: true},
		{RatingGroup: 30, Result: ResultQuotaLimitReached},
	}))
	want := `{"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":3,"multipleUnitInformation":[` +
		`{"resultCode":"SUCCESS","ratingGroup":10,"grantedUnit":{"totalVolume":1048576},"validityTime":3600,"quotaHoldingTime":300},` +
		`{"resultCode":"SUCCESS","ratingGroup":20,"grantedUnit":{"time":30},"finalUnitIndication":{"finalUnitAction":"TERMINATE"}},` +
		`{"resultCode":"QUOTA_LIMIT_REACHED","ratingGroup":30}]}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("invalid JSON")
	}
}

func TestAppendProblemDetails(t *testing.T) {
	got := AppendProblemDetails(nil, &Problem{Status: 400, Title: "Bad Request", Cause: "CHARGING_FAILED",
		Detail: "bad \"x\"\n\x01<", Param: "/a/0", Reason: "must be"})
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if m["detail"] != "bad \"x\"\n\x01<" || m["cause"] != "CHARGING_FAILED" || m["status"] != float64(400) {
		t.Fatalf("got %s", got)
	}
}

func TestNchfDecodeAllocs(t *testing.T) {
	var d NchfDecoder
	var r NchfRequest
	body := []byte(validCreate)
	allocs := testing.AllocsPerRun(100, func() {
		if err := d.Decode(body, &r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 { // the SUPI string
		t.Fatalf("Decode allocates %.1f times per call, want <= 1", allocs)
	}
	buf := make([]byte, 0, 1024)
	lines := []GrantLine{{RatingGroup: 10, Granted: Units{TotalVolume: 1}}}
	allocs = testing.AllocsPerRun(100, func() {
		buf = AppendChargingDataResponse(buf[:0], time.Now(), 1, lines)
	})
	if allocs > 0 {
		t.Fatalf("AppendChargingDataResponse allocates %.1f times per call", allocs)
	}
}

func BenchmarkNchfDecode(b *testing.B) {
	var d NchfDecoder
	var r NchfRequest
	body := []byte(validCreate)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := d.Decode(body, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendChargingDataResponse(b *testing.B) {
	buf := make([]byte, 0, 1024)
	ts := time.Now()
	lines := []GrantLine{{RatingGroup: 10, Granted: Units{TotalVolume: 1 << 20}, ValidityTime: 3600}, {RatingGroup: 20, Granted: Units{Time: 60}}}
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendChargingDataResponse(buf[:0], ts, 1, lines)
	}
}

// FuzzNchfDecode checks that Decode never panics, and that whatever it
// accepts is valid JSON carrying the mandatory fields.
func FuzzNchfDecode(f *testing.F) {
	f.Add([]byte(validCreate))
	f.Add([]byte(`{"nfConsumerIdentification":{"nodeFunctionality":"SMSF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1,"oneTimeEvent":true,"multipleUnitUsage":[{"ratingGroup":30,"requestedUnit":{"serviceSpecificUnits":1}}]}`))
	f.Add([]byte(`{"a":[1,2,{"b":null}],"c":"\u00e9"}`))
	var d NchfDecoder
	var r NchfRequest
	f.Fuzz(func(t *testing.T, body []byte) {
		err := d.Decode(body, &r)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Decode returned %T, want *FieldError", err)
			}
			_ = AppendProblemDetails(nil, &Problem{Status: 400, Detail: fe.Error(), Param: fe.Param, Reason: fe.Reason})
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if len(r.Lines) > MaxUsageLines {
			t.Fatalf("%d lines", len(r.Lines))
		}
	})
}

func TestNchfTriggersAndFinalUnitIndication(t *testing.T) {
	var d NchfDecoder
	var r NchfRequest
	body := `{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1,` +
		`"multipleUnitUsage":[{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"totalVolume":5,"triggers":[{"triggerType":"QUOTA_THRESHOLD","triggerCategory":"IMMEDIATE_REPORT"}]},` +
		`{"localSequenceNumber":2,"totalVolume":5,"triggers":[{"triggerType":"FINAL","triggerCategory":"DEFERRED_REPORT"},{"triggerType":"RAT_CHANGE","triggerCategory":"DEFERRED_REPORT"}]}]}]}`
	if err := d.Decode([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Lines[0].Reported; got != TriggerQuotaThreshold|TriggerFinal|TriggerOther || r.Lines[0].Used.TotalVolume != 10 {
		t.Fatalf("reported %b, line %+v", got, r.Lines[0])
	}
	bad := `{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},"invocationTimeStamp":"2026-01-01T00:00:00Z","invocationSequenceNumber":1,` +
		`"multipleUnitUsage":[{"ratingGroup":10,"usedUnitContainer":[{"localSequenceNumber":1,"triggers":[{"triggerType":"FINAL"}]}]}]}`
	var fe *FieldError
	if err := d.Decode([]byte(bad), &r); !errors.As(err, &fe) || fe.Param != "/multipleUnitUsage/0/usedUnitContainer/0/triggers/0/triggerCategory" {
		t.Fatalf("missing triggerCategory: %v", err)
	}

	lines := []GrantLine{
		{RatingGroup: 10, Granted: Units{TotalVolume: 100}, Threshold: 20, Triggers: TriggerQuotaThreshold | TriggerValidityTime,
			FinalUnit: true, FinalAction: FinalRedirect, RedirectType: RedirectURL, Redirect: "http://x/"},
		{RatingGroup: 20, Granted: Units{Time: 30}, Threshold: 5, FinalUnit: true, FinalAction: FinalRestrictAccess, FilterID: "f1"},
	}
	got := string(AppendChargingDataResponse(nil, time.Unix(0, 0), 1, lines))
	want := `{"invocationTimeStamp":"1970-01-01T00:00:00Z","invocationSequenceNumber":1,"multipleUnitInformation":[` +
		`{"resultCode":"SUCCESS","ratingGroup":10,"grantedUnit":{"totalVolume":100},"triggers":[{"triggerType":"QUOTA_THRESHOLD","triggerCategory":"IMMEDIATE_REPORT"},{"triggerType":"VALIDITY_TIME","triggerCategory":"IMMEDIATE_REPORT"}],` +
		`"volumeQuotaThreshold":20,"finalUnitIndication":{"finalUnitAction":"REDIRECT","redirectServer":{"redirectAddressType":"URL","redirectServerAddress":"http://x/"}}},` +
		`{"resultCode":"SUCCESS","ratingGroup":20,"grantedUnit":{"time":30},"timeQuotaThreshold":5,"finalUnitIndication":{"finalUnitAction":"RESTRICT_ACCESS","filterId":"f1"}}]}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
