package cgw

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/chf"
)

var (
	errNoGy       = errors.New("cgw: no Diameter server to send RAR/ASR")
	errNoNotifier = errors.New("cgw: no notifier configured")
)

// ErrNotifyRefused is wrapped when a notification's every attempt failed.
var ErrNotifyRefused = errors.New("cgw: charging notification not accepted")

// NotifyBudget bounds the notifications of one operator call (every
// attempt of every session's notification).
const NotifyBudget = 10 * time.Second

// Notification types of a ChargingNotifyRequest (TS 32.291 NotificationType).
const (
	NotifyReauthorization = "REAUTHORIZATION"
	NotifyAbortCharging   = "ABORT_CHARGING"
)

// NotifierConfig configures a Notifier. Zero values take the defaults.
type NotifierConfig struct {
	// Attempts per notification (default 3), the first included; a retry
	// waits Backoff (default 50 ms), doubling.
	Attempts int
	Backoff  time.Duration
	// Timeout bounds each attempt (default 1 s).
	Timeout time.Duration
	// PerDestination bounds the notifications in flight to one host:port
	// (default 16); more wait for a slot.
	PerDestination int
}

// Notifier sends ChargingNotify requests (POST to the session's notifyUri,
// HTTP/2 cleartext with prior knowledge over the chassis's lean h2c
// client, one connection per destination) with bounded retries and
// per-destination concurrency. Safe for concurrent use.
type Notifier struct {
	cfg   NotifierConfig
	mu    sync.Mutex
	dests map[string]*notifyDest
}

type notifyDest struct {
	slots chan struct{}
	mu    sync.Mutex
	conn  *h2c.Conn
	tmpl  *h2c.RequestTemplate
}

// NewNotifier returns a Notifier for cfg.
func NewNotifier(cfg NotifierConfig) *Notifier {
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 50 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.PerDestination <= 0 {
		cfg.PerDestination = 16
	}
	return &Notifier{cfg: cfg, dests: map[string]*notifyDest{}}
}

// Close closes the connections.
func (n *Notifier) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range n.dests {
		d.mu.Lock()
		if d.conn != nil {
			d.conn.Close()
		}
		d.mu.Unlock()
	}
	n.dests = map[string]*notifyDest{}
}

func (n *Notifier) dest(authority string) *notifyDest {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.dests[authority]
	if d == nil {
		d = &notifyDest{slots: make(chan struct{}, n.cfg.PerDestination),
			tmpl: h2c.NewRequestTemplate("POST", authority, "application/json")}
		n.dests[authority] = d
	}
	return d
}

// AppendNotifyRequest appends a ChargingNotifyRequest of type typ for the
// ChargingDataRef ref: REAUTHORIZATION names every rating group (one
// reauthorizationDetails entry without a rating group).
func AppendNotifyRequest(dst []byte, typ string) []byte {
	dst = append(dst, `{"notificationType":"`...)
	dst = append(dst, typ...)
	dst = append(dst, '"')
	if typ == NotifyReauthorization {
		dst = append(dst, `,"reauthorizationDetails":[{"quotaManagementIndicator":"ONLINE_CHARGING"}]`...)
	}
	return append(dst, '}')
}

// Notify posts a notification of type typ to uri (an http:// notifyUri),
// retrying on failure, 5xx and 429. It returns the attempts made and nil
// once the client answered 2xx; a 4xx other than 429 is final.
func (n *Notifier) Notify(ctx context.Context, uri, typ string) (int, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return 0, fmt.Errorf("cannot notify %q: want an http:// notifyUri (h2c)", uri)
	}
	authority := u.Host
	if u.Port() == "" {
		authority += ":80"
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	d := n.dest(authority)
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-d.slots }()
	body := AppendNotifyRequest(nil, typ)
	backoff := n.cfg.Backoff
	var last error
	for attempt := 1; attempt <= n.cfg.Attempts; attempt++ {
		if attempt > 1 {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return attempt - 1, ctx.Err()
			}
			backoff *= 2
		}
		status, err := d.post(ctx, authority, path, body, n.cfg.Timeout)
		switch {
		case err != nil:
			last = err
		case status >= 200 && status < 300:
			return attempt, nil
		case status == 429 || status >= 500:
			last = fmt.Errorf("%w: %s answered %d", ErrNotifyRefused, uri, status)
		default:
			return attempt, fmt.Errorf("%w: %s answered %d", ErrNotifyRefused, uri, status)
		}
	}
	return n.cfg.Attempts, fmt.Errorf("%w after %d attempts: %w", ErrNotifyRefused, n.cfg.Attempts, last)
}

// post makes one attempt on the destination's connection, dialling it
// again when it failed.
func (d *notifyDest) post(ctx context.Context, authority, path string, body []byte, timeout time.Duration) (int, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d.mu.Lock()
	c := d.conn
	if c == nil || c.Err() != nil {
		if c != nil {
			c.Close()
		}
		var err error
		c, err = h2c.Dial(actx, authority, &h2c.ClientOptions{})
		if err != nil {
			d.conn = nil
			d.mu.Unlock()
			return 0, fmt.Errorf("cannot dial notifyUri host %s: %w", authority, err)
		}
		d.conn = c
	}
	d.mu.Unlock()
	var resp h2c.ClientResponse
	if err := c.Do(actx, &h2c.ClientRequest{Template: d.tmpl, Path: []byte(path), Body: body}, &resp); err != nil {
		return 0, fmt.Errorf("cannot post to %s%s: %w", authority, path, err)
	}
	return resp.Status, nil
}

