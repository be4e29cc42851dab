// Package peer is the client a service calls a named peer service with,
// pod to pod: endpoints from a discovery source, balanced by a policy of
// chassis/balancer with passive outlier ejection, per-call deadlines
// carried to the next hop (chassis/hop), retries only where safe and
// within a budget, traces and metrics. Flags are a service's flags for
// one peer. Batching lives in chassis/batcher and the batched internal
// RPC in chassis/rpc, both above this package.
package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/chf-testbed/testbed/chassis/balancer"
	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/hop"
	"github.com/chf-testbed/testbed/chassis/route"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// Client defaults.
const (
	DefaultTimeout             = 2 * time.Second
	DefaultMaxConnsPerEndpoint = 512
)

var (
	// ErrNoEndpoints is returned when the peer has no known endpoint before
	// the call's deadline.
	ErrNoEndpoints = errors.New("chassis: no endpoints for peer")
	// ErrClosed is returned by Do after Close.
	ErrClosed = errors.New("chassis: client closed")
)

// StatusError is returned by Client.Do when the peer answers with a non-2xx
// status.
type StatusError struct {
	Peer string // peer service name
	Addr string // endpoint that answered
	Code int    // HTTP status code
	Body []byte // response body (at most 512 bytes)
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("chassis: peer %s at %s answered %d: %s", e.Peer, e.Addr, e.Code, e.Body)
}

// Config configures a Client.
type Config struct {
	Peer                string           // peer service name (metrics/logs)
	Source              discovery.Source // where endpoints come from
	Timeout             time.Duration    // per-call deadline when ctx has none (default 2s)
	MaxConnsPerEndpoint int              // default 512
	// TLS, when set, makes the calls HTTPS with this configuration
	// (chassis/tlsconfig builds it: mTLS, reloaded certificates).
	TLS *tls.Config

	// Balancer configures endpoint picking and outlier ejection (the zero
	// value is power of two choices with default ejection).
	Balancer balancer.Config
	// ContentType of request bodies (default "application/octet-stream").
	ContentType string
	// Retry allows retrying a failed call on another endpoint when it is
	// safe; see RetryConfig. The zero value retries only calls that were
	// never sent (connection refused, pool exhausted, overload rejection).
	Retry RetryConfig
	// Logger defaults to slog.Default() with a "peer" attribute.
	Logger *slog.Logger
}

// RetryConfig bounds retries.
type RetryConfig struct {
	// MaxAttempts per call, first one included (default 2; 1 disables
	// retries).
	MaxAttempts int
	// Idempotent declares that the peer's operations may be repeated (for
	// example the CHF's invocation sequence numbers make them so): then
	// calls that failed after being sent (transport error, 502, 503, 504)
	// are retried too. Otherwise only calls known not to have reached the
	// peer's handler are.
	Idempotent bool
	// BudgetRatio is the share of calls that may be retries (default 0.1);
	// MinBudget retries are always available at start (default 10).
	BudgetRatio float64
	MinBudget   int
}

type endpoint = balancer.Endpoint[*fasthttp.HostClient]

// Client calls the endpoints of one peer service over pooled fasthttp
// connections. It is safe for concurrent use.
type Client struct {
	cfg        Config
	log        *slog.Logger
	bal        *balancer.Balancer[*fasthttp.HostClient]
	budget     retryBudget
	routes     *route.Table
	peerOpt    []metric.AddOption // peer attribute, pre-built
	reg        metric.Registration
	lastUpdate atomic.Int64 // Unix ns of the last endpoint set

	ready         chan struct{} // closed at the first endpoint set
	readyOnce     sync.Once
	cancel        context.CancelFunc
	done          chan struct{}
	byAddr        map[string]*endpoint // owned by the update goroutine
	retriesDenied atomic.Uint64
	closeMu       sync.RWMutex
	closed        bool
}

