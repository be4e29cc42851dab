package peer

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chf-testbed/testbed/chassis/balancer"
	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/hop"
	"github.com/chf-testbed/testbed/chassis/server"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// TestRetryBudgetExhaustion: with a budget of 3 retries and 10% of calls,
// ten failing idempotent calls make exactly 3 retries.
func TestRetryBudgetExhaustion(t *testing.T) {
	var hits atomic.Int64
	h := func(ctx *fasthttp.RequestCtx) { hits.Add(1); ctx.Error("down", 503) }
	a := startServer(t, server.Config{Handler: h})
	b := startServer(t, server.Config{Handler: h})
	c := newClient(t, Config{
		Source:   discovery.Static(a.Addr(), b.Addr()),
		Balancer: balancer.Config{ConsecutiveFailures: -1},
		Retry:    RetryConfig{MaxAttempts: 3, Idempotent: true, MinBudget: 3, BudgetRatio: 0.1},
	})
	for i := 0; i < 10; i++ {
		var se *StatusError
		if _, err := c.Do(context.Background(), "/x", nil, nil); !errors.As(err, &se) || se.Code != 503 {
			t.Fatalf("call %d err = %v", i, err)
		}
	}
	// 3 tokens at start, +0.1 per call: calls 1-3 retry once each (the
	// retry fails too, and the next retry finds the budget spent only from
	// call 2 on), so the count is fixed by the token arithmetic below.
	if got := hits.Load(); got != 13 {
		t.Fatalf("server hits = %d, want 10 calls + 3 retries", got)
	}
	if d := c.retriesDenied.Load(); d == 0 {
		t.Fatalf("no retry was denied by the budget")
	}
}

// TestRetryOnlyWhenSafe: a plain 503 from a non-idempotent peer is not
// retried; the chassis' overload 503 (request never processed) is.
func TestRetryOnlyWhenSafe(t *testing.T) {
	var plain, overload atomic.Int64
	p := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) { plain.Add(1); ctx.Error("busy", 503) }})
	c := newClient(t, Config{Source: discovery.Static(p.Addr()), Balancer: balancer.Config{ConsecutiveFailures: -1}})
	if _, err := c.Do(context.Background(), "/x", nil, nil); err == nil || plain.Load() != 1 {
		t.Fatalf("plain 503: err=%v hits=%d, want one attempt", err, plain.Load())
	}
	o := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) {
		overload.Add(1)
		ctx.Error("overloaded", 503)
		ctx.Response.Header.Set(hop.OverloadHeader, "1")
	}})
	c2 := newClient(t, Config{Source: discovery.Static(o.Addr()), Balancer: balancer.Config{ConsecutiveFailures: -1}})
	if _, err := c2.Do(context.Background(), "/x", nil, nil); err == nil || overload.Load() != 2 {
		t.Fatalf("overload 503: err=%v hits=%d, want two attempts", err, overload.Load())
	}
}

// TestDeadlineAcrossHops: a budget sent to A bounds A's call to B, and B
// sees a smaller budget.
func TestDeadlineAcrossHops(t *testing.T) {
	var seen atomic.Int64
	release := make(chan struct{})
	b := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) {
		us, _ := strconv.ParseInt(string(ctx.Request.Header.Peek(hop.DeadlineHeader)), 10, 64)
		seen.Store(us)
		select {
		case <-release:
		case <-time.After(2 * time.Second):
		}
	}})
	defer close(release)
	cb := newClient(t, Config{Source: discovery.Static(b.Addr()), Timeout: 5 * time.Second})
	a := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) {
		if _, err := cb.Do(hop.Context(ctx), "/b", nil, nil); err != nil {
			ctx.Error(err.Error(), 504)
		}
	}})
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + a.Addr() + "/a")
	req.Header.SetMethod("POST")
	req.Header.Set(hop.DeadlineHeader, "100000") // 100 ms
	start := time.Now()
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); resp.StatusCode() != 504 || el > time.Second {
		t.Fatalf("A answered %d after %v; want 504 within the 100ms budget", resp.StatusCode(), el)
	}
	if us := seen.Load(); us <= 0 || us > 100000 {
		t.Fatalf("B saw a budget of %dµs, want (0, 100000]", us)
	}
}

