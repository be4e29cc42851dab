// Package server is the HTTP/1.1 server every chassis service runs
// (fasthttp): the service's handler plus /healthz, /readyz and /metrics,
// a limit on requests in flight, a body size limit and graceful shutdown.
// Handlers get their request's context, deadline and trace included, from
// hop.Context.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/chf-testbed/testbed/chassis/hop"
	"github.com/chf-testbed/testbed/chassis/logthrottle"
	"github.com/chf-testbed/testbed/chassis/probe"
	"github.com/chf-testbed/testbed/chassis/route"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// Default limits of Config.
const (
	DefaultMaxInFlight = 4096
	DefaultMaxBodySize = 64 << 10
)

// ErrStarted is returned when Start or ServeListener is called twice.
var ErrStarted = errors.New("chassis: server already started")

// Config configures a Server.
type Config struct {
	Service     string                          // "cgw", "ocp", "abm": logs and metrics
	Listen      string                          // host:port; ":0" allowed
	Handler     fasthttp.RequestHandler         // app routes; chassis itself serves /healthz /readyz /metrics
	Ready       func(ctx context.Context) error // dependency check for /readyz; nil = ready
	MaxInFlight int                             // requests beyond it get 503 (0 = default 4096)
	MaxBodySize int                             // 0 = default 64 KiB; larger bodies get 413
	// TLS, when set, makes Start serve TLS (chassis/tlsconfig builds it);
	// ServeListener serves whatever listener it is given.
	TLS *tls.Config

	// Route maps a request path to a bounded route label for metrics
	// (optional). The default keeps path segments and replaces identifiers
	// (segments with a '.', '@' or more than four digits) by "{id}".
	Route func(path []byte) string
	// Refuse, when set, writes the answers the chassis itself refuses a
	// request with (status 413 over MaxBodySize, 503 over MaxInFlight,
	// 400 for a request fasthttp cannot parse), e.g. as the service's
	// ProblemDetails; the chassis adds Retry-After and hop.OverloadHeader to
	// a 503. Nil: a plain-text answer.
	Refuse func(ctx *fasthttp.RequestCtx, status int)
	// Logger defaults to slog.Default() with a "service" attribute.
	Logger *slog.Logger
}

// Server is the HTTP/1.1 server every service runs: the app's handler plus
// /healthz, /readyz and /metrics, an in-flight limit, a body size limit and
// graceful shutdown. Safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	srv      *fasthttp.Server
	routes   *route.Table
	reg      metric.Registration
	metricsH fasthttp.RequestHandler
	inflight atomic.Int64
	draining atomic.Bool

	mu      sync.Mutex
	started bool
	ln      net.Listener
	addr    string
	served  chan struct{}
}

// New validates cfg and returns a Server that is not yet listening.
func New(cfg Config) (*Server, error) {
	if cfg.Service == "" {
		return nil, errors.New("chassis: Config.Service is empty")
	}
	if cfg.Handler == nil {
		return nil, errors.New("chassis: Config.Handler is nil")
	}
	if cfg.MaxInFlight < 0 || cfg.MaxBodySize < 0 {
		return nil, errors.New("chassis: Config.MaxInFlight and MaxBodySize must not be negative")
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxBodySize == 0 {
		cfg.MaxBodySize = DefaultMaxBodySize
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default().With("service", cfg.Service)
	}
	s := &Server{cfg: cfg, log: log, served: make(chan struct{})}
	in := getInstruments()
	s.routes = route.NewTable(in.serverDuration, attribute.String("component", cfg.Service))
	svcAttr := metric.WithAttributeSet(attribute.NewSet(attribute.String("component", cfg.Service)))
	reg, err := telemetry.Meter().RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(in.serverActive, s.inflight.Load(), svcAttr)
		return nil
	}, in.serverActive)
	if err != nil {
		return nil, fmt.Errorf("cannot register metrics of %s server: %w", cfg.Service, err)
	}
	s.reg = reg
	s.metricsH = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(telemetry.Registry(), promhttp.HandlerOpts{}))
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		Name:               "chf-" + cfg.Service,
		MaxRequestBodySize: cfg.MaxBodySize,
		// Connections beyond MaxInFlight are still accepted; requests
		// beyond it are answered 503 at once (never queued).
		Concurrency:                   256 * 1024,
		ReadTimeout:                   2 * time.Minute,
		IdleTimeout:                   2 * time.Minute,
		CloseOnShutdown:               true,
		NoDefaultDate:                 true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: false,
		ErrorHandler:                  s.errorHandler,
		Logger:                        slogFasthttpLogger{log, logthrottle.New(time.Second)},
	}
	return s, nil
}

// Start listens on cfg.Listen and serves in the background. It returns once
// the listener is open (Addr is then valid).
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", s.cfg.Listen, err)
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	if err := s.setListener(ln); err != nil {
		ln.Close()
		return err
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil {
			s.log.Error("server stopped", "err", err)
		}
	}()
	s.log.Info("listening", "addr", s.Addr())
	return nil
}

