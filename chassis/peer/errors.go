package peer

import (
	"errors"
	"net/http"

	"github.com/valyala/fasthttp"
)

// ErrorKind returns a short, bounded label for err to throttle log lines
// by: "pool exhausted", "timeout", "dial", "status <code>" or "other".
func ErrorKind(err error) string {
	var se *StatusError
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return "pool exhausted"
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return "timeout"
	case errors.As(err, &se):
		return "status " + http.StatusText(se.Code)
	case notSent(err):
		return "dial"
	}
	return "other"
}

// IsOverload reports whether err from Client.Do means the peer is
// overloaded and the call was not processed: the connection pool to it was
// exhausted, or it answered 503.
func IsOverload(err error) bool {
	if errors.Is(err, fasthttp.ErrNoFreeConns) {
		return true
	}
	var se *StatusError
	return errors.As(err, &se) && se.Code == fasthttp.StatusServiceUnavailable
}