// TestTraceAcrossThreeServices: a request through A → B → C keeps one
// trace id, with client and server spans chained.
func TestTraceAcrossThreeServices(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(1))))
	telemetry.SetTracerProvider(tp, true)
	t.Cleanup(func() { telemetry.SetTracerProvider(nil, false) })

	var cTraceparent atomic.Value
	c := startServer(t, server.Config{Service: "abm", Handler: func(ctx *fasthttp.RequestCtx) {
		cTraceparent.Store(string(ctx.Request.Header.Peek("traceparent")))
		ctx.SetBodyString("c")
	}})
	toC := newClient(t, Config{Peer: "abm", Source: discovery.Static(c.Addr())})
	b := startServer(t, server.Config{Service: "ocp", Handler: func(ctx *fasthttp.RequestCtx) {
		out, err := toC.Do(hop.Context(ctx), "/abm/v1/x", nil, nil)
		if err != nil {
			ctx.Error(err.Error(), 502)
			return
		}
		ctx.SetBody(append(out, 'b'))
	}})
	toB := newClient(t, Config{Peer: "ocp", Source: discovery.Static(b.Addr())})
	a := startServer(t, server.Config{Service: "cgw", Handler: func(ctx *fasthttp.RequestCtx) {
		out, err := toB.Do(hop.Context(ctx), "/ocp/v1/charge", nil, nil)
		if err != nil {
			ctx.Error(err.Error(), 502)
			return
		}
		ctx.SetBody(append(out, 'a'))
	}})
	code, body, _ := httpDo(t, "POST", "http://"+a.Addr()+"/nchf", nil)
	if code != 200 || body != "cba" {
		t.Fatalf("A = %d %q", code, body)
	}
	spans := exp.GetSpans()
	if len(spans) != 5 {
		t.Fatalf("got %d spans, want 3 server + 2 client: %v", len(spans), spans)
	}
	tid := spans[0].SpanContext.TraceID()
	kinds := map[trace.SpanKind]int{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != tid {
			t.Errorf("span %q has trace id %s, want %s", s.Name, s.SpanContext.TraceID(), tid)
		}
		kinds[s.SpanKind]++
	}
	if kinds[trace.SpanKindServer] != 3 || kinds[trace.SpanKindClient] != 2 {
		t.Errorf("span kinds = %v", kinds)
	}
	got, ok := telemetry.ParseTraceparent([]byte(cTraceparent.Load().(string)))
	if !ok || got.TraceID() != tid || !got.IsSampled() {
		t.Errorf("C received traceparent %q, want trace %s sampled", cTraceparent.Load(), tid)
	}

	// Tracing off: an incoming traceparent still reaches C unchanged.
	telemetry.SetTracerProvider(nil, false)
	const tp0 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + a.Addr() + "/nchf")
	req.Header.SetMethod("POST")
	req.Header.Set("traceparent", tp0)
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("A with traceparent: %v %d", err, resp.StatusCode())
	}
	if got := cTraceparent.Load().(string); got != tp0 {
		t.Errorf("C received %q with tracing off, want %q passed through", got, tp0)
	}
}

type staleSource struct {
	discovery.HealthState
}

func (s *staleSource) Run(ctx context.Context, update func([]discovery.Endpoint)) error {
	update([]discovery.Endpoint{{Addr: "127.0.0.1:1"}})
	s.Report(nil, time.Now().Add(-time.Minute))
	s.Report(errors.New("apiserver down"), time.Now())
	<-ctx.Done()
	return nil
}