// notifyAccount sends a notification of type typ to every open session of
// x.req.SUPI that named a notifyUri and answers {"sessions","notified",
// "failed"}.
func (h *Handler) notifyAccount(ctx context.Context, x *Exchange, supi, typ string) {
	op := chf.OpSessions
	if typ == NotifyAbortCharging {
		op = chf.OpAbortSessions // bars the sessions from further updates
	}
	x.req = chf.ChargeRequest{Op: op, SUPI: supi, Lines: x.req.Lines[:0]}
	if !h.run(ctx, x) {
		return
	}
	x.Status, x.ContentType = 200, contentJSON
	x.Body = h.sendNotifications(ctx, x.Body[:0], x.resp.Targets, typ, originOperator)
}

// sendNotifications notifies targets concurrently (bounded per
// destination by the Notifier) and appends the summary JSON.
func (h *Handler) sendNotifications(_ context.Context, dst []byte, targets []chf.NotifyTarget, typ, origin string) []byte {
	// Not the request's context: it is pooled with the exchange (and
	// short); the notifications get their own budget.
	ctx, cancel := context.WithTimeout(context.Background(), NotifyBudget)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	notified, failed, with := 0, 0, 0
	for _, t := range targets {
		if t.URI == "" {
			continue
		}
		with++
		wg.Add(1)
		go func(uri string) {
			defer wg.Done()
			start := time.Now()
			var err error
			if host, sid, ok := diameter.ParseNotifyTarget(uri); ok {
				// A Gy session: RAR or ASR to its peer.
				err = errNoGy
				if h.gy != nil {
					gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					err = h.gy.Notify(gctx, host, sid, typ == NotifyAbortCharging)
					cancel()
				}
			} else {
				err = errNoNotifier
				if h.notifier != nil {
					_, err = h.notifier.Notify(ctx, uri, typ)
				}
			}
			observeNotification(typ, origin, err, start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if n, ok := h.logLimit.Allow("notify " + origin); ok {
					h.log.Warn("charging notification failed", "type", typ, "origin", origin, "err", err, "failures", n)
				}
				return
			}
			notified++
		}(t.URI)
	}
	wg.Wait()
	dst = append(dst, `{"sessions":`...)
	dst = strconv.AppendInt(dst, int64(len(targets)), 10)
	dst = append(dst, `,"withNotifyUri":`...)
	dst = strconv.AppendInt(dst, int64(with), 10)
	dst = append(dst, `,"notified":`...)
	dst = strconv.AppendInt(dst, int64(notified), 10)
	dst = append(dst, `,"failed":`...)
	dst = strconv.AppendInt(dst, int64(failed), 10)
	return append(dst, '}')
}

// Where a notification comes from, for the metrics.
const (
	originOperator = "operator" // the operator API (reauthorize, abort, topup)
	originSweep    = "sweep"    // the ABM's sweep (tariff change, bucket expiry)
)

var (
	notifications = telemetry.NewCounterVec("chf_cgw_notifications_total",
		"CHF-initiated notifications (ChargingNotify, Gy RAR/ASR) by type (REAUTHORIZATION, ABORT_CHARGING), origin (operator, sweep) and result (sent: the client answered 2xx / RAA 2001; failed: every attempt failed or no way to send).",
		"type", "origin", "result")
	notificationLatency = telemetry.NewHistogramVec("chf_cgw_notification_duration_seconds",
		"Time from the CGW starting a notification (retries included) to the client's answer, by type and origin.",
		nil, "type", "origin")
)

// observeNotification counts one notification begun at start.
func observeNotification(typ, origin string, err error, start time.Time) {
	result := "sent"
	if err != nil {
		result = "failed"
	}
	notifications.WithLabelValues(typ, origin, result).Inc()
	if err == nil {
		notificationLatency.WithLabelValues(typ, origin).Observe(time.Since(start).Seconds())
	}
}

// NotifyPollTimeout bounds one poll of the pending notifications.
const NotifyPollTimeout = 2 * time.Second

// PollNotifications takes the re-authorisations the ABM's sweep queued
// (chf.OpNotifications, through the charging core: the OCP passes it to
// an ABM) every interval until ctx ends, and sends each a REAUTHORIZATION
// (a Gy session: RAR). A full answer (chf.NotificationsMax targets) is
// followed by the next poll at once; every poll has a deadline
// (NotifyPollTimeout) and the sending its budget (NotifyBudget). With
// several ABMs each poll reaches the one the balancer picks, so every
// ABM's queue is drained in turn.
func (h *Handler) PollNotifications(ctx context.Context, interval time.Duration) {
	var req chf.ChargeRequest
	var resp chf.ChargeResponse
	for {
		req = chf.ChargeRequest{Op: chf.OpNotifications}
		pctx, cancel := context.WithTimeout(ctx, NotifyPollTimeout)
		err := h.charger.Charge(pctx, &req, &resp)
		cancel()
		full := false
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if n, ok := h.logLimit.Allow("notify poll"); ok {
				h.log.Warn("cannot poll pending notifications", "err", err, "failures", n)
			}
		case resp.Result == chf.ResultSuccess && len(resp.Targets) > 0:
			full = len(resp.Targets) >= chf.NotificationsMax
			h.sendNotifications(ctx, nil, resp.Targets, NotifyReauthorization, originSweep)
		}
		if full {
			continue
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
