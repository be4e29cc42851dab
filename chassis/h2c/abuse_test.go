package h2c

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// waitClosed waits until the server has no open connection.
func waitClosed(t *testing.T, s *Server, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for s.Stats().ConnsOpen > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("connection still open after %v: %+v", within, s.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRapidReset (CVE-2023-44487): a client that opens streams and resets
// them at once gets GOAWAY(ENHANCE_YOUR_CALM); reset streams whose handler
// runs keep counting against MaxConcurrentStreams, so the handlers running
// at once never exceed it.
func TestRapidReset(t *testing.T) {
	t.Run("resets before the request ends", func(t *testing.T) {
		s := &Server{Handler: echoHandler}
		_, fr := rawConn(t, startServer(t, s))
		fr.WriteSettings()
		go func() {
			for id := uint32(1); id < 4000; id += 2 {
				if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: headerBlock(postBlock...), EndHeaders: true}) != nil ||
					fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
					return
				}
			}
		}()
		expectGoAway(t, fr, http2.ErrCodeEnhanceYourCalm)
	})
	t.Run("handlers bounded", func(t *testing.T) {
		var running, peak atomic.Int64
		release := make(chan struct{})
		s := &Server{MaxConcurrentStreams: 8, Handler: func(w *Response, r *Request) {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			<-release
			running.Add(-1)
		}}
		c, fr := rawConn(t, startServer(t, s))
		fr.WriteSettings()
		for id := uint32(1); id < 400; id += 2 {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: headerBlock(getBlock...), EndHeaders: true, EndStream: true})
			fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		time.Sleep(200 * time.Millisecond)
		close(release)
		c.Close()
		if p := peak.Load(); p > 8 || p == 0 {
			t.Fatalf("peak concurrent handlers %d, want 1..8 (MaxConcurrentStreams)", p)
		}
	})
}

var postBlock = []string{":method", "POST", ":scheme", "http", ":path", "/", ":authority", "x"}

// TestContinuationFlood (CVE-2024-27316): a header block that never ends
// is cut off, by bytes and by frame count, with GOAWAY(ENHANCE_YOUR_CALM).
func TestContinuationFlood(t *testing.T) {
	for name, frag := range map[string][]byte{"bytes": make([]byte, 1024), "empty frames": nil} {
		t.Run(name, func(t *testing.T) {
			s := &Server{Handler: echoHandler}
			_, fr := rawConn(t, startServer(t, s))
			fr.WriteSettings()
			block := headerBlock(getBlock...)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:4]})
			go func() {
				// Literal header fields, never indexed, of a huge value:
				// valid HPACK that never ends.
				for i := 0; i < 10000; i++ {
					f := frag
					if f != nil {
						f[0] = 0x10 // literal without indexing, new name
					}
					if fr.WriteContinuation(1, false, f) != nil {
						return
					}
				}
			}()
			expectGoAway(t, fr, http2.ErrCodeEnhanceYourCalm)
		})
	}
}

// TestControlFloods: a client that floods PING or SETTINGS and never reads
// the acknowledgements is disconnected; its backlog of answers is bounded.
func TestControlFloods(t *testing.T) {
	for name, send := range map[string]func(fr *http2.Framer) error{
		"PING":     func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{1}) },
		"SETTINGS": func(fr *http2.Framer) error { return fr.WriteSettings() },
	} {
		t.Run(name, func(t *testing.T) {
			s := &Server{Handler: echoHandler}
			addr := startServer(t, s)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// A small receive buffer: the server's answers back up soon.
			c.(*net.TCPConn).SetReadBuffer(4096)
			c.SetWriteDeadline(time.Now().Add(20 * time.Second))
			c.Write([]byte(ClientPreface))
			http2.NewFramer(c, nil).WriteSettings()
			// 1,000 frames per write. A flood of single-frame writes was
			// slow enough on a loaded CI machine that the server's socket
			// buffers took every answer within the write deadline: its
			// writer never waited, nothing backed up, and the connection
			// stayed open. In bursts the acknowledgements queue faster
			// than any writer takes them, as they do behind a writer
			// stuck on a peer that does not read.
			var burst bytes.Buffer
			fr := http2.NewFramer(&burst, nil)
			for range 1000 {
				send(fr)
			}
			for i := 0; i < 2_000; i++ {
				if _, err := c.Write(burst.Bytes()); err != nil {
					break // the server closed the connection
				}
			}
			waitClosed(t, s, 10*time.Second)
			if st := s.Stats(); st.ConnErrors == 0 {
				t.Fatalf("connection not ended with a connection error: %+v", st)
			}
		})
	}
}

// TestIdleAndSlowloris: connections that send nothing, or start a stream or
// a frame and never finish it, are closed after IdleTimeout; a client that
// waits silently for a slow handler is not.
func TestIdleAndSlowloris(t *testing.T) {
	const idle = 300 * time.Millisecond
	f := func(name string, send func(c net.Conn, fr *http2.Framer)) {
		t.Run(name, func(t *testing.T) {
			s := &Server{Handler: echoHandler, IdleTimeout: idle}
			addr := startServer(t, s)
			// Before the dial: the server arms the timeout when it
			// accepts, which can be before Dial returns here.
			start := time.Now()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			send(c, http2.NewFramer(c, nil))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, c); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("connection not closed within 5s (IdleTimeout %v)", idle)
				}
			}
			if d := time.Since(start); d < idle {
				t.Fatalf("closed after %v, before IdleTimeout %v", d, idle)
			}
		})
	}
	f("no preface", func(c net.Conn, fr *http2.Framer) { c.Write([]byte("PRI * HT")) })
	f("idle after SETTINGS", func(c net.Conn, fr *http2.Framer) {
		c.Write([]byte(ClientPreface))
		fr.WriteSettings()
	})
	f("request never ends", func(c net.Conn, fr *http2.Framer) {
		c.Write([]byte(ClientPreface))
		fr.WriteSettings()
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(postBlock...), EndHeaders: true})
	})
	f("frame never ends", func(c net.Conn, fr *http2.Framer) {
		c.Write([]byte(ClientPreface))
		fr.WriteSettings()
		c.Write([]byte{0, 0, 9, 0}) // 4 of a frame header's 9 bytes
	})

	t.Run("slow handler", func(t *testing.T) {
		s := &Server{IdleTimeout: idle, Handler: func(w *Response, r *Request) {
			time.Sleep(3 * idle)
			w.WriteString("late")
		}}
		_, fr := rawConn(t, startServer(t, s))
		fr.WriteSettings()
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(getBlock...), EndHeaders: true, EndStream: true})
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("no answer from the slow handler: %v", err)
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v while the handler ran", ga.ErrCode)
			}
			if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 {
				return
			}
		}
	})
}