// TestStalenessMetric: a failing source keeps its endpoints and /metrics
// says how stale they are.
func TestStalenessMetric(t *testing.T) {
	src := &staleSource{}
	c := newClient(t, Config{Peer: "stale-peer", Source: src})
	waitFor(t, func() bool { return len(c.Endpoints()) == 1 && c.Staleness() >= time.Minute })
	s := startServer(t, server.Config{Handler: echoHandler})
	_, body, _ := httpDo(t, "GET", "http://"+s.Addr()+"/metrics", nil)
	for _, want := range []string{`chf_discovery_staleness_seconds{peer_service="stale-peer"} 6`, `chf_client_endpoints{peer_service="stale-peer",state="healthy"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestRequestContext: the handler's context carries the caller's budget as
// its deadline and its Done channel closes when the budget runs out.
func TestRequestContext(t *testing.T) {
	type result struct {
		hasDeadline bool
		left        time.Duration
		doneErr     error
	}
	res := make(chan result, 1)
	s := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) {
		c := hop.Context(ctx)
		d, ok := c.Deadline()
		r := result{hasDeadline: ok, left: time.Until(d)}
		if ok {
			select {
			case <-c.Done():
				r.doneErr = c.Err()
			case <-time.After(2 * time.Second):
			}
		}
		res <- r
	}})
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + s.Addr() + "/x")
	req.Header.SetMethod("POST")
	req.Header.Set(hop.DeadlineHeader, "50000")
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if !r.hasDeadline || r.left <= 0 || r.left > 50*time.Millisecond || !errors.Is(r.doneErr, context.DeadlineExceeded) {
		t.Fatalf("request context = %+v", r)
	}
	// The absolute deadline wins when it is earlier: a request that waited
	// in a paused server beyond its caller's deadline has none left.
	req.Header.Set(hop.DeadlineHeader, "10000000") // 10 s
	req.Header.Set(hop.DeadlineAtHeader, strconv.FormatInt(time.Now().Add(-time.Second).UnixMicro(), 10))
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := <-res; !r.hasDeadline || r.left > -900*time.Millisecond || !errors.Is(r.doneErr, context.DeadlineExceeded) {
		t.Fatalf("with an absolute deadline 1s ago: %+v", r)
	}
	req.Header.Set(hop.DeadlineAtHeader, strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10))
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := <-res; !r.hasDeadline || r.left > 10*time.Second || r.left < 9*time.Second {
		t.Fatalf("with a later absolute deadline the budget must bound: %+v", r)
	}
	req.Header.Del(hop.DeadlineHeader)
	req.Header.Del(hop.DeadlineAtHeader)
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.hasDeadline {
		t.Fatalf("deadline without a budget header")
	}
}

// TestDoIdempotentRetriesLostConnections: an endpoint that reads the
// request and drops the connection without answering (a peer killed
// mid-call) fails plain calls to a non-idempotent peer; DoIdempotent
// repeats them on the other endpoint with the same body, so every one is
// answered.
func TestDoIdempotentRetriesLostConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var dropped atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				for {
					if _, err := conn.Read(buf); err != nil {
						break
					}
					dropped.Add(1)
					conn.Close()
				}
			}()
		}
	}()
	var bodies atomic.Int64
	ok := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.PostBody()) == "same" {
			bodies.Add(1)
		}
		ctx.SetBodyString("ok")
	}})
	c := newClient(t, Config{
		Source:   discovery.Static(ln.Addr().String(), ok.Addr()),
		Balancer: balancer.Config{ConsecutiveFailures: -1},
		Retry:    RetryConfig{MinBudget: 100},
	})
	failed := 0
	for range 40 {
		if _, err := c.Do(context.Background(), "/x", []byte("same"), nil); err != nil {
			failed++
		}
	}
	if failed == 0 || dropped.Load() == 0 {
		t.Fatalf("plain calls: %d failed, %d dropped; want some lost with the connection", failed, dropped.Load())
	}
	before := dropped.Load()
	for i := range 40 {
		out, err := c.DoIdempotent(context.Background(), "/x", []byte("same"), nil)
		if err != nil || string(out) != "ok" {
			t.Fatalf("idempotent call %d: %q %v", i, out, err)
		}
	}
	if dropped.Load() == before {
		t.Fatalf("no idempotent call reached the dropping endpoint: the retry is untested")
	}
}

// TestRetryKeepsTheDoubt: when an attempt that may have been processed (the
// connection lost after the request was sent) is retried and the retry is
// refused for overload, the call fails with the first attempt's error, not
// as an overload: the caller must not take it as refused (not charged).
func TestRetryKeepsTheDoubt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				conn.Read(buf)
				conn.Close()
			}()
		}
	}()
	busy := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.Error("overloaded", 503)
		ctx.Response.Header.Set(hop.OverloadHeader, "1")
	}})
	c := newClient(t, Config{
		Source:   discovery.Static(ln.Addr().String(), busy.Addr()),
		Balancer: balancer.Config{ConsecutiveFailures: -1},
		Retry:    RetryConfig{MinBudget: 100},
	})
	// Every call tries both endpoints (an overload refusal is always
	// retried): whichever came first, the dropped attempt leaves it in
	// doubt.
	for i := range 40 {
		_, err := c.DoIdempotent(context.Background(), "/x", []byte("b"), nil)
		if err == nil || IsOverload(err) {
			t.Fatalf("call %d: err %v, want the lost connection's error (in doubt), not an overload", i, err)
		}
	}
}
