package chassis

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

type requestContextKeyType struct{}

var requestContextKey requestContextKeyType

// Context returns the context of a request served by a chassis Server: its
// deadline is the caller's remaining budget (DeadlineHeader) if one was
// sent, or its absolute deadline (DeadlineAtHeader) if earlier, and it carries the request's trace, so that passing it to
// Client.Do carries both to the next hop. It is valid only until the handler
// returns; handlers must not retain it. For a RequestCtx not served by the
// chassis it returns ctx itself.
func Context(ctx *fasthttp.RequestCtx) context.Context {
	if rc, ok := ctx.UserValue(requestContextKey).(*requestContext); ok {
		return rc
	}
	return ctx
}

// requestContext is the pooled context.Context of one served request. It
// allocates nothing unless Done is called on a request with a deadline or
// the request is traced.
type requestContext struct {
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

var requestContextPool = sync.Pool{New: func() any { return new(requestContext) }}

func acquireRequestContext(ctx *fasthttp.RequestCtx, start time.Time, rs *routeStats) *requestContext {
	rc := requestContextPool.Get().(*requestContext)
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
		sctx, span := t.Tracer.Start(parent, rs.route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithTimestamp(start), trace.WithAttributes(attribute.String("http.route", rs.route)))
		if span.IsRecording() {
			rc.span, rc.spanCtx = span, sctx
		} else {
			span.End()
		}
	}
	return rc
}

func (rc *requestContext) end(code int) {
	if rc.span == nil {
		return
	}
	rc.span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		rc.span.SetStatus(codes.Error, "")
	}
	rc.span.End()
}

func releaseRequestContext(rc *requestContext) {
	if rc.cancel != nil {
		rc.cancel()
	}
	*rc = requestContext{}
	requestContextPool.Put(rc)
}

// spanContext returns the trace context to pass on to the next hop.
func (rc *requestContext) spanContext() trace.SpanContext {
	if rc.span != nil {
		return rc.span.SpanContext()
	}
	return rc.remote
}

// parentContext returns a context to start child spans from.
func (rc *requestContext) parentContext() context.Context {
	if rc.spanCtx != nil {
		return rc.spanCtx
	}
	if rc.remote.IsValid() {
		return trace.ContextWithRemoteSpanContext(context.Background(), rc.remote)
	}
	return context.Background()
}

func (rc *requestContext) Deadline() (time.Time, bool) { return rc.deadline, rc.hasDeadline }

func (rc *requestContext) Done() <-chan struct{} {
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

func (rc *requestContext) Err() error {
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

func (rc *requestContext) Value(key any) any {
	if rc.spanCtx != nil {
		if v := rc.spanCtx.Value(key); v != nil {
			return v
		}
	}
	return rc.rctx.Value(key)
}
