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
	x.Body = h.sendNotifications(ctx, x.Body[:0], x.resp.Targets, typ)
}

// sendNotifications notifies targets concurrently (bounded per
// destination by the Notifier) and appends the summary JSON.
func (h *Handler) sendNotifications(_ context.Context, dst []byte, targets []chf.NotifyTarget, typ string) []byte {
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
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				h.log.Warn("charging notification failed", "type", typ, "err", err)
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
