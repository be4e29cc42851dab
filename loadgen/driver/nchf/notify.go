package nchf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// PathNotify is the path prefix of the notifyUri the driver's creates
// carry; the flow's decimal Charge.Flow follows it.
const PathNotify = "/notify/"

// Bounds of the notify server: a notification is a small JSON object,
// answered at once (the handler never blocks), so few streams and small
// bodies suffice; an idle or stalled CHF connection is closed.
const (
	notifyMaxStreams = 64
	notifyMaxBody    = 4 << 10
	notifyIdle       = 30 * time.Second
)

// notifyServer is the SMF side of ChargingNotify: an HTTP/2 cleartext
// server (chassis/h2c) that hands each well-formed notification to the
// sink as a driver.Notice and answers 204; 503 when the sink has no room
// (or none is set: the CHF retries), 404 for a path that names no flow,
// 400 for a body without a known notificationType, 405 for another method.
type notifyServer struct {
	ln   net.Listener
	srv  *h2c.Server
	base string // "http://<addr>/notify/"
	sink atomic.Pointer[driver.NoticeSink]
	done chan struct{}
	// malformed counts requests refused as not a notification.
	malformed atomic.Int64
}

// startNotify listens on addr and serves notifications until close.
func startNotify(addr string, timeout time.Duration) (*notifyServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for notifications on %s: %w", addr, err)
	}
	ta := ln.Addr().(*net.TCPAddr)
	if ta.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("cannot advertise the notifyUri of %s: give an address the CHF can reach, not %s", addr, ta.IP)
	}
	s := &notifyServer{ln: ln, base: "http://" + ln.Addr().String() + PathNotify, done: make(chan struct{})}
	s.srv = &h2c.Server{
		Handler:              s.serve,
		InlineHandler:        true, // the sink never blocks
		MaxConcurrentStreams: notifyMaxStreams,
		MaxBodySize:          notifyMaxBody,
		IdleTimeout:          max(notifyIdle, 2*timeout),
		Logger:               slog.Default().With("component", "loadgen-notify"),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, h2c.ErrServerClosed) {
			slog.Warn("notify server stopped", "err", err)
		}
	}()
	return s, nil
}

// close stops the server: in-flight notifications get up to a second.
func (s *notifyServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	<-s.done
}

var (
	notifyAbort  = []byte(`"ABORT_CHARGING"`)
	notifyReauth = []byte(`"REAUTHORIZATION"`)
	notifyType   = []byte(`"notificationType"`)
)

// serve handles one ChargingNotifyRequest.
func (s *notifyServer) serve(w *h2c.Response, r *h2c.Request) {
	if string(r.Method) != "POST" {
		w.SetStatus(405)
		return
	}
	rest, ok := bytes.CutPrefix(r.Path, []byte(PathNotify))
	flow, err := strconv.ParseUint(string(rest), 10, 64)
	if !ok || err != nil {
		w.SetStatus(404)
		return
	}
	n, ok := parseNotification(r.Body)
	if !ok {
		s.malformed.Add(1)
		w.SetStatus(400)
		return
	}
	n.Flow, n.Received = flow, time.Now()
	if sink := s.sink.Load(); sink == nil || !(*sink)(n) {
		w.SetStatus(503)
		return
	}
	w.SetStatus(204)
}

// parseNotification reads the notificationType of a ChargingNotifyRequest
// body: REAUTHORIZATION or ABORT_CHARGING.
func parseNotification(body []byte) (driver.Notice, bool) {
	i := bytes.Index(body, notifyType)
	if i < 0 {
		return driver.Notice{}, false
	}
	v := bytes.TrimLeft(body[i+len(notifyType):], " \t\r\n")
	v, ok := bytes.CutPrefix(v, []byte(":"))
	if !ok {
		return driver.Notice{}, false
	}
	v = bytes.TrimLeft(v, " \t\r\n")
	switch {
	case bytes.HasPrefix(v, notifyAbort):
		return driver.Notice{Abort: true}, true
	case bytes.HasPrefix(v, notifyReauth):
		return driver.Notice{}, true
	}
	return driver.Notice{}, false
}

// SetNoticeSink implements driver.Notifiable: false without a notify
// listener (driver.Config.NotifyListen).
func (d *Driver) SetNoticeSink(sink driver.NoticeSink) bool {
	if d.notify == nil {
		return false
	}
	d.notify.sink.Store(&sink)
	return true
}

// NotifyBase returns the notifyUri prefix the creates carry ("" without a
// notify listener).
func (d *Driver) NotifyBase() string {
	if d.notify == nil {
		return ""
	}
	return d.notify.base
}
