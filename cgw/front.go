package cgw

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/probe"
	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/chf"
)

// ValidateAdvertise checks an apiRoot (--advertise): an absolute http or
// https URI with a host, optionally a path prefix, and no user
// information, query or fragment.
func ValidateAdvertise(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("cannot use --advertise %q: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("cannot use --advertise %q: want an http:// or https:// URI", s)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("cannot use --advertise %q: the URI has no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return fmt.Errorf("cannot use --advertise %q: want scheme://host[:port][/prefix], no user, query or fragment", s)
	}
	return nil
}

// defaultAdvertise is the apiRoot of a server listening on addr (the
// listener's actual address): http or https (TLS) and that host and port;
// an unspecified host (0.0.0.0, ::) is replaced by the machine's host
// name, since a client cannot reach an unspecified address.
func defaultAdvertise(addr string, tls bool) string {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		} else {
			host = "localhost"
		}
	}
	return scheme + net.JoinHostPort(host, port)
}

// appendSegment appends s to dst as one path segment (RFC 3986 pchar):
// every byte but the unreserved ones, the sub-delims, ':' and '@' is
// percent-encoded, so a SUPI holding '/', '?', '%' or a space stays one
// segment that the router decodes back.
func appendSegment(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if uriChar[c] && c != '/' && c != '?' && c != '%' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', hex[c>>4], hex[c&15])
	}
	return dst
}

const contentText = probe.ContentType

// probe answers /healthz, /readyz and /metrics (the HTTP/1.1 front's
// chassis answers GET ones itself, the same way).
func (h *Handler) probe(x *Exchange, rt routeKind) {
	x.Status = http.StatusOK
	x.ContentType = contentText
	switch rt {
	case routeHealthz:
		x.Body = append(x.Body[:0], probe.Healthy...)
	case routeReadyz:
		status, body := probe.Ready(false, h.ready)
		x.Status = status
		x.Body = append(x.Body[:0], body...)
	case routeMetrics:
		mfs, err := telemetry.Registry().Gather()
		if err != nil && len(mfs) == 0 {
			h.problem(x, http.StatusInternalServerError, "SYSTEM_FAILURE", "cannot gather metrics: "+err.Error(), "", "")
			return
		}
		w := &appendWriter{b: x.Body[:0]}
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		enc := expfmt.NewEncoder(w, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				h.problem(x, http.StatusInternalServerError, "SYSTEM_FAILURE", "cannot encode metrics: "+err.Error(), "", "")
				return
			}
		}
		x.Body = w.b
		x.ContentType = string(format)
	}
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// refusal is a pre-encoded ProblemDetails of a request refused before the
// Handler sees it (by the fronts' own backstop limits).
type refusal struct {
	status int
	body   []byte
}

func newRefusals(maxBody int) map[int]refusal {
	mk := func(status int, cause, detail string) refusal {
		return refusal{status, chf.AppendProblemDetails(nil, &chf.Problem{
			Status: status, Title: http.StatusText(status), Cause: cause, Detail: detail,
		})}
	}
	return map[int]refusal{
		http.StatusBadRequest:                  mk(http.StatusBadRequest, "INVALID_MSG_FORMAT", "the request is not valid HTTP"),
		http.StatusRequestEntityTooLarge:       mk(http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "request body exceeds the limit of "+strconv.Itoa(maxBody)+" bytes"),
		http.StatusRequestHeaderFieldsTooLarge: mk(http.StatusRequestHeaderFieldsTooLarge, "", "request header fields too large"),
		http.StatusServiceUnavailable:          mk(http.StatusServiceUnavailable, "NF_CONGESTION", "too many requests in flight"),
	}
}

// rejectBody is the h2c front's h2c.Server.RejectBody: the ProblemDetails
// of a request it refuses itself (413 over its body limit, 431).
func (h *Handler) rejectBody(status int) (string, []byte) {
	r, ok := h.refusals[status]
	if !ok {
		return "", nil
	}
	return contentProblem, r.body
}

// refuseFast is the HTTP/1.1 front's server.Config.Refuse: the
// same answers for what the chassis refuses itself (413 over its body
// limit, 503 over its in-flight bound, 400 for a request it cannot
// parse).
func (h *Handler) refuseFast(ctx *fasthttp.RequestCtx, status int) {
	ctx.SetStatusCode(status)
	if r, ok := h.refusals[status]; ok {
		ctx.SetContentType(contentProblem)
		ctx.SetBody(r.body)
		return
	}
	ctx.SetBody(nil)
}

// validNotifyURI reports whether u is an absolute http or https URI with
// a host (RFC 3986: scheme "://" authority, then an optional path and
// query, no fragment), made of URI characters only. It allocates
// nothing.
func validNotifyURI(u []byte) bool {
	rest, ok := cutScheme(u)
	if !ok {
		return false
	}
	end := len(rest)
	for i, c := range rest {
		if !uriChar[c] && c != '[' && c != ']' {
			return false // '#', spaces, controls, non-ASCII
		}
		if (c == '/' || c == '?') && end == len(rest) {
			end = i
		}
	}
	auth := rest[:end]
	for i := len(auth) - 1; i >= 0; i-- {
		if auth[i] == '@' {
			auth = auth[i+1:] // user information
			break
		}
	}
	host, port := auth, []byte(nil)
	if len(auth) > 0 && auth[0] == '[' {
		closing := -1
		for i, c := range auth {
			if c == ']' {
				closing = i
				break
			}
		}
		if closing < 0 {
			return false
		}
		host = auth[1:closing]
		for _, c := range host {
			if !isHexDigit(c) && c != ':' && c != '.' {
				return false
			}
		}
		switch after := auth[closing+1:]; {
		case len(after) == 0:
		case after[0] == ':':
			port = after[1:]
		default:
			return false
		}
	} else {
		for i := len(auth) - 1; i >= 0; i-- {
			if auth[i] == ':' {
				host, port = auth[:i], auth[i+1:]
				break
			}
		}
		for _, c := range host {
			if c == ':' || c == '[' || c == ']' || c == '@' {
				return false
			}
		}
	}
	if len(host) == 0 || len(port) > 5 {
		return false
	}
	n := 0
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

func isHexDigit(c byte) bool {
	_, ok := unhex(c)
	return ok
}