// New starts watching cfg.Source and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.Peer == "" {
		return nil, errors.New("chassis: Config.Peer is empty")
	}
	if cfg.Source == nil {
		return nil, fmt.Errorf("chassis: Config.Source for peer %s is nil", cfg.Peer)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxConnsPerEndpoint <= 0 {
		cfg.MaxConnsPerEndpoint = DefaultMaxConnsPerEndpoint
	}
	if cfg.ContentType == "" {
		cfg.ContentType = "application/octet-stream"
	}
	if cfg.Retry.MaxAttempts <= 0 {
		cfg.Retry.MaxAttempts = 2
	}
	if cfg.Retry.BudgetRatio <= 0 {
		cfg.Retry.BudgetRatio = 0.1
	}
	if cfg.Retry.MinBudget <= 0 {
		cfg.Retry.MinBudget = 10
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default().With("peer", cfg.Peer)
	}
	c := &Client{
		cfg:    cfg,
		log:    log,
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
		byAddr: map[string]*endpoint{},
	}
	in := getInstruments()
	peerAttr := attribute.String("peer.service", cfg.Peer)
	c.routes = route.NewTable(in.clientDuration, peerAttr)
	peerSet := attribute.NewSet(peerAttr)
	c.peerOpt = []metric.AddOption{metric.WithAttributeSet(peerSet)}
	bcfg := cfg.Balancer
	userEject := bcfg.OnEject
	bcfg.OnEject = func(addr string) {
		in.ejections.Add(context.Background(), 1, c.peerOpt...)
		c.log.Warn("endpoint ejected", "addr", addr)
		if userEject != nil {
			userEject(addr)
		}
	}
	bal, err := balancer.New[*fasthttp.HostClient](bcfg)
	if err != nil {
		return nil, fmt.Errorf("cannot create balancer for peer %s: %w", cfg.Peer, err)
	}
	c.bal = bal
	c.budget.init(cfg.Retry.BudgetRatio, cfg.Retry.MinBudget)
	obsPeer := metric.WithAttributeSet(peerSet)
	obsHealthy := metric.WithAttributeSet(attribute.NewSet(peerAttr, attribute.String("state", "healthy")))
	obsEjected := metric.WithAttributeSet(attribute.NewSet(peerAttr, attribute.String("state", "ejected")))
	c.reg, err = telemetry.Meter().RegisterCallback(func(_ context.Context, o metric.Observer) error {
		eps := c.bal.Endpoints()
		var active int64
		for _, e := range eps {
			active += e.Outstanding()
		}
		ej := int64(c.bal.Ejected())
		o.ObserveInt64(in.clientActive, active, obsPeer)
		o.ObserveInt64(in.endpoints, int64(len(eps))-ej, obsHealthy)
		o.ObserveInt64(in.endpoints, ej, obsEjected)
		o.ObserveFloat64(in.staleness, c.Staleness().Seconds(), obsPeer)
		return nil
	}, in.clientActive, in.endpoints, in.staleness)
	if err != nil {
		return nil, fmt.Errorf("cannot register metrics of peer %s: %w", cfg.Peer, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.watch(ctx)
	return c, nil
}

func (c *Client) watch(ctx context.Context) {
	defer close(c.done)
	if err := c.cfg.Source.Run(ctx, c.update); err != nil && ctx.Err() == nil {
		c.log.Error("discovery stopped", "err", err)
	}
}

// update installs a new endpoint set; called by the source, one at a time.
func (c *Client) update(eps []discovery.Endpoint) {
	next := make([]*endpoint, 0, len(eps))
	keep := make(map[string]*endpoint, len(eps))
	for _, e := range eps {
		if _, dup := keep[e.Addr]; dup {
			continue
		}
		ep := c.byAddr[e.Addr]
		if ep == nil {
			ep = balancer.NewEndpoint(e.Addr, c.newHostClient(e.Addr))
		}
		keep[e.Addr] = ep
		next = append(next, ep)
	}
	c.bal.Update(next)
	for addr, ep := range c.byAddr {
		if keep[addr] == nil {
			ep.Conn.CloseIdleConnections()
		}
	}
	c.byAddr = keep
	c.lastUpdate.Store(time.Now().UnixNano())
	c.log.Info("endpoints updated", "count", len(next))
	if len(next) > 0 {
		c.readyOnce.Do(func() { close(c.ready) })
	}
}

func (c *Client) newHostClient(addr string) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                          addr,
		Name:                          "chf-chassis",
		MaxConns:                      c.cfg.MaxConnsPerEndpoint,
		MaxIdleConnDuration:           30 * time.Second,
		MaxIdemponentCallAttempts:     1, // retries are the chassis' decision
		ReadBufferSize:                16 << 10,
		WriteBufferSize:               16 << 10,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		NoDefaultUserAgentHeader:      true,
		IsTLS:                         c.cfg.TLS != nil,
		TLSConfig:                     c.cfg.TLS,
		Dial: func(a string) (net.Conn, error) {
			return fasthttp.DialTimeout(a, time.Second)
		},
	}
}

