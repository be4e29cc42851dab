package h2c

import (
	"strconv"
	"strings"
	"unsafe"
)

// Request is a request received by the Server. It and every slice it
// exposes are owned by the server and valid only until the Handler
// returns; copy anything needed later. A Request is not safe for
// concurrent use.
type Request struct {
	Method    []byte
	Path      []byte
	Scheme    []byte
	Authority []byte
	// Body is the complete request body (DATA frames concatenated).
	Body []byte
	// ContentLength is the content-length header value, -1 when absent.
	ContentLength int64
	// StreamID is the HTTP/2 stream identifier.
	StreamID uint32

	arena  []byte // header names and values
	hdrs   []fieldRef
	pseudo [4]span // method, path, scheme, authority
}

type span struct{ off, n int32 }

type fieldRef struct{ name, value span }

func (r *Request) get(s span) []byte {
	return r.arena[s.off : s.off+s.n : s.off+s.n]
}

func (r *Request) store(v string) span {
	s := span{int32(len(r.arena)), int32(len(v))}
	r.arena = append(r.arena, v...)
	return s
}

// Header returns the value of the first regular header field named name
// (lowercase), or nil.
func (r *Request) Header(name string) []byte {
	for _, h := range r.hdrs {
		if string(r.get(h.name)) == name {
			return r.get(h.value)
		}
	}
	return nil
}

// VisitHeaders calls fn for every regular (non-pseudo) header field in
// the order received. The slices are valid only during the call.
func (r *Request) VisitHeaders(fn func(name, value []byte)) {
	for _, h := range r.hdrs {
		fn(r.get(h.name), r.get(h.value))
	}
}

func (r *Request) reset() {
	r.Method, r.Path, r.Scheme, r.Authority, r.Body = nil, nil, nil, nil, r.Body[:0]
	r.ContentLength = -1
	r.StreamID = 0
	r.arena = r.arena[:0]
	r.hdrs = r.hdrs[:0]
	r.pseudo = [4]span{}
}

// finish resolves the pseudo-header slices once the header block is decoded.
func (r *Request) finish() {
	r.Method = r.get(r.pseudo[0])
	r.Path = r.get(r.pseudo[1])
	r.Scheme = r.get(r.pseudo[2])
	r.Authority = r.get(r.pseudo[3])
}

// Response is the response a Handler builds. The server owns it: it is
// valid only until the Handler returns and is not safe for concurrent
// use. Status defaults to 200.
type Response struct {
	status int
	hdrs   []respField
	vals   []byte // values copied by SetHeaderBytes
	// Body is the response body; handlers may append to it directly
	// (it starts empty, with pooled capacity) or use Write.
	Body []byte
}

type respField struct {
	name    string
	value   string // indexed values (SetHeader/AddHeader)
	v       span   // value in vals when byValue
	byValue bool
}

// SetStatus sets the response status code (100..599 except 1xx are not
// supported as final responses).
func (w *Response) SetStatus(code int) { w.status = code }

// Status returns the status code set so far.
func (w *Response) Status() int { return w.status }

// AddHeader adds a header field. name should be lowercase (HTTP/2 field
// names are; an uppercase name is lowered at the cost of an allocation).
// The field is
// indexed in the connection's HPACK dynamic table, so use it for values
// that repeat (content-type, fixed tokens); name and value are retained by
// the connection's HPACK table and must not be built from reused memory.
func (w *Response) AddHeader(name, value string) {
	w.hdrs = append(w.hdrs, respField{name: strings.ToLower(name), value: value})
}

// SetHeader replaces any fields named name by one with value (see AddHeader).
func (w *Response) SetHeader(name, value string) {
	name = strings.ToLower(name)
	w.del(name)
	w.AddHeader(name, value)
}

// AddHeaderBytes adds a header field whose value varies per response
// (Location, X-Chf-Charged, ...). value is copied; it is sent as a literal
// that is never indexed, so it does not churn the HPACK table.
func (w *Response) AddHeaderBytes(name string, value []byte) {
	s := span{int32(len(w.vals)), int32(len(value))}
	w.vals = append(w.vals, value...)
	w.hdrs = append(w.hdrs, respField{name: strings.ToLower(name), v: s, byValue: true})
}

// AddHeaderInt adds a never-indexed header field with a decimal value,
// without allocating.
func (w *Response) AddHeaderInt(name string, v int64) {
	off := len(w.vals)
	w.vals = strconv.AppendInt(w.vals, v, 10)
	w.hdrs = append(w.hdrs, respField{name: strings.ToLower(name), v: span{int32(off), int32(len(w.vals) - off)}, byValue: true})
}

func (w *Response) del(name string) {
	kept := w.hdrs[:0]
	for _, h := range w.hdrs {
		if h.name != name {
			kept = append(kept, h)
		}
	}
	w.hdrs = kept
}

// Write appends p to the body. It never fails.
func (w *Response) Write(p []byte) (int, error) {
	w.Body = append(w.Body, p...)
	return len(p), nil
}

// WriteString appends s to the body. It never fails.
func (w *Response) WriteString(s string) (int, error) {
	w.Body = append(w.Body, s...)
	return len(s), nil
}

func (w *Response) reset() {
	w.status = 200
	w.hdrs = w.hdrs[:0]
	w.vals = w.vals[:0]
	w.Body = w.Body[:0]
}

func (w *Response) value(h *respField) string {
	if !h.byValue {
		return h.value
	}
	b := w.vals[h.v.off : h.v.off+h.v.n]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// statusStrings holds "100".."599" so encoding a status never allocates.
var statusStrings = func() []string {
	s := make([]string, 600)
	for i := 100; i < 600; i++ {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func statusString(code int) string {
	if code < 100 || code >= 600 {
		return "500"
	}
	return statusStrings[code]
}

// bstr converts b to a string without copying; the string must not be
// retained beyond b's lifetime.
func bstr(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
