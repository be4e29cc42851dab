// Package cgw is the Charging Gateway: the Nchf_ConvergedCharging v3 front
// (TS 32.291) and the balance inquiry endpoint of the CHF, served over
// HTTP/2 cleartext with prior knowledge and HTTP/1.1 on one port. It
// validates and converts requests and hands them to a chf.Charger (the OCP
// client in production); it never rates and keeps no session state.
package cgw

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/cgw/admission"
	"github.com/chf-testbed/testbed/chassis/logthrottle"
	"github.com/chf-testbed/testbed/chassis/oauth2"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/internal/decimal"
)

// Paths served by the Handler.
const (
	// NchfBase is the apiRoot-relative base of Nchf_ConvergedCharging v3.
	NchfBase = "/nchf-convergedcharging/v3/chargingdata"
	// AccountsBase is the base of the balance inquiry (not part of Nchf).
	AccountsBase = "/chf/v1/accounts/"
	// TopUpSuffix after AccountsBase{supi} is the operator top-up:
	// POST {"amount": minor units, "bucket": {"service", "units",
	// "validity"}}.
	TopUpSuffix = "/topup"
	// ReauthorizeSuffix and AbortSuffix after AccountsBase{supi} send
	// ChargingNotify REAUTHORIZATION / ABORT_CHARGING to every open session
	// of the account that named a notifyUri (operator API, POST, no body).
	ReauthorizeSuffix = "/reauthorize"
	AbortSuffix       = "/abort"
	// UnbarSuffix after AccountsBase{supi} lifts the bar an abort put on
	// the account (POST, no body): until then it takes no create and no
	// event (403 END_USER_REQUEST_DENIED, Gy 4010). Answers the balance
	// inquiry's object. A top-up does not lift it.
	UnbarSuffix = "/unbar"
	// ChargedHeader carries ChargeResponse.Charged (minor units) on every
	// Nchf charging response so a load generator can reconcile balances.
	ChargedHeader = "X-Chf-Charged"
	// MaxRspTimeHeader is TS 29.500's 3gpp-Sbi-Max-Rsp-Time: the caller's
	// deadline in milliseconds from the request's arrival.
	MaxRspTimeHeader = "3gpp-Sbi-Max-Rsp-Time"
)

// DefaultBudget is the time a request gets when its caller sends no
// deadline (3gpp-Sbi-Max-Rsp-Time or the chassis budget header).
const DefaultBudget = 2 * time.Second

// maxMargin bounds the part of a caller's budget kept to answer 504 in
// time (a tenth of the budget, at most this).
const maxMargin = 50 * time.Millisecond

// Content types of the responses.
const (
	contentJSON    = "application/json"
	contentProblem = "application/problem+json"
)

// Handler is the protocol-neutral core of the CGW: it takes a request's
// method, path and body and fills an Exchange with the status, headers and
// body to send. The HTTP/1.1 (fasthttp) and HTTP/2 fronts are thin adapters
// around it. Safe for concurrent use.
type Handler struct {
	charger     chf.Charger
	maxBody     int
	maxInFlight int64
	inflight    atomic.Int64
	limiter     *admission.Limiter
	shed        atomic.Uint64
	now         func() time.Time
	newSession  func() uint64
	log         *slog.Logger
	logLimit    *logthrottle.Throttle
	pool        sync.Pool
	// shed counts every shed request (Shed); the metrics count them by
	// reason: beyond maxInFlight, or refused by the adaptive limit.
	shedInflight, shedAdaptive prometheus.Counter
	opToken                    string
	opOpen                     bool
	notifier                   *Notifier
	gy                         GyNotifier
	// base is the scheme and authority (and any API prefix) of the
	// Location of a created resource: Advertise, or the server's own.
	base     []byte
	tokens   *oauth2.Verifier
	denials  *denials
	ready    func(ctx context.Context) error
	refusals map[int]refusal
}

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Charger runs the charging requests (required).
	Charger chf.Charger
	// MaxBody bounds a request body; larger ones get 413 (0 = 64 KiB).
	MaxBody int
	// MaxInFlight bounds concurrent charging requests; excess ones get
	// 503 at once instead of queueing (0 = 4096).
	MaxInFlight int
	// Limiter, when set, is the adaptive admission limit (package
	// admission) charging requests must also pass; shed ones get 503
	// NF_CONGESTION with Retry-After. It may be shared with the Gy front.
	Limiter *admission.Limiter
	// Now is the clock for invocationTimeStamp (nil = time.Now).
	Now func() time.Time
	// NewSession draws a session id (nil = math/rand/v2 Uint64).
	NewSession func() uint64
	// Logger (nil = slog.Default()).
	Logger *slog.Logger
	// OperatorToken is the bearer token the operator API (POST
	// /chf/v1/accounts/{supi}/topup) requires. Without one the API is
	// served only when OperatorOpen is set (a CGW listening on loopback
	// only) and refused with 403 otherwise.
	OperatorToken string
	OperatorOpen  bool
	// Notifier sends the ChargingNotify requests of the operator API
	// (nil: sessions are counted, nobody is notified).
	Notifier *Notifier
	// Gy sends RAR (re-authorisation) and ASR (abort) for sessions opened
	// over Diameter (the Diameter server; nil: those are counted failed).
	Gy GyNotifier
	// Advertise is the apiRoot clients reach this CGW at,
	// scheme://authority[/prefix] (ValidateAdvertise): a created charging
	// data resource's Location is Advertise + NchfBase + "/{ref}". The
	// request's Host is never used. Empty: Server sets it from its
	// listener (NewHandler alone: a relative Location).
	Advertise string
	// Tokens, when set, checks the OAuth2 access token of every request
	// but the probes and the operator-token guarded ones (401/403
	// ProblemDetails with WWW-Authenticate when refused).
	Tokens *oauth2.Verifier
	// Ready reports whether the charging core is reachable (/readyz);
	// nil means always ready.
	Ready func(ctx context.Context) error
}