// ServeListener serves on ln until Shutdown; it blocks (unlike Start).
func (s *Server) ServeListener(ln net.Listener) error {
	if err := s.setListener(ln); err != nil {
		return err
	}
	if err := s.srv.Serve(ln); err != nil {
		return fmt.Errorf("cannot serve on %s: %w", ln.Addr(), err)
	}
	return nil
}

func (s *Server) setListener(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	s.started = true
	s.ln = ln
	s.addr = ln.Addr().String()
	return nil
}

// Addr returns the actual listening address (host:port), or "" before
// Start/ServeListener.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops accepting connections, makes /readyz fail, and waits until
// in-flight requests have completed or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	err := s.srv.ShutdownWithContext(ctx)
	if err != nil {
		return fmt.Errorf("cannot shut down %s server: %w", s.cfg.Service, err)
	}
	if s.reg != nil {
		s.reg.Unregister() //nolint:errcheck // only fails for foreign registrations
	}
	return nil
}

// InFlight returns the number of requests being handled.
func (s *Server) InFlight() int64 { return s.inflight.Load() }

// Handler returns the chassis request handler (health, metrics, limits,
// then the app's handler), for callers that serve it through another front,
// such as an h2c adapter.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// refuse answers a request the chassis refuses itself.
func (s *Server) refuse(ctx *fasthttp.RequestCtx, status int, msg string) {
	if s.cfg.Refuse != nil {
		s.cfg.Refuse(ctx, status)
		return
	}
	ctx.Error(msg, status)
}

// rawPath is the path of a request as received (no decoding, no dot
// segments removed, no query), so that a probe is only ever its exact
// path.
func rawPath(ctx *fasthttp.RequestCtx) []byte {
	p := ctx.Request.Header.RequestURI()
	for i, c := range p {
		if c == '?' {
			return p[:i]
		}
	}
	return p
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if path := rawPath(ctx); len(path) > 3 && path[0] == '/' && ctx.IsGet() {
		switch string(path) {
		case "/healthz":
			ctx.SetContentType(probe.ContentType)
			ctx.SetBodyString(probe.Healthy)
			return
		case "/readyz":
			s.serveReady(ctx)
			return
		case "/metrics":
			s.serveMetrics(ctx)
			return
		}
	}
	start := time.Now()
	path := ctx.Path()
	rs := s.route(path)
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if n > int64(s.cfg.MaxInFlight) {
		s.refuse(ctx, fasthttp.StatusServiceUnavailable, "overloaded\n")
		ctx.Response.Header.Set(hop.OverloadHeader, "1")
		ctx.Response.Header.Set("Retry-After", "1")
		rs.Observe(fasthttp.StatusServiceUnavailable, time.Since(start))
		return
	}
	if len(ctx.Request.Body()) > s.cfg.MaxBodySize {
		s.refuse(ctx, fasthttp.StatusRequestEntityTooLarge, "request body too large\n")
		rs.Observe(fasthttp.StatusRequestEntityTooLarge, time.Since(start))
		return
	}
	rc := hop.Acquire(ctx, start, rs.Route)
	s.cfg.Handler(ctx)
	code := ctx.Response.StatusCode()
	rc.End(code)
	hop.Release(rc)
	rs.Observe(code, time.Since(start))
}

// route returns the metrics of path's route.
func (s *Server) route(path []byte) *route.Stats {
	var buf [128]byte
	var key []byte
	if s.cfg.Route != nil {
		key = append(buf[:0], s.cfg.Route(path)...)
	} else {
		key = route.Append(buf[:0], path)
	}
	return s.routes.Lookup(key)
}

func (s *Server) serveReady(ctx *fasthttp.RequestCtx) {
	status, body := probe.Ready(s.draining.Load(), s.cfg.Ready)
	ctx.SetContentType(probe.ContentType)
	ctx.SetStatusCode(status)
	ctx.SetBodyString(body)
}

func (s *Server) serveMetrics(ctx *fasthttp.RequestCtx) {
	s.metricsH(ctx)
}

func (s *Server) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		s.refuse(ctx, fasthttp.StatusRequestEntityTooLarge, "request body too large\n")
		s.route(ctx.Path()).Observe(fasthttp.StatusRequestEntityTooLarge, 0)
		return
	}
	s.refuse(ctx, fasthttp.StatusBadRequest, "bad request\n")
}

// slogFasthttpLogger writes fasthttp's connection errors through slog, at
// most one line per second per message format.
type slogFasthttpLogger struct {
	log   *slog.Logger
	limit *logthrottle.Throttle
}

func (l slogFasthttpLogger) Printf(format string, args ...any) {
	if n, ok := l.limit.Allow(format); ok {
		l.log.Warn(fmt.Sprintf(format, args...), "count", n)
	}
}
