package cgw

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"go.opentelemetry.io/otel/trace"

	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/chassis/hop"
	"github.com/chf-testbed/testbed/chassis/oauth2"
	"github.com/chf-testbed/testbed/chassis/server"
	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/chassis/tlsconfig"
)

// Config configures a Server.
type Config struct {
	// Listen is host:port (":0" allowed) for both HTTP/2 (prior knowledge)
	// and HTTP/1.1.
	Listen string
	// Handler configures the Nchf/balance core (Charger required).
	Handler HandlerConfig
	// Ready reports whether the charging core is reachable (/readyz); nil
	// means always ready.
	Ready func(ctx context.Context) error
	// TLS, when set, serves TLS: ALPN "h2" goes to the HTTP/2 front, all
	// else to HTTP/1.1 (tlsconfig.Config.Server with "h2", "http/1.1").
	TLS *tls.Config
	// Tokens, when set, checks the OAuth2 access token of every Nchf and
	// balance request (401/403 ProblemDetails when refused).
	Tokens *oauth2.Verifier
	// Advertise is the apiRoot of the Location header
	// (HandlerConfig.Advertise); empty = http(s)://<listener address>.
	Advertise string
	// Logger (nil = slog.Default()).
	Logger *slog.Logger
}

// Server serves the CGW on one port: connections that open with the
// HTTP/2 client preface go to the HTTP/2 front, all others to the
// chassis's HTTP/1.1 (fasthttp) server, which also serves /healthz,
// /readyz and /metrics. Both call the same Handler.
type Server struct {
	cfg   Config
	h     *Handler
	log   *slog.Logger
	http1 *server.Server
	h2    *h2c.Server

	ln     net.Listener
	h1ln   net.Listener
	h2ln   net.Listener
	served sync.WaitGroup
}

// NewServer builds a Server that is not yet listening.
func NewServer(cfg Config) (*Server, error) {
	hc := cfg.Handler
	hc.Tokens, hc.Ready = cfg.Tokens, cfg.Ready
	if cfg.Advertise != "" {
		hc.Advertise = cfg.Advertise
	}
	h, err := NewHandler(hc)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default().With("service", "cgw")
	}
	s := &Server{cfg: cfg, h: h, log: log}
	// The chassis limits are a backstop: the Handler answers 413 and 503
	// with ProblemDetails first, below these.
	s.http1, err = server.New(server.Config{
		Service:     "cgw",
		Listen:      cfg.Listen,
		Handler:     s.serveFast,
		Ready:       cfg.Ready,
		MaxInFlight: 2*int(h.maxInFlight) + 64,
		MaxBodySize: 4*h.maxBody + 4096,
		Refuse:      h.refuseFast,
		Logger:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot create HTTP/1.1 server: %w", err)
	}
	s.h2 = &h2c.Server{
		Handler:              s.serveH2,
		MaxConcurrentStreams: 256,
		MaxBodySize:          4*h.maxBody + 4096,
		RejectBody:           h.rejectBody,
		Logger:               log,
	}
	return s, nil
}

// Handler returns the protocol-neutral core the fronts call.
func (s *Server) Handler() *Handler { return s.h }

// Start listens on cfg.Listen and serves in the background; it returns
// once the listener is open.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	if len(s.h.base) == 0 {
		// Before serving: no request reads it yet.
		s.h.base = []byte(defaultAdvertise(ln.Addr().String(), s.cfg.TLS != nil))
	}
	protocols := "h2c,http/1.1"
	if s.cfg.TLS != nil {
		s.h2ln, s.h1ln = tlsconfig.SplitALPN(ln, s.cfg.TLS)
		protocols = "TLS: h2,http/1.1"
	} else {
		s.h2ln, s.h1ln = h2c.Sniff(ln)
	}
	s.served.Add(2)
	go func() {
		defer s.served.Done()
		if err := s.http1.ServeListener(s.h1ln); err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Error("HTTP/1.1 front stopped", "err", err)
		}
	}()
	go func() {
		defer s.served.Done()
		if err := s.h2.Serve(s.h2ln); err != nil && !errors.Is(err, h2c.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("HTTP/2 front stopped", "err", err)
		}
	}()
	s.log.Info("listening", "addr", s.Addr(), "protocols", protocols, "oauth2", s.cfg.Tokens != nil, "advertise", string(s.h.base))
	return nil
}

