package aslite

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
)

// rawConn dials addr, sends b, and reports whether the server closed the
// connection (EOF) within the timeout, after any reply.
func rawSend(t *testing.T, addr string, b []byte, halfClose bool) (reply []byte, closed bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		nc.(*net.TCPConn).CloseWrite()
	}
	nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	reply, err = io.ReadAll(nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return reply, false
	}
	return reply, true
}

func proto(typ byte, body []byte) []byte {
	b := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint64(b, uint64(len(body))|uint64(protoVersion)<<56|uint64(typ)<<48)
	return append(b, body...)
}

func TestJunkClosesOnlyThatConnection(t *testing.T) {
	s := startServer(t, Config{MaxMessageSize: 1 << 20})
	c := newClient(t, s.Addr())
	k := key(t, "accounts", "j")
	if err := c.Put(wp(), k, as.BinMap{"v": 1}); err != nil {
		t.Fatal(err)
	}
	// A connection that announces a huge message and sends nothing more
	// must not hold anything up.
	idle, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idle.Write(proto(protoMsg, nil)[:8])

	hdr := appendMsgHeader(nil, 0, 0, 0, 0, 0, 1, 0)
	hdr[1] = info1Read
	var zbuf bytes.Buffer
	zw := zlib.NewWriter(&zbuf)
	zw.Write([]byte("not a message at all, just words"))
	zw.Close()
	compressed := binary.BigEndian.AppendUint64(nil, 32)
	compressed = append(compressed, zbuf.Bytes()...)
	bomb := binary.BigEndian.AppendUint64(nil, 1<<40)
	bomb = append(bomb, zbuf.Bytes()...)
	cases := []struct {
		name string
		b    []byte
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"bad version", []byte{9, 3, 0, 0, 0, 0, 0, 0}},
		{"oversized", []byte{2, 3, 0, 0, 0x10, 0, 0, 0}},
		{"unknown type", proto(9, []byte("x"))},
		{"short header", proto(protoMsg, []byte{22, 1, 2})},
		{"field overruns", proto(protoMsg, append(append([]byte{}, hdr...), 0, 0, 1, 0, 0))},
		{"trailing bytes", proto(protoMsg, append(appendMsgHeader(nil, 0, 0, 0, 0, 0, 0, 0), 1, 2, 3))},
		{"compressed junk", proto(protoMsgCompressed, compressed)},
		{"compressed bomb", proto(protoMsgCompressed, bomb)},
		{"truncated body", proto(protoMsg, hdr)[:15]},
	}
	for _, tc := range cases {
		_, closed := rawSend(t, s.Addr(), tc.b, tc.name == "truncated body")
		if !closed {
			t.Errorf("%s: connection left open", tc.name)
		}
		rec, err := c.Get(nil, k)
		if err != nil || rec.Bins["v"] != 1 {
			t.Fatalf("%s: normal traffic broken: %v", tc.name, err)
		}
	}
	if s.Stats().BadConnections < int64(len(cases))-1 {
		t.Errorf("bad connections %d", s.Stats().BadConnections)
	}
	// A valid info request on a raw connection still works.
	reply, _ := rawSend(t, s.Addr(), proto(protoInfo, []byte("namespaces\n")), true)
	if !bytes.HasSuffix(reply, []byte("namespaces\tchf;other\n")) {
		t.Fatalf("info reply %q", reply)
	}
}

// fakeConn is a net.Conn reading from a byte slice and discarding writes.
type fakeConn struct {
	r io.Reader
}

