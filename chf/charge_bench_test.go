package chf

import (
	"encoding/json"
	"testing"
)

// Encoding benchmarks of the internal CGW→OCP→ABM messages: the generated
// msgp codecs against encoding/json on the same values. Run:
//
//	go test -run '^$' -bench 'Encoding' -benchmem ./chf/

func sampleRequest() *ChargeRequest {
	return &ChargeRequest{
		Op: OpUpdate, SUPI: "imsi-001010000000001", Session: "0123456789abcdef", Seq: 3,
		Lines: []UsageLine{
			{RatingGroup: 10, Used: Units{TotalVolume: 5_242_880, UplinkVolume: 1_048_576, DownlinkVolume: 4_194_304}, Request: true},
			{RatingGroup: 20, Used: Units{Time: 60}, Request: true, Requested: Units{Time: 300}},
		},
	}
}

func sampleResponse() *ChargeResponse {
	return &ChargeResponse{
		Lines: []GrantLine{
			{RatingGroup: 10, Granted: Units{TotalVolume: 10_000_000}, ValidityTime: 1800, QuotaHoldingTime: 300},
			{RatingGroup: 20, Granted: Units{Time: 300}, ValidityTime: 1800, QuotaHoldingTime: 300, FinalUnit: true},
		},
		Charged: 66, Balance: 99_999_934, Reserved: 310, Currency: "EUR",
	}
}

func TestEncodingRoundTrip(t *testing.T) {
	req := sampleRequest()
	b, err := req.MarshalMsg(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got ChargeRequest
	if _, err := got.UnmarshalMsg(b); err != nil {
		t.Fatal(err)
	}
	if got.SUPI != req.SUPI || len(got.Lines) != 2 || got.Lines[0] != req.Lines[0] || got.Lines[1] != req.Lines[1] {
		t.Fatalf("round trip: %+v", got)
	}
	// Encoding into a reused buffer and decoding into a reused value with
	// room for the lines allocates only the two strings of the request.
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf, _ = req.MarshalMsg(buf[:0]) }); n != 0 {
		t.Fatalf("MarshalMsg allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { got.Lines = got.Lines[:0]; _, _ = got.UnmarshalMsg(buf) }); n > 2 {
		t.Fatalf("UnmarshalMsg allocates %v times", n)
	}
	ar := ApplyRequest{Op: OpUpdate, SUPI: "imsi-001010000000001", Session: "s", Seq: 1, Lines: []RatedLine{{RatingGroup: 10, Service: ServiceData, UsedUnits: 5, UsedCost: 1, Request: true, GrantUnits: 7, Price: 1, UnitSize: 1_000_000, ValidityTime: 60}}}
	b, _ = ar.MarshalMsg(nil)
	var ar2 ApplyRequest
	if _, err := ar2.UnmarshalMsg(b); err != nil || ar2.Lines[0] != ar.Lines[0] || ar2.SUPI != ar.SUPI {
		t.Fatalf("apply request round trip: %+v %v", ar2, err)
	}
}

func BenchmarkEncodingRequestMsgpEncode(b *testing.B) {
	req := sampleRequest()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = req.MarshalMsg(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

func BenchmarkEncodingRequestMsgpDecode(b *testing.B) {
	buf, _ := sampleRequest().MarshalMsg(nil)
	var req ChargeRequest
	b.ReportAllocs()
	for b.Loop() {
		req.Lines = req.Lines[:0]
		if _, err := req.UnmarshalMsg(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingRequestJSONEncode(b *testing.B) {
	req := sampleRequest()
	var n int
	b.ReportAllocs()
	for b.Loop() {
		out, err := json.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.ReportMetric(float64(n), "bytes")
}

func BenchmarkEncodingRequestJSONDecode(b *testing.B) {
	buf, _ := json.Marshal(sampleRequest())
	var req ChargeRequest
	b.ReportAllocs()
	for b.Loop() {
		req.Lines = req.Lines[:0]
		if err := json.Unmarshal(buf, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingResponseMsgpEncode(b *testing.B) {
	resp := sampleResponse()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = resp.MarshalMsg(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

func BenchmarkEncodingResponseMsgpDecode(b *testing.B) {
	buf, _ := sampleResponse().MarshalMsg(nil)
	var resp ChargeResponse
	b.ReportAllocs()
	for b.Loop() {
		resp.Lines = resp.Lines[:0]
		if _, err := resp.UnmarshalMsg(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingResponseJSONEncode(b *testing.B) {
	resp := sampleResponse()
	var n int
	b.ReportAllocs()
	for b.Loop() {
		out, err := json.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.ReportMetric(float64(n), "bytes")
}

func BenchmarkEncodingResponseJSONDecode(b *testing.B) {
	buf, _ := json.Marshal(sampleResponse())
	var resp ChargeResponse
	b.ReportAllocs()
	for b.Loop() {
		resp.Lines = resp.Lines[:0]
		if err := json.Unmarshal(buf, &resp); err != nil {
			b.Fatal(err)
		}
	}
}
