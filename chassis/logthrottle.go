package chassis

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// LogThrottle bounds log lines written on a hot path: at most one line per
// interval for each kind of event, carrying how many events of that kind
// happened since the previous line. Allow costs one map lookup and two
// atomic operations and does not allocate once a kind has been seen. Safe
// for concurrent use.
//
//	if n, ok := t.Allow("charging core failed: pool exhausted"); ok {
//		log.Warn("charging core failed", "err", err, "count", n)
//	}
type LogThrottle struct {
	every time.Duration
	now   func() time.Time
	kinds sync.Map // string → *throttleKind
}

type throttleKind struct {
	next  atomic.Int64  // Unix ns before which lines are suppressed
	count atomic.Uint64 // events since the last line written
}

// NewLogThrottle returns a LogThrottle allowing one line per kind every
// interval (default one second when interval <= 0).
func NewLogThrottle(every time.Duration) *LogThrottle {
	if every <= 0 {
		every = time.Second
	}
	return &LogThrottle{every: every, now: time.Now}
}

// Allow counts one event of kind and reports whether a line may be written
// now, with the number of events of kind since the last line (this one
// included). Kinds should be few (constant strings or error classes).
func (t *LogThrottle) Allow(kind string) (count uint64, ok bool) {
	v, found := t.kinds.Load(kind)
	if !found {
		v, _ = t.kinds.LoadOrStore(kind, new(throttleKind))
	}
	k := v.(*throttleKind)
	k.count.Add(1)
	now := t.now().UnixNano()
	next := k.next.Load()
	if now < next || !k.next.CompareAndSwap(next, now+int64(t.every)) {
		return 0, false
	}
	return k.count.Swap(0), true
}

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