// Staleness returns how long the discovery source has been failing while
// the last known endpoint set stays in use (0 while it is healthy or does
// not report its health).
func (c *Client) Staleness() time.Duration {
	hr, ok := c.cfg.Source.(discovery.HealthReporter)
	if !ok {
		return 0
	}
	h := hr.Health()
	if !h.Failing || h.LastSuccess.IsZero() {
		return 0
	}
	return time.Since(h.LastSuccess)
}

// Endpoints returns the addresses currently in use, for diagnostics.
func (c *Client) Endpoints() []string {
	eps := c.bal.Endpoints()
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.Addr
	}
	return out
}

// Do POSTs body to path on one endpoint of the peer (least outstanding
// requests among two random choices, by default) and appends the 2xx
// response body to dst. Non-2xx → *StatusError. The deadline is ctx's, or
// Timeout from now; the remaining budget travels in hop.DeadlineHeader. body is
// not modified or retained. Do does not allocate in the steady state.
func (c *Client) Do(ctx context.Context, path string, body, dst []byte) ([]byte, error) {
	return c.do(ctx, path, body, dst, c.cfg.Retry.Idempotent)
}

// DoIdempotent is Do for a call the caller declares safe to repeat (the
// peer answers a repeat of body as it answered the first, doing nothing
// twice): a call that failed after being sent (transport error, the
// connection lost, 502, 503, 504) is retried on another endpoint, with the
// same body, within the deadline and the retry budget, as
// RetryConfig.Idempotent does for every call.
func (c *Client) DoIdempotent(ctx context.Context, path string, body, dst []byte) ([]byte, error) {
	return c.do(ctx, path, body, dst, true)
}

func (c *Client) do(ctx context.Context, path string, body, dst []byte, idempotent bool) ([]byte, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.cfg.Timeout)
	}
	c.budget.depositCall()
	start := time.Now()
	var buf [128]byte
	rs := c.routes.Lookup(route.Append(buf[:0], path))

	// Trace context: a client span when tracing is on and the call is
	// sampled, else the caller's context passed on unchanged.
	var sc trace.SpanContext
	var span trace.Span
	rc, isRC := ctx.(*hop.RequestContext)
	if isRC {
		sc = rc.SpanContext()
	} else {
		sc = trace.SpanContextFromContext(ctx)
	}
	if t := telemetry.Active(); t != nil && (sc.IsSampled() || t.Root) {
		parent := ctx
		if isRC {
			parent = rc.ParentContext()
		}
		_, sp := t.Tracer.Start(parent, rs.Route, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithTimestamp(start), trace.WithAttributes(attribute.String("peer.service", c.cfg.Peer)))
		if sp.IsRecording() {
			span, sc = sp, sp.SpanContext()
		} else {
			sp.End()
		}
	}
	var tp []byte
	var tpBuf [55]byte
	if sc.IsValid() {
		tp = telemetry.AppendTraceparent(tpBuf[:0], sc)
	}

	var err, doubt error
	var prev *endpoint
	for attempt := 1; ; attempt++ {
		var retryable bool
		dst, prev, retryable, err = c.attempt(ctx, path, body, dst, deadline, prev, tp, idempotent)
		if err != nil && doubt == nil && !notSent(err) && !IsOverload(err) {
			doubt = err // this attempt may have been processed
		}
		if err == nil || !retryable || attempt >= c.cfg.Retry.MaxAttempts || !time.Now().Before(deadline) {
			break
		}
		if !c.budget.withdraw() {
			c.retriesDenied.Add(1)
			break
		}
		getInstruments().retries.Add(context.Background(), 1, c.peerOpt...)
		if span != nil {
			span.AddEvent("retry")
		}
	}
	if err != nil && doubt != nil {
		// A later attempt refused for overload (or never sent) must not
		// make the call look refused: an earlier one may have been
		// processed, so the outcome is unknown.
		err = doubt
	}
	code := statusOf(err)
	rs.Observe(code, time.Since(start))
	if span != nil {
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
	return dst, err
}

