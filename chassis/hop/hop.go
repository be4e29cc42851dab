// Package hop is what a chassis client and a chassis server agree on
// across one hop: the headers carrying the caller's deadline and the
// server's overload refusal, and the context of a served request, which
// carries the caller's remaining deadline and the request's trace to the
// next call (chassis/server makes it, chassis/peer reads it).
package hop

import (
	"context"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/internal/decimal"
)

// DeadlineHeader carries the caller's remaining time budget in microseconds
// to the next hop, which bounds its own outgoing calls by it.
const DeadlineHeader = "X-Chf-Budget-Us"

// DeadlineAtHeader carries the same deadline as an absolute time, Unix
// microseconds (as 3GPP's 3gpp-Sbi-Sender-Timestamp with
// 3gpp-Sbi-Max-Rsp-Time do). The next hop takes the earlier of the two:
// a request that waited in a frozen or overloaded peer's socket beyond its
// caller's deadline is refused instead of applied for a caller that has
// given up (which would charge a request answered as an error). Peers'
// clocks are assumed synchronised (NTP); a peer whose clock runs ahead
// sees the budget shortened by the difference.
const DeadlineAtHeader = "X-Chf-Deadline-Us"

// OverloadHeader is set on 503 responses a chassis server sends when its
// MaxInFlight is exceeded: the request was rejected before any processing,
// so a client may retry it elsewhere.
const OverloadHeader = "X-Chf-Overload"

type requestContextKeyType struct{}

var requestContextKey requestContextKeyType

// Context returns the context of a request served by a chassis server: its
// deadline is the caller's remaining budget (DeadlineHeader) if one was
// sent, or its absolute deadline (DeadlineAtHeader) if earlier, and it carries the request's trace, so that passing it to
// a chassis/peer Client's Do carries both to the next hop. It is valid only until the handler
// returns; handlers must not retain it. For a RequestCtx not served by the
// chassis it returns ctx itself.
func Context(ctx *fasthttp.RequestCtx) context.Context {
	if rc, ok := ctx.UserValue(requestContextKey).(*RequestContext); ok {
		return rc
	}
	return ctx
}

// RequestContext is the pooled context.Context of one served request. It
// allocates nothing unless Done is called on a request with a deadline or
// the request is traced. A server makes one per request (Acquire) and
// releases it when its handler returns (Release).
type RequestContext struct {
	rctx        *fasthttp.RequestCtx
	deadline    time.Time
	hasDeadline bool
	remote      trace.SpanContext // incoming trace context, passed on as is when not traced
	span        trace.Span        // recording server span, or nil
	spanCtx     context.Context   // context carrying span, when span != nil

	mu     sync.Mutex
	inner  context.Context // lazily created deadline context for Done
	cancel context.CancelFunc
}

var requestContextPool = sync.Pool{New: func() any { return new(RequestContext) }}

// Acquire returns the context of request ctx, which arrived at start and
// is served under route (the server span's name), and makes it ctx's
// Context until Release.
func Acquire(ctx *fasthttp.RequestCtx, start time.Time, route string) *RequestContext {
	rc := requestContextPool.Get().(*RequestContext)
	rc.rctx = ctx
	if v := ctx.Request.Header.Peek(DeadlineHeader); len(v) > 0 {
		if us, ok := decimal.ParseUint(v, 18); ok {
			rc.deadline = start.Add(time.Duration(us) * time.Microsecond)
			rc.hasDeadline = true
		}
	}
	if v := ctx.Request.Header.Peek(DeadlineAtHeader); len(v) > 0 {
		if us, ok := decimal.ParseUint(v, 18); ok {
			if at := time.UnixMicro(int64(us)); !rc.hasDeadline || at.Before(rc.deadline) {
				rc.deadline, rc.hasDeadline = at, true
			}
		}
	}
	if v := ctx.Request.Header.Peek(telemetry.TraceparentHeader); len(v) > 0 {
		rc.remote, _ = telemetry.ParseTraceparent(v)
	}
	if t := telemetry.Active(); t != nil && (rc.remote.IsSampled() || t.Root) {
		parent := context.Background()
		if rc.remote.IsValid() {
			parent = trace.ContextWithRemoteSpanContext(parent, rc.remote)
		}
		sctx, span := t.Tracer.Start(parent, route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithTimestamp(start), trace.WithAttributes(attribute.String("http.route", route)))
		if span.IsRecording() {
			rc.span, rc.spanCtx = span, sctx
		} else {
			span.End()
		}
	}
	ctx.SetUserValue(requestContextKey, rc)
	return rc
}

// End ends the server span, if any, with the response's status code.
func (rc *RequestContext) End(code int) {
	if rc.span == nil {
		return
	}
	rc.span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		rc.span.SetStatus(codes.Error, "")
	}
	rc.span.End()
}

// Release detaches rc from its request and returns it to the pool; rc
// must not be used after.
func Release(rc *RequestContext) {
	rc.rctx.RemoveUserValue(requestContextKey)
	if rc.cancel != nil {
		rc.cancel()
	}
	*rc = RequestContext{}
	requestContextPool.Put(rc)
}

// SpanContext returns the trace context to pass on to the next hop.
func (rc *RequestContext) SpanContext() trace.SpanContext {
	if rc.span != nil {
		return rc.span.SpanContext()
	}
	return rc.remote
}

// ParentContext returns a context to start child spans from.
func (rc *RequestContext) ParentContext() context.Context {
	if rc.spanCtx != nil {
		return rc.spanCtx
	}
	if rc.remote.IsValid() {
		return trace.ContextWithRemoteSpanContext(context.Background(), rc.remote)
	}
	return context.Background()
}

func (rc *RequestContext) Deadline() (time.Time, bool) { return rc.deadline, rc.hasDeadline }

func (rc *RequestContext) Done() <-chan struct{} {
	if !rc.hasDeadline {
		return rc.rctx.Done()
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.inner == nil {
		rc.inner, rc.cancel = context.WithDeadline(context.Background(), rc.deadline)
	}
	return rc.inner.Done()
}

func (rc *RequestContext) Err() error {
	rc.mu.Lock()
	inner := rc.inner
	rc.mu.Unlock()
	if inner != nil {
		return inner.Err()
	}
	if rc.hasDeadline && !time.Now().Before(rc.deadline) {
		return context.DeadlineExceeded
	}
	return rc.rctx.Err()
}

func (rc *RequestContext) Value(key any) any {
	if rc.spanCtx != nil {
		if v := rc.spanCtx.Value(key); v != nil {
			return v
		}
	}
	return rc.rctx.Value(key)
}
