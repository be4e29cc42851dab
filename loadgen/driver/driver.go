// Package driver sends the load generator's requests over a protocol: HTTP/2
// cleartext with prior knowledge ("h2c", the project's lean chassis/h2c
// client, driven by the caller's event loop where the platform allows, see
// Looper; "h2c-async", the same client with a reader and a writer
// goroutine per connection; "h2c-std", golang.org/x/net/http2.Transport,
// for comparison),
// HTTP/1.1 ("http1", fasthttp) or Diameter Gy ("gy", loadgen/gy; it takes
// protocol-neutral Request.Charge descriptions, see Charging). Every
// driver balances requests over several targets (CGW addresses) as the
// caller chooses by index, and classifies transport failures.
//
// A Driver is safe for concurrent use. Request and Response are owned by the
// caller; a driver never keeps them after Do returns.
package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
)

// Errors a Do call returns, wrapped.
var (
	ErrTimeout    = errors.New("driver: timeout")
	ErrConnection = errors.New("driver: connection failed")
	ErrProto      = errors.New("driver: unknown protocol")
)

// Request is one HTTP request.
type Request struct {
	Target int    // index into the driver's targets
	Method string // "GET" or "POST"
	Path   []byte // absolute path, e.g. /nchf-convergedcharging/v3/chargingdata
	Body   []byte // JSON body; nil for GET
	// Charge describes the transaction for Charging drivers (gy), which
	// ignore Method, Path and Body; HTTP drivers ignore it.
	Charge *Charge
}

// Response is what Do fills. Body and Location are reused across calls: Do
// truncates and appends.
type Response struct {
	Status   int
	Body     []byte
	Location []byte
	// Charged is the X-Chf-Charged header; HasCharged tells whether it was
	// present and valid.
	Charged    int64
	HasCharged bool
	// Received, when set (event-loop drivers, see Loop), is when the
	// response reached the client's socket; zero means when Do returned
	// or the done callback ran.
	Received time.Time
	// Class, set by Charging drivers, names why an answered request
	// failed ("gy_5030", "rg_4012"); empty = success. HTTP drivers leave
	// it empty: the engine classifies their status and body.
	Class string

	gy gyState // reused by the gy driver

	h2     h2c.ClientResponse // reused by the h2c driver
	h2req  h2c.ClientRequest  // the request in flight (async h2c)
	h2cb   func(*h2c.ClientResponse, error)
	h2lcb  func(*h2c.ClientResponse, error) // h2cb behind an event loop's arrival stamp
	h2done func(error)
}

// Reset clears r, keeping its buffers.
func (r *Response) Reset() {
	r.Status = 0
	r.Body = r.Body[:0]
	r.Location = r.Location[:0]
	r.Charged = 0
	r.HasCharged = false
	r.Class = ""
	r.Received = time.Time{}
}

// Driver sends requests.
type Driver interface {
	// Do sends req and fills resp (which it resets first). A transport
	// failure returns an error wrapping ErrTimeout or ErrConnection; any
	// HTTP status is a successful Do.
	Do(ctx context.Context, req *Request, resp *Response) error
	// Targets returns the number of targets.
	Targets() int
	// Close releases connections.
	Close()
}

// Async is implemented by drivers that can send without a goroutine per
// request in flight.
type Async interface {
	// Start sends req and calls done once resp is filled (nil) or the
	// request failed (an error wrapping ErrTimeout or ErrConnection).
	// done runs on a driver goroutine: it must be quick and must not
	// block. An error returned by Start itself means done is not called.
	// req and resp must not be touched until done is called. There is no
	// timeout: the caller gives up on a request itself (and must then
	// abandon req and resp, which the driver may still write).
	Start(req *Request, resp *Response, done func(error)) error
}

// Config selects and tunes a driver.
type Config struct {
	Proto   string   // "h2c" (default), "h2c-async", "h2c-std", "http1" or "gy"
	Targets []string // host:port (the CGW's Nchf port, or its Diameter port for gy)
	// Conns is the number of connections per target (HTTP/2: streams are
	// multiplexed on them; HTTP/1.1: the pool size; gy: Diameter peers,
	// each its own Origin-Host). 0 = default.
	Conns   int
	Timeout time.Duration
}

// ParseTargets splits "http://a:1,http://b:2" and checks every URL; the
// returned values are host:port.
func ParseTargets(s string) ([]string, error) {
	return parseTargets(s, "http", "only http:// (cleartext) is supported", false)
}

// parseTargets splits a comma list of scheme://HOST:PORT (the scheme may
// be omitted) and returns the host:port of each; wrong says what to use
// instead when a target has another scheme; needHost refuses an empty
// host.
func parseTargets(s, scheme, wrong string, needHost bool) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !strings.Contains(t, "://") {
			t = scheme + "://" + t
		}
		u, err := url.Parse(t)
		if err != nil {
			return nil, fmt.Errorf("cannot parse target %q: %w", t, err)
		}
		if u.Scheme != scheme {
			return nil, fmt.Errorf("cannot use target %q: %s", t, wrong)
		}
		switch {
		case needHost && (u.Port() == "" || u.Hostname() == ""):
			return nil, fmt.Errorf("cannot use target %q: host or port missing", t)
		case u.Port() == "":
			return nil, fmt.Errorf("cannot use target %q: port missing", t)
		}
		out = append(out, u.Host)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cannot use targets %q: none given", s)
	}
	return out, nil
}

// New builds the driver cfg names.
func New(cfg Config) (Driver, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	switch cfg.Proto {
	case "", "h2c":
		return newH2C(cfg)
	case "h2c-async":
		d, err := newH2C(cfg)
		if d != nil {
			d.noLoop = true
		}
		return d, err
	case "h2c-std":
		return newStdH2(cfg)
	case "http1":
		return newHTTP1(cfg)
	case "gy":
		return newGy(cfg)
	}
	return nil, fmt.Errorf("%w %q (want h2c, h2c-async, h2c-std, http1 or gy)", ErrProto, cfg.Proto)
}

// classify wraps a transport error as timeout or connection.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) || strings.Contains(err.Error(), "timeout") {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %v", ErrConnection, err)
}
