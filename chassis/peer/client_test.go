package peer

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/hop"
	"github.com/chf-testbed/testbed/chassis/server"
)

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Peer == "" {
		cfg.Peer = "peer"
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestClientDo(t *testing.T) {
	var hits [2]atomic.Int64
	var servers [2]*server.Server
	for i := range servers {
		i := i
		servers[i] = startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) {
			hits[i].Add(1)
			switch string(ctx.Path()) {
			case "/echo":
				if len(ctx.Request.Header.Peek(hop.DeadlineHeader)) == 0 {
					ctx.Error("no deadline header", 400)
					return
				}
				ctx.SetBody(ctx.PostBody())
			case "/missing":
				ctx.Error("no such thing", 404)
			}
		}})
	}
	c := newClient(t, Config{Source: discovery.Static(servers[0].Addr(), servers[1].Addr())})
	ctx := context.Background()
	var dst []byte
	for i := 0; i < 200; i++ {
		var err error
		dst, err = c.Do(ctx, "/echo", []byte("hello"), dst[:0])
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		if string(dst) != "hello" {
			t.Fatalf("Do body = %q", dst)
		}
	}
	if hits[0].Load() == 0 || hits[1].Load() == 0 {
		t.Errorf("calls not spread over endpoints: %d / %d", hits[0].Load(), hits[1].Load())
	}
	dst, err := c.Do(ctx, "/missing", nil, []byte("keep"))
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 404 || !strings.Contains(string(se.Body), "no such thing") {
		t.Fatalf("Do /missing err = %v", err)
	}
	if string(dst) != "keep" {
		t.Errorf("dst changed on error: %q", dst)
	}
}

func TestClientDeadline(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) { <-release }})
	defer close(release)
	c := newClient(t, Config{Source: discovery.Static(s.Addr()), Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := c.Do(context.Background(), "/slow", nil, nil)
	if err == nil || !errors.Is(err, fasthttp.ErrTimeout) {
		t.Fatalf("Do err = %v, want timeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Do took %v with a 100ms timeout", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, "/slow", nil, nil); !errors.Is(err, fasthttp.ErrTimeout) {
		t.Fatalf("Do with ctx deadline err = %v", err)
	}
}

// TestClientRetriesRefused checks a refused connection is retried on the
// other endpoint, and the dead endpoint ejected before the retry budget
// (10 retries at start) runs out.
func TestClientRetriesRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	s := startServer(t, server.Config{Handler: echoHandler})
	c := newClient(t, Config{Source: discovery.Static(dead, s.Addr())})
	for i := 0; i < 100; i++ {
		if _, err := c.Do(context.Background(), "/x", []byte("a"), nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

func TestClientNoEndpoints(t *testing.T) {
	c := newClient(t, Config{Source: sourceFunc(func(ctx context.Context, _ func([]discovery.Endpoint)) error {
		<-ctx.Done()
		return nil
	}), Timeout: 50 * time.Millisecond})
	if _, err := c.Do(context.Background(), "/x", nil, nil); !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("Do err = %v, want ErrNoEndpoints", err)
	}
}

// TestClientFollowsUpdates checks that endpoint changes take effect.
func TestClientFollowsUpdates(t *testing.T) {
	a := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("a") }})
	b := startServer(t, server.Config{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("b") }})
	src := newManualSource()
	c := newClient(t, Config{Source: src})
	src.set(a.Addr())
	call := func(want string) {
		t.Helper()
		got, err := c.Do(context.Background(), "/", nil, nil)
		if err != nil || string(got) != want {
			t.Fatalf("Do = %q, %v; want %q", got, err, want)
		}
	}
	call("a")
	src.set(b.Addr())
	waitFor(t, func() bool { e := c.Endpoints(); return len(e) == 1 && e[0] == b.Addr() })
	call("b")
}

type sourceFunc func(ctx context.Context, update func([]discovery.Endpoint)) error

func (f sourceFunc) Run(ctx context.Context, update func([]discovery.Endpoint)) error {
	return f(ctx, update)
}

// manualSource delivers the sets given to set.
type manualSource struct {
	mu  sync.Mutex
	ch  chan []discovery.Endpoint
	cur []discovery.Endpoint
}

func newManualSource() *manualSource { return &manualSource{ch: make(chan []discovery.Endpoint, 16)} }

func (m *manualSource) set(addrs ...string) {
	eps := make([]discovery.Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = discovery.Endpoint{Addr: a}
	}
	m.ch <- eps
}

func (m *manualSource) Run(ctx context.Context, update func([]discovery.Endpoint)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case eps := <-m.ch:
			update(eps)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClientDoAllocs locks in the allocation-free steady state of Do and of
// the server's request path.
func TestClientDoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	s := startServer(t, server.Config{Handler: echoHandler})
	c := newClient(t, Config{Source: discovery.Static(s.Addr())})
	body := []byte("0123456789")
	dst := make([]byte, 0, 64)
	ctx := context.Background()
	for i := 0; i < 10; i++ { // warm pools and connections
		if _, err := c.Do(ctx, "/ocp/v1/charge", body, dst[:0]); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Do(ctx, "/ocp/v1/charge", body, dst[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("Do allocates %.1f times per call, want 0", allocs)
	}
}