// Addr is the actual listening address (host:port), "" before Start.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops accepting connections and waits for in-flight requests
// to complete or ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.ln == nil {
		return nil
	}
	var errs []error
	if err := s.http1.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	s.h1ln.Close()
	s.h2ln.Close()
	if err := s.h2.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	done := make(chan struct{})
	go func() { s.served.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// serveFast is the HTTP/1.1 adapter.
func (s *Server) serveFast(ctx *fasthttp.RequestCtx) {
	x := s.h.Acquire()
	// The chassis context carries the trace context and the chassis
	// budget header; a 3gpp-Sbi-Max-Rsp-Time bounds it too.
	parent := hop.Context(ctx)
	if tp := ctx.Request.Header.Peek(telemetry.TraceparentHeader); len(tp) > 0 && !trace.SpanContextFromContext(parent).IsValid() {
		// Not traced here: pass the caller's trace context on as is.
		if sc, ok := telemetry.ParseTraceparent(tp); ok {
			parent = trace.ContextWithRemoteSpanContext(parent, sc)
		}
	}
	rctx := x.Context(parent, ctx.Time(), ctx.Request.Header.Peek(MaxRspTimeHeader))
	x.Authorization = ctx.Request.Header.Peek("Authorization")
	x.RequestType = ctx.Request.Header.ContentType()
	x.RequestEncoding = ctx.Request.Header.Peek("Content-Encoding")
	x.IdempotencyKey = ctx.Request.Header.Peek("Idempotency-Key")
	// The request-target as received: the Handler routes it (not
	// fasthttp's decoded and cleaned Path).
	s.h.Serve(rctx, x, ctx.Method(), ctx.Request.Header.RequestURI(), ctx.PostBody())
	writeFast(ctx, x)
	observe(frontHTTP1, x, ctx.Time())
	s.h.Release(x)
}

// writeFast writes x's answer to ctx.
func writeFast(ctx *fasthttp.RequestCtx, x *Exchange) {
	ctx.SetStatusCode(x.Status)
	if x.ContentType != "" {
		ctx.SetContentType(x.ContentType)
	}
	h := &ctx.Response.Header
	if len(x.Location) > 0 {
		h.SetBytesV("Location", x.Location)
	}
	if x.RetryAfter {
		h.Set("Retry-After", "1")
	}
	if x.HasCharged {
		var num [20]byte
		h.SetBytesV(ChargedHeader, strconv.AppendInt(num[:0], x.Charged, 10))
	}
	for _, kv := range x.refusalHeaders() {
		if kv[1] != "" {
			h.Set(kv[0], kv[1])
		}
	}
	ctx.SetBody(x.Body)
}

// serveH2 is the HTTP/2 adapter (chassis/h2c).
func (s *Server) serveH2(w *h2c.Response, r *h2c.Request) {
	x := s.h.Acquire()
	parent := context.Background()
	if tp := r.Header(telemetry.TraceparentHeader); len(tp) > 0 {
		if sc, ok := telemetry.ParseTraceparent(tp); ok {
			parent = trace.ContextWithRemoteSpanContext(parent, sc)
		}
	}
	start := time.Now()
	rctx := x.Context(parent, start, r.Header("3gpp-sbi-max-rsp-time"))
	x.Authorization = r.Header("authorization")
	x.RequestType = r.Header("content-type")
	x.RequestEncoding = r.Header("content-encoding")
	x.IdempotencyKey = r.Header("idempotency-key")
	s.h.Serve(rctx, x, r.Method, r.Path, r.Body)
	w.SetStatus(x.Status)
	if x.ContentType != "" {
		w.AddHeader("content-type", x.ContentType)
	}
	if len(x.Location) > 0 {
		w.AddHeaderBytes("location", x.Location)
	}
	if x.HasCharged {
		w.AddHeaderInt("x-chf-charged", x.Charged)
	}
	if x.RetryAfter {
		w.AddHeader("retry-after", "1")
	}
	for _, kv := range x.refusalHeaders() {
		if kv[1] != "" {
			w.AddHeader(kv[0], kv[1])
		}
	}
	w.Body = append(w.Body, x.Body...)
	observe(frontH2C, x, start)
	s.h.Release(x)
}
