// Package operator calls the CHF's operator API on the load generator's
// behalf: POST /chf/v1/accounts/{supi}/reauthorize or /abort, which make
// the CHF notify the account's open sessions (ChargingNotify, Gy RAR or
// ASR). It implements engine.Operator: the engine asks for a call
// without blocking, a bounded set of goroutines makes it (HTTP/1.1 with a
// bearer token, each call bounded by a timeout), and Stats counts the
// calls, their answers and their latency.
//
// An abort also bars the account (no create or event until the operator
// unbars it): the Client lifts the bar with POST .../unbar as soon as the
// abort answers (whatever the answer), and keeps each account's bar
// window (from the abort call to the unbar's answer; open while the unbar
// has not succeeded) so that the engine can tell a request refused
// because of the run's own abort (Barred) from an error.
//
// The API answers once every notification is settled (the CHF waits for
// the notified SMF's answer), so a call's latency includes the
// notification's round trip to the load generator's notify server.
package operator

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/internal/readfile"
	"github.com/chf-testbed/testbed/loadgen/histogram"
)

// Paths of the operator API (cgw's AccountsBase, ReauthorizeSuffix and
// AbortSuffix; not imported: the load generator stays independent of the
// CHF's code).
const (
	PathAccounts      = "/chf/v1/accounts/"
	SuffixReauthorize = "/reauthorize"
	SuffixAbort       = "/abort"
	SuffixUnbar       = "/unbar"
)

// Defaults of Config.
const (
	DefaultConcurrency = 8
	DefaultQueue       = 1024
	DefaultTimeout     = 15 * time.Second // above the CHF's 10 s notification budget
)

// Config configures a Client.
type Config struct {
	// Targets are the CGW HTTP host:ports, used round robin.
	Targets []string
	// Token is the bearer token ("" sends none: a loopback CGW without
	// --operator-token-file accepts that).
	Token string
	// TLS, when set, calls https:// with it.
	TLS *tls.Config
	// Concurrency bounds the calls in flight, Queue the calls waiting;
	// Timeout bounds each call. Zero values take the defaults.
	Concurrency int
	Queue       int
	Timeout     time.Duration
}

// ReadToken reads a token file (surrounding white space removed); the
// CGW wants at least 16 characters, and a header carries visible ASCII
// only.
func ReadToken(path string) (string, error) {
	b, err := readfile.Read(path, readfile.MaxSecretBytes)
	if err != nil {
		return "", fmt.Errorf("cannot read --operator-token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 16 {
		return "", fmt.Errorf("cannot use --operator-token-file %s: the token must be at least 16 characters", path)
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return "", fmt.Errorf("cannot use --operator-token-file %s: the token has a character an HTTP header cannot carry (byte %#x at %d): want visible ASCII", path, t[i], i)
		}
	}
	return t, nil
}

// Stats are a Client's figures.
type Stats struct {
	Calls   int64 // calls made
	OK      int64 // answered 200
	Failed  int64 // another status, or no answer
	Dropped int64 // refused by Trigger: the queue was full
	// Statuses counts the answers by HTTP status (0: no answer).
	Statuses map[int]int64
	// Notified and NotifyFailed sum the answers' "notified" and
	// "failed" notification counts.
	Notified, NotifyFailed int64
	// Unbarred counts the unbar calls answered 200 after aborts,
	// UnbarFailed the others (the account stays barred).
	Unbarred, UnbarFailed int64
	Latency               *histogram.Histogram
	// LastError is the last failure's text ("" when none).
	LastError string
}

type call struct {
	supi  string
	abort bool
}

// Client makes operator calls. Trigger and Stats are safe for concurrent
// use.
type Client struct {
	cfg       Config
	hc        *http.Client
	scheme    string
	q         chan call
	wg        sync.WaitGroup
	ctx       context.Context
	cancel    context.CancelFunc
	next      atomic.Uint32
	closeOnce sync.Once

	mu sync.Mutex
	st Stats
	// bars are the accounts' bar windows by supi (under mu), pruned of
	// windows closed more than barKeep ago.
	bars      map[string]bar
	lastPrune time.Time
}

// bar is an account's bar window: from the abort call's start to the
// last unbar's answer. open counts the aborts of the account not yet
// followed by an unbar; stuck is set when the last unbar failed (the
// account stays barred: the window never closes).
type bar struct {
	from, until time.Time
	open        int
	stuck       bool
}

// closed reports whether b ended more than barKeep before t.
func (b *bar) closed(t time.Time) bool { return b.open == 0 && !b.stuck && t.Sub(b.until) > barKeep }

// ErrConfig is returned for an unusable Config.
var ErrConfig = errors.New("operator: invalid config")

// New starts a Client; Close stops it.
func New(cfg Config) (*Client, error) {
	if len(cfg.Targets) == 0 {
		return nil, fmt.Errorf("%w: no target", ErrConfig)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency, TLSClientConfig: cfg.TLS, IdleConnTimeout: time.Minute}
	c := &Client{cfg: cfg, hc: &http.Client{Transport: tr, Timeout: cfg.Timeout}, scheme: "http://",
		q: make(chan call, cfg.Queue)}
	if cfg.TLS != nil {
		c.scheme = "https://"
	}
	c.st.Statuses = map[int]int64{}
	c.bars = map[string]bar{}
	c.st.Latency = histogram.New()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for range cfg.Concurrency {
		c.wg.Add(1)
		go c.run()
	}
	return c, nil
}

