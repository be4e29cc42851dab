package telemetry

import (
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"
)

// TraceparentHeader is the W3C Trace Context header.
const TraceparentHeader = "traceparent"

// ParseTraceparent decodes a W3C traceparent header value (version 00, or a
// later version's first four fields) without allocating. It returns a
// remote SpanContext, or false when b is not a valid value.
func ParseTraceparent(b []byte) (trace.SpanContext, bool) {
	// 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01
	if len(b) < 55 || b[2] != '-' || b[35] != '-' || b[52] != '-' || (len(b) > 55 && b[55] != '-') {
		return trace.SpanContext{}, false
	}
	var ver [1]byte
	if _, err := hex.Decode(ver[:], b[0:2]); err != nil || ver[0] == 0xff || (ver[0] == 0 && len(b) != 55) {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !decodeLower(tid[:], b[3:35]) || !decodeLower(sid[:], b[36:52]) || !decodeLower(flags[:], b[53:55]) {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    tid,
		SpanID:     sid,
		TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled,
		Remote:     true,
	})
	return sc, sc.IsValid()
}

func decodeLower(dst, src []byte) bool {
	for _, c := range src {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, src)
	return err == nil
}

// AppendTraceparent appends the traceparent value of sc to dst.
func AppendTraceparent(dst []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	dst = append(dst, "00-"...)
	dst = hex.AppendEncode(dst, tid[:])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, sid[:])
	if sc.IsSampled() {
		return append(dst, "-01"...)
	}
	return append(dst, "-00"...)
}