// attempt makes one call on an endpoint other than avoid if possible and
// returns the endpoint used and whether a failure may be retried.
func (c *Client) attempt(ctx context.Context, path string, body, dst []byte, deadline time.Time, avoid *endpoint, traceparent []byte, idempotent bool) ([]byte, *endpoint, bool, error) {
	if err := ctx.Err(); err != nil {
		return dst, nil, false, fmt.Errorf("cannot call %s: %w", c.cfg.Peer, err)
	}
	ep, err := c.bal.PickOther(avoid)
	if err != nil {
		if err := c.waitReady(ctx, deadline); err != nil {
			return dst, nil, false, err
		}
		if ep, err = c.bal.Pick(); err != nil {
			return dst, nil, false, fmt.Errorf("cannot call %s: %w", c.cfg.Peer, ErrNoEndpoints)
		}
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(path)
	req.Header.SetHost(ep.Addr)
	if c.cfg.TLS != nil {
		req.URI().SetScheme("https") // fasthttp refuses a scheme other than the client's
	}
	req.Header.SetContentType(c.cfg.ContentType)
	var nb [20]byte
	req.Header.SetBytesV(hop.DeadlineHeader, strconv.AppendInt(nb[:0], time.Until(deadline).Microseconds(), 10))
	req.Header.SetBytesV(hop.DeadlineAtHeader, strconv.AppendInt(nb[:0], deadline.UnixMicro(), 10))
	if len(traceparent) > 0 {
		req.Header.SetBytesV(telemetry.TraceparentHeader, traceparent)
	}
	req.SetBodyRaw(body)
	err = ep.Conn.DoDeadline(req, resp, deadline)
	var retryable bool
	if err != nil {
		c.bal.Done(ep, false)
		retryable = notSent(err) || idempotent
		err = fmt.Errorf("cannot call %s at %s: %w", c.cfg.Peer, ep.Addr, err)
	} else if code := resp.StatusCode(); code < 200 || code > 299 {
		overload := code == fasthttp.StatusServiceUnavailable && len(resp.Header.Peek(hop.OverloadHeader)) > 0
		c.bal.Done(ep, code < 500 || overload)
		retryable = overload || (idempotent && (code == 502 || code == 503 || code == 504))
		b := resp.Body()
		if len(b) > 512 {
			b = b[:512]
		}
		err = &StatusError{Peer: c.cfg.Peer, Addr: ep.Addr, Code: code, Body: append([]byte(nil), b...)}
	} else {
		c.bal.Done(ep, true)
		dst = append(dst, resp.Body()...)
	}
	fasthttp.ReleaseRequest(req)
	fasthttp.ReleaseResponse(resp)
	return dst, ep, retryable, err
}

// notSent reports whether err means the request never reached the peer.
func notSent(err error) bool {
	if errors.Is(err, fasthttp.ErrNoFreeConns) || errors.Is(err, fasthttp.ErrDialTimeout) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// AllowRetry reports whether a request that failed with a retryable
// status inside a batch reply (a per-item 502, 503 or 504, see
// chassis/rpc) may be sent again after attempts attempts: the bounds a
// call's own retries keep (RetryConfig.MaxAttempts and the retry
// budget, of which it takes a token). The caller checks its deadline
// and that the request is safe to repeat. Safe for concurrent use.
func (c *Client) AllowRetry(attempts int) bool {
	if attempts >= c.cfg.Retry.MaxAttempts {
		return false
	}
	if !c.budget.withdraw() {
		c.retriesDenied.Add(1)
		return false
	}
	getInstruments().retries.Add(context.Background(), 1, c.peerOpt...)
	return true
}

func (c *Client) waitReady(ctx context.Context, deadline time.Time) error {
	select {
	case <-c.ready:
		return nil
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cannot call %s: %w", c.cfg.Peer, ctx.Err())
	case <-t.C:
		return fmt.Errorf("cannot call %s: %w", c.cfg.Peer, ErrNoEndpoints)
	case <-c.done:
		return fmt.Errorf("cannot call %s: %w", c.cfg.Peer, ErrClosed)
	}
}

// Close stops discovery and closes idle connections. Calls in progress
// complete; later calls fail.
func (c *Client) Close() {
	c.closeMu.Lock()
	if c.closed {
		c.closeMu.Unlock()
		return
	}
	c.closed = true
	c.closeMu.Unlock()
	c.cancel()
	<-c.done
	c.reg.Unregister() //nolint:errcheck // only fails for foreign registrations
	for _, ep := range c.bal.Endpoints() {
		ep.Conn.CloseIdleConnections()
	}
	c.bal.Update(nil)
}

func statusOf(err error) int {
	if err == nil {
		return 200
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0 // transport error
}
