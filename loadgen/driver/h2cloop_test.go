//go:build linux && (amd64 || arm64)

package driver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
)

// startH2C serves handler on a loopback port with the given stream limit;
// close stops it (connections included).
func startH2C(t *testing.T, maxStreams uint32, handler h2c.Handler) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h2c.Server{Handler: handler, MaxConcurrentStreams: maxStreams}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			s.Close()
			<-done
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

func newLoop(t *testing.T, proto, addr string, conns int) (Driver, Loop) {
	t.Helper()
	d, err := New(Config{Proto: proto, Targets: []string{addr}, Conns: conns, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	l, err := d.(Looper).NewLoop()
	if err != nil {
		t.Fatal(err)
	}
	return d, l
}

// pollUntil polls l until cond holds (fails the test after 5 s).
func pollUntil(t *testing.T, l Loop, wake bool, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out polling the loop")
		}
		if err := l.Poll(5*time.Millisecond, wake); err != nil {
			t.Fatal(err)
		}
	}
}

// The loop sends queued requests in one flush, dials another connection
// when the first is at the server's stream limit, completes every request
// on the polling goroutine with its arrival time, and fails what is in
// flight when the server goes away.
func TestLoop(t *testing.T) {
	for _, wake := range []bool{true, false} {
		t.Run("wake="+strconv.FormatBool(wake), func(t *testing.T) {
			hold := make(chan struct{})
			addr, stop := startH2C(t, 4, func(w *h2c.Response, r *h2c.Request) {
				if string(r.Path) == "/hold" {
					<-hold
				}
				w.SetHeader("content-type", "application/json")
				w.AddHeaderBytes("location", r.Path)
				w.AddHeaderInt("x-chf-charged", 7)
				w.WriteString(`{"ok":true}`)
			})
			_, l := newLoop(t, "h2c", addr, 3)
			defer l.Close()
			const n = 10 // 3 connections x 4 streams hold them
			reqs := make([]Request, n)
			resps := make([]Response, n)
			errs := make([]error, n)
			var done int
			for i := range n {
				reqs[i] = Request{Method: "POST", Path: []byte("/r/" + strconv.Itoa(i)), Body: []byte(`{}`)}
				i := i
				if err := l.Queue(&reqs[i], &resps[i], func(err error) { errs[i] = err; done++ }); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			l.Flush()
			pollUntil(t, l, wake, func() bool { return done == n })
			for i, r := range resps {
				if errs[i] != nil || r.Status != 200 || string(r.Location) != "/r/"+strconv.Itoa(i) || !r.HasCharged || r.Charged != 7 {
					t.Fatalf("request %d: err %v status %d location %q charged %d/%v", i, errs[i], r.Status, r.Location, r.Charged, r.HasCharged)
				}
				if r.Received.IsZero() || r.Received.After(time.Now()) {
					t.Fatalf("request %d: arrival time %v", i, r.Received)
				}
			}
			if hl := l.(*h2cLoop); len(hl.live) != 3 {
				t.Fatalf("%d connections for %d requests with 4 streams each, want 3", len(hl.live), n)
			}
			// More than 3 x 4 requests in flight: the last is refused.
			var held int
			var heldErrs []error
			for i := range 13 {
				var resp Response
				err := l.Queue(&Request{Method: "GET", Path: []byte("/hold")}, &resp, func(err error) { heldErrs = append(heldErrs, err); held-- })
				if i < 12 && err != nil {
					t.Fatalf("held request %d: %v", i, err)
				}
				if i == 12 && !errors.Is(err, ErrConnection) {
					t.Fatalf("request beyond every stream limit: %v, want ErrConnection", err)
				}
				if err == nil {
					held++
				}
			}
			l.Flush()
			// The server goes away: every held request fails as a
			// connection error, on this goroutine.
			go func() { time.Sleep(50 * time.Millisecond); close(hold); stop() }()
			pollUntil(t, l, wake, func() bool { return held == 0 })
			for _, err := range heldErrs {
				if err != nil && !errors.Is(err, ErrConnection) {
					t.Fatalf("held request failed with %v, want ErrConnection", err)
				}
			}
		})
	}
}

// A response read at the next tick (Poll without wake) still carries the
// time it arrived, not the time the loop handled it.
func TestLoopArrivalTime(t *testing.T) {
	addr, _ := startH2C(t, 100, func(w *h2c.Response, r *h2c.Request) { w.WriteString("{}") })
	_, l := newLoop(t, "h2c", addr, 1)
	defer l.Close()
	var done bool
	var resp Response
	warm := func() {
		done = false
		if err := l.Start(&Request{Method: "GET", Path: []byte("/x")}, &resp, func(error) { done = true }); err != nil {
			t.Fatal(err)
		}
	}
	warm()
	pollUntil(t, l, true, func() bool { return done })
	// The loop sleeps for maxPollWait before it reads; a response that
	// reached the socket well before that must carry its arrival time,
	// not the time the loop handled it. On a loaded machine the server
	// may answer late (just before the loop wakes): such attempts prove
	// nothing and are tried again.
	const sleep = maxPollWait
	var last string
	for range 8 {
		sent := time.Now()
		warm()
		if err := l.Poll(sleep, false); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, l, false, func() bool { return done })
		handled := time.Now()
		if resp.Received.Before(sent) || resp.Received.After(handled) {
			t.Fatalf("arrival %v after the send, outside [send, handled %v]", resp.Received.Sub(sent), handled.Sub(sent))
		}
		if handled.Sub(resp.Received) >= sleep/4 {
			return // stamped well before it was handled: the arrival time
		}
		last = fmt.Sprintf("arrival %v after the send, handled %v after", resp.Received.Sub(sent), handled.Sub(sent))
	}
	t.Fatalf("in 8 attempts the arrival time was never well before the handling time (last: %s): it is the handling time", last)
}

// "h2c-async" keeps the connections' goroutines: no event loop.
func TestAsyncHasNoLoop(t *testing.T) {
	d, err := New(Config{Proto: "h2c-async", Targets: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.(Looper).NewLoop(); !errors.Is(err, ErrNoLoop) {
		t.Fatalf("NewLoop: %v, want ErrNoLoop", err)
	}
}