// GyNotifier sends a Gy session's RAR or ASR (diameter.Server.Notify).
type GyNotifier interface {
	Notify(ctx context.Context, originHost, sessionID string, abort bool) error
}

// ErrNoCharger is returned by NewHandler without a Charger.
var ErrNoCharger = errors.New("cgw: no Charger configured")

// NewHandler returns a Handler for cfg.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Charger == nil {
		return nil, ErrNoCharger
	}
	h := &Handler{
		charger:      cfg.Charger,
		maxBody:      cfg.MaxBody,
		maxInFlight:  int64(cfg.MaxInFlight),
		limiter:      cfg.Limiter,
		now:          cfg.Now,
		newSession:   cfg.NewSession,
		log:          cfg.Logger,
		logLimit:     logthrottle.New(time.Second),
		shedInflight: ShedCounter("inflight"),
		shedAdaptive: ShedCounter("adaptive"),
		opToken:      cfg.OperatorToken,
		opOpen:       cfg.OperatorOpen,
		notifier:     cfg.Notifier,
		gy:           cfg.Gy,
		base:         []byte(strings.TrimSuffix(cfg.Advertise, "/")),
		tokens:       cfg.Tokens,
		denials:      newDenials(),
		ready:        cfg.Ready,
	}
	if cfg.Limiter != nil {
		exposeAdmission(cfg.Limiter)
	}
	if cfg.Advertise != "" {
		if err := ValidateAdvertise(cfg.Advertise); err != nil {
			return nil, err
		}
	}
	if h.maxBody <= 0 {
		h.maxBody = 64 << 10
	}
	h.refusals = newRefusals(h.maxBody)
	if h.maxInFlight <= 0 {
		h.maxInFlight = 4096
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.newSession == nil {
		h.newSession = rand.Uint64
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.pool.New = func() any {
		return &Exchange{
			Body:     make([]byte, 0, 1024),
			Location: make([]byte, 0, 128),
			req:      chf.ChargeRequest{Lines: make([]chf.UsageLine, 0, 4)},
			resp:     chf.ChargeResponse{Lines: make([]chf.GrantLine, 0, 4)},
		}
	}
	return h, nil
}

// MaxBody is the body size limit; fronts read at most MaxBody+1 bytes.
func (h *Handler) MaxBody() int { return h.maxBody }

// Exchange is one request's response and scratch state. Get it with
// Acquire, fill it with Serve, send it, then Release it; it must not be
// used after Release.
type Exchange struct {
	// Status is the HTTP status code.
	Status int
	// ContentType is the body's media type ("" when there is no body).
	ContentType string
	// Location is the Location header value (empty when none).
	Location []byte
	// Charged is the X-Chf-Charged value when HasCharged is set.
	Charged    int64
	HasCharged bool
	// Body is the response body.
	Body []byte
	// RetryAfter asks the front to send "Retry-After: 1" (a 503 for
	// overload: the caller should retry elsewhere or a second later).
	RetryAfter bool
	// Allow, WWWAuthenticate, Accept and AcceptEncoding are the values of
	// those response headers ("" = not sent): Allow on a 405,
	// WWW-Authenticate on a 401, Accept or Accept-Encoding on a 415.
	Allow, WWWAuthenticate, Accept, AcceptEncoding string

	// The request's headers the Handler reads, set by the front before
	// Serve (nil when absent): Authorization (the operator token or an
	// OAuth2 access token), Content-Type, Content-Encoding and
	// Idempotency-Key (the operator's top-up identity).
	Authorization, RequestType, RequestEncoding, IdempotencyKey []byte

	path reqPath

	dec  chf.NchfDecoder
	ctx  chf.Deadline
	nreq chf.NchfRequest
	req  chf.ChargeRequest
	resp chf.ChargeResponse
	sess [chf.SessionIDLen]byte

	op    operation // for metrics
	cause string    // ProblemDetails cause answered, for metrics
}

// refusalHeaders lists the refusal headers (name in lower case, as HTTP/2
// wants it; fasthttp normalises it for HTTP/1.1), so that both fronts
// write them with one loop. An empty value is not sent.
func (x *Exchange) refusalHeaders() [4][2]string {
	return [4][2]string{{"allow", x.Allow}, {"www-authenticate", x.WWWAuthenticate}, {"accept", x.Accept}, {"accept-encoding", x.AcceptEncoding}}
}

func (x *Exchange) reset() {
	x.Status = 0
	x.ContentType = ""
	x.Location = x.Location[:0]
	x.Charged = 0
	x.HasCharged = false
	x.RetryAfter = false
	x.Body = x.Body[:0]
	x.op, x.cause = opOther, ""
	x.Allow, x.WWWAuthenticate, x.Accept, x.AcceptEncoding = "", "", "", ""
	x.Authorization, x.RequestType, x.RequestEncoding, x.IdempotencyKey = nil, nil, nil, nil
}

// Context returns the context to Serve x with, valid until Release:
// parent's values (trace context) with the caller's deadline, the
// earliest of parent's, maxRspTime (a 3gpp-Sbi-Max-Rsp-Time value in
// milliseconds from start, nil when absent) and DefaultBudget, less a
// tenth of the budget (at most 50 ms) so that a stalled core is answered
// 504 before the caller gives up. It allocates nothing.
func (x *Exchange) Context(parent context.Context, start time.Time, maxRspTime []byte) context.Context {
	budget := DefaultBudget
	if ms, ok := decimal.ParseUint(maxRspTime, 9); ok {
		budget = min(budget, time.Duration(ms)*time.Millisecond)
	}
	if pd, ok := parent.Deadline(); ok {
		budget = min(budget, pd.Sub(start))
	}
	budget -= min(budget/10, maxMargin)
	x.ctx.Reset(parent, start.Add(budget))
	return &x.ctx
}

// Acquire returns an Exchange from the pool.
func (h *Handler) Acquire() *Exchange {
	x := h.pool.Get().(*Exchange)
	x.reset()
	return x
}

// Release returns x to the pool.
func (h *Handler) Release(x *Exchange) {
	x.ctx = chf.Deadline{}
	if cap(x.Body) > 64<<10 {
		x.Body = make([]byte, 0, 1024)
	}
	h.pool.Put(x)
}

// Serve handles one request: target is the request target as received
// (HTTP/1.1 request-target or HTTP/2 :path), routed as route.go says;
// the front sets x's request fields (Authorization, RequestType,
// RequestEncoding) first. body is not retained.
func (h *Handler) Serve(ctx context.Context, x *Exchange, method, target, body []byte) {
	if msg := x.path.parse(target); msg != "" {
		h.problem(x, http.StatusBadRequest, "INVALID_URI", msg, "", "")
		return
	}
	rt := x.path.route()
	switch rt {
	case routeHealthz, routeReadyz, routeMetrics:
		if !rt.allows(method) {
			h.notAllowed(x, rt)
			return
		}
		h.probe(x, rt)
		return
	}
	// The operator API, and the balance inquiry when an operator token is
	// configured, take the operator token; everything else the OAuth2
	// access token when --oauth2-keys is set (both are Authorization:
	// Bearer, so one request cannot carry both).
	operator := rt == routeTopUp || rt == routeReauthorize || rt == routeAbort || rt == routeUnbar ||
		rt == routeBalance && h.opToken != ""
	if !operator {
		if d := h.authorizeToken(x.Authorization); d != nil {
			x.Status, x.ContentType, x.WWWAuthenticate = d.status, contentProblem, d.www
			x.Body = append(x.Body[:0], d.body...)
			return
		}
	}
	switch rt {
	case routeCreate:
		x.op = opCreate
	case routeUpdate:
		x.op = opUpdate
	case routeRelease:
		x.op = opRelease
	case routeBalance:
		x.op = opBalance
	case routeNone:
		h.problem(x, http.StatusNotFound, "RESOURCE_URI_STRUCTURE_NOT_FOUND", "no such resource", "", "")
		return
	}
	if !rt.allows(method) {
		h.notAllowed(x, rt)
		return
	}
	if len(x.path.query) > 0 {
		name := firstParam(x.path.query)
		h.problem(x, http.StatusBadRequest, "INVALID_QUERY_PARAM",
			"query parameter "+strconv.Quote(string(name))+" is not supported: this resource takes none", string(name), "not supported")
		return
	}
	if operator && !h.authorized(x) {
		return
	}
	switch rt {
	case routeBalance, routeTopUp, routeReauthorize, routeAbort, routeUnbar:
		if len(x.path.id) > 128 {
			h.problem(x, http.StatusNotFound, "USER_UNKNOWN", "no such subscriber", "", "")
			return
		}
	}
	if rt.takesJSON() && !h.acceptBody(x, body) {
		return
	}
	switch rt {
	case routeCreate, routeUpdate, routeRelease:
		h.serveNchf(ctx, x, rt, body)
	case routeBalance:
		h.balance(ctx, x, string(x.path.id))
	case routeTopUp:
		h.topUp(ctx, x, string(x.path.id), body)
	case routeReauthorize:
		h.notifyAccount(ctx, x, string(x.path.id), NotifyReauthorization)
	case routeAbort:
		h.notifyAccount(ctx, x, string(x.path.id), NotifyAbortCharging)
	case routeUnbar:
		supi := string(x.path.id)
		x.req = chf.ChargeRequest{Op: chf.OpUnbar, SUPI: supi, Lines: x.req.Lines[:0]}
		h.answerAccount(ctx, x, supi)
	}
}

// notAllowed answers 405 with the route's Allow (RFC 9110 §15.5.6).
func (h *Handler) notAllowed(x *Exchange, rt routeKind) {
	h.problem(x, http.StatusMethodNotAllowed, "", "this resource allows "+rt.allow(), "", "")
	x.Allow = rt.allow()
}

// acceptBody checks a JSON request body's size, media type and coding:
// 413 over MaxBody, 415 unless Content-Type is application/json (a
// non-empty body) and Content-Encoding is absent or identity.
func (h *Handler) acceptBody(x *Exchange, body []byte) bool {
	if len(body) > h.maxBody {
		h.problem(x, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE",
			"request body of "+strconv.Itoa(len(body))+" bytes exceeds the limit of "+strconv.Itoa(h.maxBody), "", "")
		return false
	}
	if enc := trimOWS(x.RequestEncoding); len(enc) > 0 && !equalFold(enc, "identity") {
		h.problem(x, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE",
			"Content-Encoding "+strconv.Quote(string(enc))+" is not supported: send the body uncoded", "Content-Encoding", "not supported")
		x.AcceptEncoding = "identity"
		return false
	}
	if len(body) > 0 && !isJSONType(x.RequestType) {
		detail := "Content-Type must be application/json"
		if len(x.RequestType) == 0 {
			detail += " (none was sent)"
		} else {
			detail += ", not " + strconv.Quote(string(x.RequestType))
		}
		h.problem(x, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", detail, "Content-Type", "must be application/json")
		x.Accept = contentJSON
		return false
	}
	return true
}

// isJSONType reports whether a Content-Type value is application/json,
// with any parameters (charset=utf-8); type and subtype are case
// insensitive (RFC 9110 §8.3.1).
func isJSONType(ct []byte) bool {
	ct = trimOWS(ct)
	for i, c := range ct {
		if c == ';' || c == ' ' || c == '\t' {
			if !equalFold(ct[:i], contentJSON) {
				return false
			}
			rest := trimOWS(ct[i:])
			return len(rest) == 0 || rest[0] == ';'
		}
	}
	return equalFold(ct, contentJSON)
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// serveNchf serves an Nchf create, update or release past routing:
// admission, then the operation.
func (h *Handler) serveNchf(ctx context.Context, x *Exchange, rt routeKind, body []byte) {
	// A release frees reservations: never shed by the adaptive limit,
	// and given twice the hard cap, so that overload does not leave
	// them held until they expire.
	isRelease := rt == routeRelease
	if n := h.inflight.Add(1); n > h.maxInFlight && (!isRelease || n > 2*h.maxInFlight) {
		h.inflight.Add(-1)
		h.shed.Add(1)
		h.shedInflight.Inc()
		h.problem(x, http.StatusServiceUnavailable, "NF_CONGESTION", "too many requests in flight", "", "")
		return
	}
	defer h.inflight.Add(-1)
	if h.limiter != nil {
		// Open sessions first: a create is shed before an update or
		// a release of a session that holds a reservation.
		isNew := rt == routeCreate
		if isRelease {
			h.limiter.AcquireRelease()
		} else if isNew && !h.limiter.AcquireNew() || !isNew && !h.limiter.Acquire() {
			h.shed.Add(1)
			h.shedAdaptive.Inc()
			h.problem(x, http.StatusServiceUnavailable, "NF_CONGESTION", "overloaded: request shed", "", "")
			return
		}
		defer h.limiterDone(time.Now())
	}
	switch rt {
	case routeCreate:
		h.create(ctx, x, body)
	case routeUpdate:
		h.session(ctx, x, chf.OpUpdate, x.path.id, body)
	case routeRelease:
		h.session(ctx, x, chf.OpRelease, x.path.id, body)
	}
}

// limiterDone reports an admitted request's latency to the limiter.
func (h *Handler) limiterDone(start time.Time) { h.limiter.Done(time.Since(start), true) }

// Shed counts the charging requests answered 503 NF_CONGESTION because
// the in-flight bound or the adaptive limit refused them (for metrics).
func (h *Handler) Shed() uint64 { return h.shed.Load() }

func (h *Handler) decode(x *Exchange, body []byte) bool {
	err := x.dec.Decode(body, &x.nreq)
	if err == nil {
		if len(x.nreq.NotifyURI) > 0 && !validNotifyURI(x.nreq.NotifyURI) {
			h.problem(x, http.StatusBadRequest, "CHARGING_FAILED",
				"field /notifyUri must be an absolute http or https URI with a host", "/notifyUri", "not an absolute http(s) URI with a host")
			return false
		}
		return true
	}
	var fe *chf.FieldError
	if errors.As(err, &fe) {
		h.problem(x, http.StatusBadRequest, "CHARGING_FAILED", fe.Error(), fe.Param, fe.Reason)
	} else {
		h.problem(x, http.StatusBadRequest, "CHARGING_FAILED", err.Error(), "", "")
	}
	return false
}

func (h *Handler) fillLines(x *Exchange) {
	x.req.Lines = append(x.req.Lines[:0], x.nreq.Lines...)
	x.req.Seq = x.nreq.Seq
	x.req.Notify = x.req.Notify[:0]
}

func (h *Handler) create(ctx context.Context, x *Exchange, body []byte) {
	if !h.decode(x, body) {
		return
	}
	if x.nreq.SUPI == "" {
		h.problem(x, http.StatusBadRequest, "CHARGING_FAILED",
			"field /subscriberIdentifier is mandatory on create", "/subscriberIdentifier", "mandatory field missing")
		return
	}
	h.fillLines(x)
	x.req.Notify = append(x.req.Notify, x.nreq.NotifyURI...)
	x.req.SUPI = x.nreq.SUPI
	// The request's identity: a repeat (a retransmission, or a client
	// retrying after a timeout) is answered from the account record with
	// the first answer and Location, and charges once.
	x.req.Key = x.nreq.Key
	x.req.Op = chf.OpCreate
	x.req.Session = ""
	x.req.Event = chf.EventUnspecified
	if x.nreq.OneTimeEvent {
		// An event opens no session: its identity alone deduplicates it.
		x.req.Op = chf.OpEvent
		x.op = opEvent
		switch x.nreq.OneTimeEventType {
		case "IEC":
			x.req.Event = chf.EventIEC
		case "PEC":
			x.req.Event = chf.EventPEC
		}
	} else {
		sess := chf.AppendSessionID(x.sess[:0], h.newSession())
		x.req.Session = string(sess)
	}
	if !h.charge(ctx, x) {
		return
	}
	x.Status = http.StatusCreated
	if x.req.Op == chf.OpCreate {
		if x.resp.Session != "" {
			x.req.Session = x.resp.Session // a repeated create: the first one's session
		}
		// The server's own authority, never the request's Host.
		x.Location = append(x.Location, h.base...)
		x.Location = append(x.Location, NchfBase...)
		x.Location = append(x.Location, '/')
		x.Location = appendSegment(x.Location, x.req.SUPI)
		x.Location = append(x.Location, '.')
		x.Location = append(x.Location, x.req.Session...)
	}
	h.chargingData(x)
}

func (h *Handler) session(ctx context.Context, x *Exchange, op chf.Op, ref []byte, body []byte) {
	supi, sess, err := chf.ParseRef(string(ref))
	if err != nil {
		h.problem(x, http.StatusNotFound, "RESOURCE_CONTEXT_NOT_FOUND",
			"no charging data resource "+strconv.Quote(string(ref)), "", "")
		return
	}
	if !h.decode(x, body) {
		return
	}
	h.fillLines(x)
	x.req.Key, x.req.Event = 0, chf.EventUnspecified
	x.req.Op = op
	x.req.SUPI = supi // allocated by string(ref) above; owned by this request
	x.req.Session = sess
	if !h.charge(ctx, x) {
		return
	}
	if op == chf.OpRelease {
		x.Status = http.StatusNoContent
		return
	}
	x.Status = http.StatusOK
	h.chargingData(x)
}

func (h *Handler) chargingData(x *Exchange) {
	x.ContentType = contentJSON
	x.Body = chf.AppendChargingDataResponse(x.Body, h.now(), x.req.Seq, x.resp.Lines)
}

// charge calls the Charger and answers failures; it reports whether the
// request succeeded (x.resp then holds the answer).
func (h *Handler) charge(ctx context.Context, x *Exchange) bool {
	x.resp.Reset()
	if err := h.charger.Charge(ctx, &x.req, &x.resp); err != nil {
		h.chargerError(x, err)
		return false
	}
	x.Charged = x.resp.Charged
	x.HasCharged = true
	if x.resp.Result == chf.ResultSuccess {
		return true
	}
	h.resultProblem(x, x.resp.Result, x.resp.Detail)
	return false
}

// run calls the Charger with x.req for an operation that charges nothing
// (balance, top-up, notifications) and answers failures; it reports
// whether the request succeeded (x.resp then holds the answer).
func (h *Handler) run(ctx context.Context, x *Exchange) bool {
	x.resp.Reset()
	if err := h.charger.Charge(ctx, &x.req, &x.resp); err != nil {
		h.chargerError(x, err)
		return false
	}
	if x.resp.Result != chf.ResultSuccess {
		h.resultProblem(x, x.resp.Result, x.resp.Detail)
		return false
	}
	return true
}

func (h *Handler) chargerError(x *Exchange, err error) {
	var se *peer.StatusError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, fasthttp.ErrTimeout),
		errors.As(err, &se) && se.Code == http.StatusGatewayTimeout:
		// The core, or the ABM or database behind it, did not answer
		// within the caller's deadline.
		h.problem(x, http.StatusGatewayTimeout, "TIMED_OUT_REQUEST", "charging core did not answer in time", "", "")
	case peer.IsOverload(err):
		// A 503 from the core or no free connection to it: answer
		// overload at once rather than a system failure.
		h.problem(x, http.StatusServiceUnavailable, "NF_CONGESTION", "charging core overloaded", "", "")
	default:
		// At most one line per second per kind of failure, with the
		// number of failures since the previous line.
		if n, ok := h.logLimit.Allow(peer.ErrorKind(err)); ok {
			h.log.Warn("charging core failed", "err", err, "count", n)
		}
		h.problem(x, http.StatusInternalServerError, "SYSTEM_FAILURE", "charging core failed", "", "")
	}
}

// resultProblem answers a whole-request failure from the charging core.
func (h *Handler) resultProblem(x *Exchange, r chf.Result, detail string) {
	switch r {
	case chf.ResultQuotaLimitReached:
		h.problem(x, http.StatusForbidden, "QUOTA_LIMIT_REACHED", orDefault(detail, "balance exhausted"), "", "")
	case chf.ResultEndUserServiceDenied:
		h.problem(x, http.StatusForbidden, "END_USER_REQUEST_DENIED", orDefault(detail, "service denied"), "", "")
	case chf.ResultUserUnknown:
		h.problem(x, http.StatusNotFound, "USER_UNKNOWN", orDefault(detail, "unknown subscriber "+strconv.Quote(x.req.SUPI)), "", "")
	case chf.ResultSessionUnknown:
		h.problem(x, http.StatusNotFound, "RESOURCE_CONTEXT_NOT_FOUND", orDefault(detail, "unknown charging data resource"), "", "")
	case chf.ResultStaleSequence:
		h.problem(x, http.StatusBadRequest, "CHARGING_FAILED",
			orDefault(detail, "invocationSequenceNumber "+strconv.FormatUint(uint64(x.req.Seq), 10)+" is older than the last one answered"),
			"/invocationSequenceNumber", "stale: older than the last one answered")
	case chf.ResultSequenceReused:
		h.problem(x, http.StatusBadRequest, "CHARGING_FAILED",
			orDefault(detail, "invocationSequenceNumber "+strconv.FormatUint(uint64(x.req.Seq), 10)+" was answered for another operation"),
			"/invocationSequenceNumber", "already answered for another operation on this resource")
	case chf.ResultReplayMismatch:
		if x.req.Op == chf.OpTopUp {
			// draft-ietf-httpapi-idempotency-key-header: a key reused
			// with another payload is 422.
			h.problem(x, http.StatusUnprocessableEntity, "", orDefault(detail, "a top-up with this Idempotency-Key was answered with other content"),
				"Idempotency-Key", "already used for a top-up with another amount or bucket")
			return
		}
		h.problem(x, http.StatusBadRequest, "CHARGING_FAILED",
			orDefault(detail, "a repeated request differs from the one first answered"),
			"/multipleUnitUsage", "differs from the request first answered with this identity")
	case chf.ResultRatingFailed:
		h.problem(x, http.StatusBadRequest, "CHARGING_FAILED", orDefault(detail, "rating failed"), "", "")
	case chf.ResultOverloaded:
		h.problem(x, http.StatusServiceUnavailable, "NF_CONGESTION", orDefault(detail, "overloaded"), "", "")
	case chf.ResultOverflow:
		h.overflowProblem(x, detail)
	default:
		h.problem(x, http.StatusBadRequest, "CHARGING_FAILED", orDefault(detail, "request refused"), "", "")
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (h *Handler) problem(x *Exchange, status int, cause, detail, param, reason string) {
	x.Status = status
	x.RetryAfter = status == http.StatusServiceUnavailable
	x.cause = cause
	x.ContentType = contentProblem
	x.Body = chf.AppendProblemDetails(x.Body[:0], &chf.Problem{
		Status: status, Title: http.StatusText(status), Cause: cause, Detail: detail,
		Param: param, Reason: reason,
	})
}

// balance answers GET /chf/v1/accounts/{supi}.
func (h *Handler) balance(ctx context.Context, x *Exchange, supi string) {
	if len(supi) > 128 {
		h.problem(x, http.StatusNotFound, "USER_UNKNOWN", "no such subscriber", "", "")
		return
	}
	x.req = chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi, Lines: x.req.Lines[:0]}
	h.answerAccount(ctx, x, supi)
}

// answerAccount runs x.req (a balance inquiry or top-up) and answers the
// account as it stands.
func (h *Handler) answerAccount(ctx context.Context, x *Exchange, supi string) {
	if !h.run(ctx, x) {
		return
	}
	x.Status = http.StatusOK
	x.ContentType = contentJSON
	x.Body = AppendBalance(x.Body, supi, &x.resp)
}

// operatorRealm is the WWW-Authenticate challenge of the operator token
// (RFC 6750 §3).
const operatorRealm = `Bearer realm="chf-operator"`

// authorized reports whether x may use the operator API: it carries the
// operator bearer token, or there is none and the API is open (loopback).
// Otherwise x is answered 401 or 403.
func (h *Handler) authorized(x *Exchange) bool {
	if h.opToken == "" {
		if h.opOpen {
			return true
		}
		h.problem(x, http.StatusForbidden, "", "the operator API needs --operator-token-file when the CGW listens beyond loopback", "", "")
		return false
	}
	const prefix = "Bearer "
	a := x.Authorization
	if len(a) > len(prefix) && strings.EqualFold(string(a[:len(prefix)]), prefix) &&
		subtle.ConstantTimeCompare(a[len(prefix):], []byte(h.opToken)) == 1 {
		return true
	}
	if len(a) == 0 {
		h.problem(x, http.StatusUnauthorized, "", "this resource needs Authorization: Bearer <operator token>", "", "")
		x.WWWAuthenticate = operatorRealm
	} else {
		h.problem(x, http.StatusUnauthorized, "", "the operator token is not valid", "", "")
		x.WWWAuthenticate = operatorRealm + `, error="invalid_token"`
	}
	return false
}

// topUpBody is the body of POST /chf/v1/accounts/{supi}/topup.
type topUpBody struct {
	Amount int64 `json:"amount"`
	Bucket *struct {
		Service  string `json:"service"`  // data | voice | sms
		Units    uint64 `json:"units"`    // octets, seconds, messages
		Validity int64  `json:"validity"` // seconds; 0 = none
	} `json:"bucket"`
}

// MaxIdempotencyKey is the longest Idempotency-Key a top-up takes.
const MaxIdempotencyKey = 255

// topUpKey is the identity of a top-up with Idempotency-Key k on its
// account (never 0), or 0 without one.
func topUpKey(k []byte) uint64 {
	if len(k) == 0 {
		return 0
	}
	return chf.Hash(chf.HashUint(chf.HashSeed, uint64(chf.OpTopUp)), k) | 1
}

// validIdempotencyKey reports whether k is 1..MaxIdempotencyKey visible
// ASCII characters (an RFC 8941 string's content, quotes allowed around).
func validIdempotencyKey(k []byte) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKey {
		return false
	}
	for _, c := range k {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// topUp answers POST /chf/v1/accounts/{supi}/topup: credits money and/or a
// bucket and answers the balance after it. With an Idempotency-Key it is
// idempotent: the same key again (with the same content) is answered
// with the balance as it stands and credits nothing; without one a
// retried top-up credits again.
func (h *Handler) topUp(ctx context.Context, x *Exchange, supi string, body []byte) {
	if x.IdempotencyKey != nil && !validIdempotencyKey(x.IdempotencyKey) {
		h.problem(x, http.StatusBadRequest, "", "the Idempotency-Key header must be 1 to 255 visible ASCII characters", "Idempotency-Key", "invalid")
		return
	}
	var b topUpBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			// A number out of its type's range (an amount beyond int64)
			// or a value of the wrong type: named, as the spec's fields are.
			param := "/" + strings.ReplaceAll(te.Field, ".", "/")
			h.problem(x, http.StatusBadRequest, "", "cannot decode top-up: "+param+": "+te.Value+" does not fit "+te.Type.String(), param, "invalid")
			return
		}
		h.problem(x, http.StatusBadRequest, "", "cannot decode top-up: "+err.Error(), "", "")
		return
	}
	if param := duplicateMember(body); param != "" {
		h.problem(x, http.StatusBadRequest, "", "cannot decode top-up: "+param+": member given more than once in its object", param, "duplicate")
		return
	}
	var t chf.TopUp
	t.Amount = b.Amount
	if b.Amount < 0 {
		h.problem(x, http.StatusBadRequest, "", "amount must not be negative", "/amount", "negative")
		return
	}
	if b.Bucket != nil {
		switch b.Bucket.Service {
		case "data":
			t.Bucket.Service = chf.ServiceData
		case "voice":
			t.Bucket.Service = chf.ServiceVoice
		case "sms":
			t.Bucket.Service = chf.ServiceSMS
		default:
			h.problem(x, http.StatusBadRequest, "", "bucket.service must be data, voice or sms", "/bucket/service", "unknown service")
			return
		}
		if b.Bucket.Units == 0 || b.Bucket.Validity < 0 {
			h.problem(x, http.StatusBadRequest, "", "bucket.units must be positive and bucket.validity not negative", "/bucket", "invalid")
			return
		}
		t.Bucket.Units, t.Bucket.Expires = b.Bucket.Units, b.Bucket.Validity
	}
	if t.Amount == 0 && t.Bucket.Units == 0 {
		h.problem(x, http.StatusBadRequest, "", "a top-up needs an amount or a bucket", "/amount", "missing")
		return
	}
	x.req = chf.ChargeRequest{Op: chf.OpTopUp, SUPI: supi, Lines: x.req.Lines[:0], TopUp: t, Key: topUpKey(x.IdempotencyKey)}
	h.answerAccount(ctx, x, supi)
	if x.Status == http.StatusOK && h.notifier != nil {
		// New money or allowance: the open sessions re-authorise.
		req := chf.ChargeRequest{Op: chf.OpSessions, SUPI: supi}
		var resp chf.ChargeResponse
		if err := h.charger.Charge(ctx, &req, &resp); err == nil && resp.Result == chf.ResultSuccess {
			h.sendNotifications(ctx, nil, resp.Targets, NotifyReauthorization, originOperator)
		}
	}
}

// AppendBalance appends the balance inquiry JSON object for resp to dst:
// {"supi","balance","reserved","available","currency","debited","overage",
// "offline","credited","creditLimit"}, "barred":true while an abort bars
// the account, and, when it has any,
// "buckets":[{"service","units","held","expires"}]; integer minor units;
// debited is the account's running total of debits, overage that of usage
// reported beyond what the balance could pay, offline that of offline
// usage rated (never debited), credited that of top-ups.
func AppendBalance(dst []byte, supi string, resp *chf.ChargeResponse) []byte {
	dst = append(dst, `{"supi":`...)
	dst = chf.AppendJSONString(dst, supi)
	dst = append(dst, `,"balance":`...)
	dst = strconv.AppendInt(dst, resp.Balance, 10)
	dst = append(dst, `,"reserved":`...)
	dst = strconv.AppendInt(dst, resp.Reserved, 10)
	dst = append(dst, `,"available":`...)
	dst = strconv.AppendInt(dst, resp.Balance-resp.Reserved, 10)
	dst = append(dst, `,"currency":`...)
	dst = chf.AppendJSONString(dst, resp.Currency)
	dst = append(dst, `,"debited":`...)
	dst = strconv.AppendInt(dst, resp.Debited, 10)
	dst = append(dst, `,"overage":`...)
	dst = strconv.AppendInt(dst, resp.Overage, 10)
	dst = append(dst, `,"offline":`...)
	dst = strconv.AppendInt(dst, resp.OfflineTotal, 10)
	dst = append(dst, `,"credited":`...)
	dst = strconv.AppendInt(dst, resp.Credited, 10)
	dst = append(dst, `,"creditLimit":`...)
	dst = strconv.AppendInt(dst, resp.CreditLimit, 10)
	if resp.Barred {
		dst = append(dst, `,"barred":true`...)
	}
	if len(resp.Buckets) > 0 {
		dst = append(dst, `,"buckets":[`...)
		for i, b := range resp.Buckets {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"service":"`...)
			dst = append(dst, serviceNames[min(int(b.Service), len(serviceNames)-1)]...)
			dst = append(dst, `","units":`...)
			dst = strconv.AppendUint(dst, b.Units, 10)
			dst = append(dst, `,"held":`...)
			dst = strconv.AppendUint(dst, b.Held, 10)
			dst = append(dst, `,"expires":`...)
			dst = strconv.AppendInt(dst, b.Expires, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

var serviceNames = [...]string{chf.ServiceUnknown: "unknown", chf.ServiceData: "data", chf.ServiceVoice: "voice", chf.ServiceSMS: "sms", 4: "unknown"}

// duplicateMember returns the JSON Pointer of the first member given twice
// in one object of the (valid) JSON document body, or "" when none is:
// encoding/json would keep the last silently. Not for the hot path.
func duplicateMember(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	var walk func(path string) string
	walk = func(path string) string {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return ""
				}
				name, _ := k.(string)
				p := path + "/" + name
				if seen[name] {
					return p
				}
				seen[name] = true
				if d := walk(p); d != "" {
					return d
				}
			}
			dec.Token() // '}'
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if d := walk(path + "/" + strconv.Itoa(i)); d != "" {
					return d
				}
			}
			dec.Token() // ']'
		}
		return ""
	}
	return walk("")
}
