package cgw

import "net/http"

// The one router of both fronts. The HTTP/1.1 and HTTP/2 adapters hand
// Handler.Serve the request target exactly as received (HTTP/1.1's
// request-target, HTTP/2's :path) and the Handler parses and routes it
// the same way whatever the transport: no front decodes, cleans or
// splits the path on its own.
//
// The rules (RFC 9110 §4.2, RFC 3986):
//   - the target is origin-form (/path[?query]); HTTP/1.1's absolute-form
//     (http://authority/path) is reduced to its path; anything else, a
//     '#', or a byte that is not a URI character is 400 INVALID_URI;
//   - the path is split on '/' as sent, then each segment is
//     percent-decoded (%41 and A are the same segment; %2F is a '/'
//     inside a segment, never a separator); a malformed escape is 400;
//     no dot-segment removal and no merging of "//": such a path names no
//     resource and is 404;
//   - the API resources take no query parameters: a non-empty query is
//     400 INVALID_QUERY_PARAM naming the first parameter (the probes and
//     /metrics ignore it).

// routeKind is the resource a request target names.
type routeKind uint8

const (
	routeNone routeKind = iota // no such resource: 404
	routeCreate
	routeUpdate
	routeRelease
	routeBalance
	routeTopUp
	routeReauthorize
	routeAbort
	routeUnbar
	routeHealthz
	routeReadyz
	routeMetrics
)

// maxSegments bounds the path segments kept; a longer path names no
// resource.
const maxSegments = 8

// reqPath is a parsed request target; its buffers are reused.
type reqPath struct {
	buf   []byte // the decoded segments, back to back
	ends  [maxSegments]int
	n     int // segments; maxSegments+1 when there are more
	query []byte
	// id is the decoded identifier segment (ChargingDataRef or SUPI) of
	// the route, a slice of buf.
	id []byte
}

func (p *reqPath) seg(i int) []byte {
	start := 0
	if i > 0 {
		start = p.ends[i-1]
	}
	return p.buf[start:p.ends[i]]
}

// uriChar marks the bytes a path or query may hold as themselves
// (RFC 3986 pchar plus '/' and '?'; '%' starts an escape).
var uriChar = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/?%") {
		t[c] = true
	}
	return t
}()

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parse parses target into p; it returns "" or why the target is
// malformed (a constant: no allocation).
func (p *reqPath) parse(target []byte) string {
	p.buf, p.n, p.query, p.id = p.buf[:0], 0, nil, nil
	t := target
	if len(t) == 0 {
		return "the request target is empty"
	}
	if t[0] != '/' {
		// RFC 9112 §3.2.2: absolute-form, reduced to its path.
		rest, ok := cutScheme(t)
		if !ok {
			return "the request target must be a path (origin-form) or an absolute http(s) URI"
		}
		i := 0
		for i < len(rest) && rest[i] != '/' && rest[i] != '?' {
			i++
		}
		t = rest[i:]
		if len(t) == 0 || t[0] == '?' {
			return "the request target has an empty path"
		}
	}
	path := t
	for i, c := range t {
		if !uriChar[c] {
			return "the request target holds a character a URI may not (RFC 3986)"
		}
		if c == '?' && p.query == nil {
			path, p.query = t[:i], t[i+1:]
		}
	}
	// Split on '/' as sent, then decode each segment.
	for i := 1; i <= len(path); {
		j := i
		for j < len(path) && path[j] != '/' {
			j++
		}
		if p.n == maxSegments {
			p.n++ // too many: names no resource
			break
		}
		for k := i; k < j; k++ {
			c := path[k]
			if c == '%' {
				if k+2 >= j {
					return "the request target has a malformed percent-encoding"
				}
				hi, ok1 := unhex(path[k+1])
				lo, ok2 := unhex(path[k+2])
				if !ok1 || !ok2 {
					return "the request target has a malformed percent-encoding"
				}
				c = hi<<4 | lo
				k += 2
			}
			p.buf = append(p.buf, c)
		}
		p.ends[p.n] = len(p.buf)
		p.n++
		i = j + 1
	}
	return ""
}

// cutScheme returns what follows "http://" or "https://" (scheme case
// insensitive) in t.
func cutScheme(t []byte) ([]byte, bool) {
	for _, s := range [...]string{"http://", "https://"} {
		if len(t) > len(s) && equalFold(t[:len(s)], s) {
			return t[len(s):], true
		}
	}
	return nil, false
}

func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// segsAre reports whether the first len(names) segments are names.
func (p *reqPath) segsAre(names ...string) bool {
	if p.n < len(names) {
		return false
	}
	for i, n := range names {
		if string(p.seg(i)) != n {
			return false
		}
	}
	return true
}

// route names the resource of p (routeNone when none) and sets p.id.
func (p *reqPath) route() routeKind {
	switch {
	case p.n == 1:
		switch string(p.seg(0)) {
		case "healthz":
			return routeHealthz
		case "readyz":
			return routeReadyz
		case "metrics":
			return routeMetrics
		}
	case p.n >= 3 && p.n <= 5 && p.segsAre("nchf-convergedcharging", "v3", "chargingdata"):
		if p.n == 3 {
			return routeCreate
		}
		if p.n == 5 && len(p.seg(3)) > 0 {
			p.id = p.seg(3)
			switch string(p.seg(4)) {
			case "update":
				return routeUpdate
			case "release":
				return routeRelease
			}
		}
	case p.n >= 4 && p.n <= 5 && p.segsAre("chf", "v1", "accounts") && len(p.seg(3)) > 0:
		p.id = p.seg(3)
		if p.n == 4 {
			return routeBalance
		}
		switch string(p.seg(4)) {
		case TopUpSuffix[1:]:
			return routeTopUp
		case ReauthorizeSuffix[1:]:
			return routeReauthorize
		case AbortSuffix[1:]:
			return routeAbort
		case UnbarSuffix[1:]:
			return routeUnbar
		}
	}
	p.id = nil
	return routeNone
}

// allow is the Allow header of a route: the methods it serves.
func (k routeKind) allow() string {
	switch k {
	case routeBalance, routeHealthz, routeReadyz, routeMetrics:
		return "GET, HEAD"
	case routeNone:
		return ""
	}
	return "POST"
}

// allows reports whether the route serves method (HEAD wherever GET).
func (k routeKind) allows(method []byte) bool {
	switch k.allow() {
	case "POST":
		return string(method) == http.MethodPost
	case "GET, HEAD":
		return string(method) == http.MethodGet || string(method) == http.MethodHead
	}
	return false
}

// takesJSON reports whether the route's requests carry a JSON body.
func (k routeKind) takesJSON() bool {
	switch k {
	case routeCreate, routeUpdate, routeRelease, routeTopUp:
		return true
	}
	return false
}

// firstParam returns the name of the first parameter of a query (what
// precedes its first '=' or '&').
func firstParam(q []byte) []byte {
	for i, c := range q {
		if c == '=' || c == '&' {
			return q[:i]
		}
	}
	return q
}
