package h2c

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts Write calls on a net.Conn.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// Requests queued with RoundTripQueued leave together on Flush: one write
// system call for the batch, every response delivered.
func TestRoundTripQueuedFlush(t *testing.T) {
	addr := startServer(t, &Server{Handler: echoHandler, InlineHandler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingConn{Conn: nc}
	c, err := NewConn(ctx, cc, &ClientOptions{CaptureHeaders: []string{"location"}})
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	defer c.Close()
	tmpl := NewRequestTemplate("POST", addr, "application/json")
	// One round trip first: the handshake's frames are written.
	var warm ClientResponse
	if err := c.Do(ctx, &ClientRequest{Template: tmpl, Path: []byte("/w"), Body: []byte("w")}, &warm); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 32} {
		before := cc.writes.Load()
		var wg sync.WaitGroup
		resps := make([]ClientResponse, n)
		var failed atomic.Int64
		for i := range n {
			wg.Add(1)
			body := []byte{byte('a' + i%26)}
			err := c.RoundTripQueued(&ClientRequest{Template: tmpl, Path: []byte("/q"), Body: body}, &resps[i], func(r *ClientResponse, err error) {
				if err != nil || r.Status != 201 || string(r.Body) != string(body) || string(r.Headers[0]) != "/loc/q" {
					failed.Add(1)
				}
				wg.Done()
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		c.Flush()
		wg.Wait()
		if f := failed.Load(); f > 0 {
			t.Fatalf("%d of %d queued requests failed", f, n)
		}
		// The batch takes one write when nothing else wakes the writer;
		// a frame the peer sends meanwhile (a WINDOW_UPDATE, a SETTINGS
		// or PING ack) wakes it and it writes what is queued so far, so
		// a loaded machine sees a few writes. Unbatched, every request
		// would take its own.
		limit := int64(max(2, n/4))
		if w := cc.writes.Load() - before; w < 1 || w > limit {
			t.Errorf("%d queued requests took %d writes, want 1 (at most %d)", n, w, limit)
		}
	}
	c.Flush() // nothing queued: harmless
}