func (f *fakeConn) Read(p []byte) (int, error)         { return f.r.Read(p) }
func (f *fakeConn) Write(p []byte) (int, error)        { return len(p), nil }
func (f *fakeConn) Close() error                       { return nil }
func (f *fakeConn) LocalAddr() net.Addr                { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000} }
func (f *fakeConn) RemoteAddr() net.Addr               { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000} }
func (f *fakeConn) SetDeadline(t time.Time) error      { return nil }
func (f *fakeConn) SetReadDeadline(t time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(t time.Time) error { return nil }

var fuzzServer = sync.OnceValue(func() *Server {
	s, err := New(Config{Namespaces: []string{"chf", "other"}, Logger: quietLogger(), MaxMessageSize: 1 << 20, ReclaimInterval: -1})
	if err != nil {
		panic(err)
	}
	s.nodeName = "A5FUZZ"
	return s
})

// FuzzConn feeds arbitrary bytes as a client connection's stream: the
// server must never panic and must stop at the first malformed message.
func FuzzConn(f *testing.F) {
	f.Add(proto(protoInfo, []byte("node\nfeatures\nreplicas\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzServer()
		c := &conn{}
		*c = *connPool.New().(*conn)
		c.nc = &fakeConn{r: bytes.NewReader(data)}
		c.br.Reset(c.nc)
		for i := 0; i < 64; i++ {
			if err := s.serveOne(c); err != nil {
				return
			}
		}
	})
}

// FuzzMessage feeds arbitrary AS_MSG bodies (after the proto header).
func FuzzMessage(f *testing.F) {
	f.Add(appendMsgHeader(nil, 0, 0, 0, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzServer()
		c := &conn{}
		*c = *connPool.New().(*conn)
		c.nc = &fakeConn{r: bytes.NewReader(nil)}
		s.handleMsg(c, data)
	})
}

// TestConnectionTimeouts: a client that connects and never sends, one that
// stops in the middle of a message, and (with IdleTimeout) one that goes
// quiet are closed; a client that sends requests keeps its connection past
// FirstRequestTimeout; a pooled official client carries on across idle
// periods when IdleTimeout is 0.
func TestConnectionTimeouts(t *testing.T) {
	start := func(t *testing.T, cfg Config) (*Server, string) {
		t.Helper()
		cfg.Namespaces = []string{"test"}
		cfg.Logger = quietLogger()
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, s.Addr()
	}
	closedWithin := func(t *testing.T, nc net.Conn, min, max time.Duration) {
		t.Helper()
		t0 := time.Now()
		nc.SetReadDeadline(time.Now().Add(max))
		_, err := io.ReadAll(nc)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection not closed within %v", max)
		}
		if d := time.Since(t0); d < min {
			t.Fatalf("closed after %v, before %v", d, min)
		}
	}
	t.Run("never sends", func(t *testing.T) {
		s, addr := start(t, Config{FirstRequestTimeout: 200 * time.Millisecond})
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		closedWithin(t, nc, 150*time.Millisecond, 3*time.Second)
		if s.Stats().TimedOut != 1 {
			t.Fatalf("TimedOut = %d, want 1", s.Stats().TimedOut)
		}
	})
	t.Run("stops mid-message", func(t *testing.T) {
		_, addr := start(t, Config{FirstRequestTimeout: 200 * time.Millisecond})
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte{2, 3, 0, 0, 0, 0, 0, 100, 22}) // header of 100 bytes, 1 sent
		closedWithin(t, nc, 150*time.Millisecond, 3*time.Second)
	})
	t.Run("idle timeout", func(t *testing.T) {
		_, addr := start(t, Config{FirstRequestTimeout: 5 * time.Second, IdleTimeout: 300 * time.Millisecond})
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		info := append([]byte{2, 1, 0, 0, 0, 0, 0, 5}, "node\n"...)
		if _, err := nc.Write(info); err != nil {
			t.Fatal(err)
		}
		closedWithin(t, nc, 200*time.Millisecond, 5*time.Second)
	})
	t.Run("active client kept", func(t *testing.T) {
		_, addr := start(t, Config{FirstRequestTimeout: 200 * time.Millisecond})
		cl := dial(t, addr)
		defer cl.Close()
		k, _ := as.NewKey("test", "s", 1)
		for i := 0; i < 5; i++ {
			if err := cl.Put(nil, k, as.BinMap{"v": i}); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
			time.Sleep(150 * time.Millisecond)
		}
		rec, err := cl.Get(nil, k)
		if err != nil || rec.Bins["v"] != 4 {
			t.Fatalf("get: %v %v", rec, err)
		}
	})
}