// Trigger implements engine.Operator: it queues a call re-authorising
// (or aborting) every open session of supi; false when the queue is full.
func (c *Client) Trigger(supi []byte, abort bool) bool {
	select {
	case c.q <- call{supi: string(supi), abort: abort}:
		return true
	default:
		c.mu.Lock()
		c.st.Dropped++
		c.mu.Unlock()
		return false
	}
}

// Close stops taking calls, waits for the queued ones (each bounded by
// the timeout) for at most wait, then cancels what is left.
func (c *Client) Close(wait time.Duration) {
	c.closeOnce.Do(func() { close(c.q) })
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.cancel()
		<-done
	}
	c.cancel()
	c.hc.CloseIdleConnections()
}

// Stats returns a copy of the figures so far.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.Statuses = make(map[int]int64, len(c.st.Statuses))
	for k, v := range c.st.Statuses {
		s.Statuses[k] = v
	}
	s.Latency = histogram.New()
	s.Latency.Merge(c.st.Latency)
	return s
}

func (c *Client) run() {
	defer c.wg.Done()
	var body []byte
	for k := range c.q {
		t := c.cfg.Targets[int(c.next.Add(1))%len(c.cfg.Targets)]
		suffix := SuffixReauthorize
		if k.abort {
			suffix = SuffixAbort
		}
		url := c.scheme + t + PathAccounts + k.supi + suffix
		t0 := time.Now()
		if k.abort {
			c.barFrom(k.supi, t0)
		}
		status, b, err := c.post(url, body[:0])
		body = b
		el := time.Since(t0)
		var notified, failed int64
		if err == nil && status == http.StatusOK {
			notified, failed = summary(b)
		}
		c.mu.Lock()
		c.st.Calls++
		c.st.Statuses[status]++
		c.st.Latency.Record(el)
		switch {
		case err != nil:
			c.st.Failed++
			c.st.LastError = err.Error()
		case status != http.StatusOK:
			c.st.Failed++
			c.st.LastError = fmt.Sprintf("%s answered %d: %s", url, status, bytes.TrimSpace(b))
		default:
			c.st.OK++
			c.st.Notified += notified
			c.st.NotifyFailed += failed
		}
		c.mu.Unlock()
		if k.abort {
			body = c.unbar(t, k.supi, body[:0])
		}
	}
}

// barKeep is how long a closed bar window is kept: longer than any
// request sent in it can take to be answered.
const barKeep = 2 * DefaultTimeout

// maxBars bounds the bar windows kept.
const maxBars = 1 << 16

// barFrom opens (or extends) supi's bar window at t.
func (c *Client) barFrom(supi string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bars) >= 1024 && t.Sub(c.lastPrune) > time.Second {
		c.lastPrune = t
		for s, b := range c.bars {
			if b.closed(t) {
				delete(c.bars, s)
			}
		}
	}
	b, ok := c.bars[supi]
	if !ok && len(c.bars) >= maxBars {
		return // not tracked: refusals in it count as errors
	}
	if !ok || b.closed(t) {
		b = bar{from: t}
	}
	// An overlapping or recent window is extended: the window kept is
	// their hull.
	b.open++
	c.bars[supi] = b
}

// unbar lifts the bar of supi after its abort; the window closes at the
// answer of the account's last pending unbar, unless that one failed.
func (c *Client) unbar(target, supi string, buf []byte) []byte {
	url := c.scheme + target + PathAccounts + supi + SuffixUnbar
	status, b, err := c.post(url, buf)
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := err == nil && status == http.StatusOK
	switch {
	case ok:
		c.st.Unbarred++
	case err != nil:
		c.st.UnbarFailed++
		c.st.LastError = err.Error()
	default:
		c.st.UnbarFailed++
		c.st.LastError = fmt.Sprintf("%s answered %d: %s", url, status, bytes.TrimSpace(b))
	}
	bw, tracked := c.bars[supi]
	if !tracked {
		return b
	}
	if bw.open--; bw.open <= 0 {
		bw.open, bw.until, bw.stuck = 0, time.Now(), !ok
	}
	c.bars[supi] = bw
	return b
}

// Barred implements engine.Operator: whether a request for supi sent at
// sent and answered at done may have met a bar this Client's abort put
// on the account (their spans overlap).
func (c *Client) Barred(supi []byte, sent, done time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.bars[string(supi)]
	if !ok {
		return false
	}
	return done.After(b.from) && (b.open > 0 || b.stuck || sent.Before(b.until))
}

// post makes one call and reads (at most 4 KiB of) the answer into buf.
func (c *Client) post(url string, buf []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, url, nil)
	if err != nil {
		return 0, buf, fmt.Errorf("cannot call the operator API: %w", err)
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, buf, fmt.Errorf("cannot call the operator API: %w", err)
	}
	defer resp.Body.Close()
	w := bytes.NewBuffer(buf)
	_, err = io.Copy(w, io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, w.Bytes(), err
}

// summary reads "notified" and "failed" of the API's answer
// ({"sessions":N,"withNotifyUri":N,"notified":N,"failed":N}).
func summary(b []byte) (notified, failed int64) {
	return field(b, `"notified":`), field(b, `"failed":`)
}

func field(b []byte, name string) int64 {
	i := bytes.Index(b, []byte(name))
	if i < 0 {
		return 0
	}
	var v int64
	for _, ch := range b[i+len(name):] {
		if ch < '0' || ch > '9' {
			break
		}
		v = v*10 + int64(ch-'0')
	}
	return v
}
