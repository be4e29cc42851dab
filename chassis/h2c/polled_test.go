package h2c

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// pump drives a polled Conn over nc the way an event loop does: it writes
// what the Conn queued and feeds what it reads, in chunks of random size
// (1 byte up to max) so that frames arrive split at every boundary.
type pump struct {
	t   *testing.T
	c   *Conn
	nc  net.Conn
	rng *rand.Rand
	max int
}

func (p *pump) flush() {
	if out := p.c.AppendOutput(nil); len(out) > 0 {
		if _, err := p.nc.Write(out); err != nil {
			p.t.Fatalf("write: %v", err)
		}
	}
}

// step reads once (waiting at most d) and feeds the bytes in random
// chunks; it returns the read error (nil on timeout).
func (p *pump) step(d time.Duration) error {
	buf := make([]byte, 4096)
	p.nc.SetReadDeadline(time.Now().Add(d))
	n, err := p.nc.Read(buf)
	for b := buf[:n]; len(b) > 0; {
		k := min(len(b), 1+p.rng.IntN(p.max))
		if ferr := p.c.Feed(b[:k]); ferr != nil {
			return ferr
		}
		b = b[k:]
	}
	p.flush()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
}

func newPump(t *testing.T, addr string, max int) *pump {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	p := &pump{t: t, c: NewPolledConn(&ClientOptions{CaptureHeaders: []string{"x-echo"}}), nc: nc, rng: rand.New(rand.NewPCG(1, uint64(max))), max: max}
	p.flush()
	deadline := time.Now().Add(5 * time.Second)
	for !p.c.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("no SETTINGS from the server")
		}
		if err := p.step(100 * time.Millisecond); err != nil {
			t.Fatalf("handshake: %v", err)
		}
	}
	return p
}

// A polled connection completes requests whose frames arrive split
// anywhere, on the owner's goroutine, against this package's server and
// x/net/http2's; bodies larger than a frame and the stream limit included.
func TestPolledConn(t *testing.T) {
	handler := func(w *Response, r *Request) {
		w.AddHeaderBytes("x-echo", r.Path)
		w.Write(bytes.Repeat(r.Body, 3))
	}
	std := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("x-echo", r.URL.Path)
		w.Write(bytes.Repeat(b, 3))
	}
	servers := map[string]string{
		"h2c":    startServer(t, &Server{Handler: handler, MaxConcurrentStreams: 50}),
		"x/net":  stdServer(t, 50, http.HandlerFunc(std)),
		"inline": startServer(t, &Server{Handler: handler, MaxConcurrentStreams: 50, InlineHandler: true}),
	}
	for name, addr := range servers {
		for _, max := range []int{1, 7, 4096} {
			t.Run(fmt.Sprintf("%s/chunks<=%d", name, max), func(t *testing.T) {
				p := newPump(t, addr, max)
				if p.c.MaxStreams() != 50 {
					t.Fatalf("MaxStreams %d, want the server's 50", p.c.MaxStreams())
				}
				tmpl := NewRequestTemplate("POST", addr, "application/json")
				const n = 60
				resps := make([]ClientResponse, n)
				done := 0
				var started, limited int
				for i := range n {
					body := bytes.Repeat([]byte{byte('a' + i%26)}, 100*i) // up to ~6 KB, x3 in the answer
					req := &ClientRequest{Template: tmpl, Path: []byte("/p/" + strconv.Itoa(i)), Body: body}
					i := i
					err := p.c.RoundTripQueued(req, &resps[i], func(r *ClientResponse, err error) {
						if err != nil {
							t.Errorf("request %d: %v", i, err)
						} else if r.Status != 200 || len(r.Body) != 300*i || string(r.Headers[0]) != "/p/"+strconv.Itoa(i) {
							t.Errorf("request %d: status %d, %d body bytes, x-echo %q", i, r.Status, len(r.Body), r.Headers[0])
						}
						done++
					})
					switch {
					case errors.Is(err, ErrStreamLimit):
						limited++
					case err != nil:
						t.Fatal(err)
					default:
						started++
					}
				}
				if started != 50 || limited != 10 {
					t.Fatalf("started %d, refused at the stream limit %d; want 50 and 10", started, limited)
				}
				p.flush() // every request in one write
				deadline := time.Now().Add(10 * time.Second)
				for done < started && time.Now().Before(deadline) {
					if err := p.step(100 * time.Millisecond); err != nil {
						t.Fatal(err)
					}
				}
				if done != started || p.c.Active() != 0 {
					t.Fatalf("%d of %d callbacks ran, %d streams active", done, started, p.c.Active())
				}
			})
		}
	}
}

// When the socket ends, Fail fails the streams in flight (callbacks run
// before it returns) and the connection refuses new requests; Do is
// refused on a polled connection.
func TestPolledConnFail(t *testing.T) {
	release := make(chan struct{})
	addr := startServer(t, &Server{Handler: func(w *Response, r *Request) { <-release }})
	defer close(release)
	p := newPump(t, addr, 4096)
	tmpl := NewRequestTemplate("GET", addr, "")
	var got []error
	for range 3 {
		var resp ClientResponse
		if err := p.c.RoundTripQueued(&ClientRequest{Template: tmpl, Path: []byte("/x")}, &resp, func(_ *ClientResponse, err error) { got = append(got, err) }); err != nil {
			t.Fatal(err)
		}
	}
	p.flush()
	if err := p.c.Do(t.Context(), &ClientRequest{Template: tmpl, Path: []byte("/x")}, &ClientResponse{}); err == nil {
		t.Fatal("Do on a polled connection did not fail")
	}
	p.nc.Close()
	p.c.Fail(io.EOF)
	if len(got) != 3 {
		t.Fatalf("%d callbacks ran in Fail, want 3", len(got))
	}
	for _, err := range got {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("stream failed with %v, want ErrClosed", err)
		}
	}
	if err := p.c.RoundTrip(&ClientRequest{Template: tmpl, Path: []byte("/x")}, &ClientResponse{}, func(*ClientResponse, error) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("RoundTrip after Fail: %v, want ErrClosed", err)
	}
}

// A protocol violation by the server makes Feed fail with a GOAWAY queued.
func TestPolledConnProtocolError(t *testing.T) {
	c := NewPolledConn(nil)
	c.AppendOutput(nil)
	// A DATA frame as the first frame (not SETTINGS).
	if err := c.Feed([]byte{0, 0, 1, 0, 0, 0, 0, 0, 1, 'x'}); err == nil {
		t.Fatal("Feed accepted DATA before SETTINGS")
	}
	out := c.AppendOutput(nil)
	if len(out) < frameHeaderLen || out[3] != 0x7 { // GOAWAY
		t.Fatalf("no GOAWAY queued after the protocol error: % x", out)
	}
	c.Fail(nil)
}
