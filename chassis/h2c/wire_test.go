package h2c

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func TestServerH2load(t *testing.T) {
	bin, err := exec.LookPath("h2load")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("h2load not installed (apt-get install nghttp2-client)")
		}
		t.Skip("h2load not installed")
	}
	// A 64 KiB stream window makes the 200 KiB bodies wait for WINDOW_UPDATEs.
	s := &Server{Handler: echoHandler, MaxBodySize: 1 << 20, InitialWindowSize: 65535}
	addr := startServer(t, s)
	dir := t.TempDir()
	dataFile, bigFile := dir+"/body.json", dir+"/big.bin"
	if err := os.WriteFile(dataFile, bytes.Repeat([]byte("j"), 300), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bigFile, bytes.Repeat([]byte("b"), 200<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"-n", "4000", "-c", "4", "-m", "64", "http://" + addr + "/get"},
		{"-n", "2000", "-c", "2", "-m", "32", "-d", dataFile, "-H", "content-type: application/json", "http://" + addr + "/post"},
		{"-n", "40", "-c", "2", "-m", "8", "-d", bigFile, "http://" + addr + "/big"},
	} {
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("h2load %v: %v\n%s", args, err, out)
		}
		m := regexp.MustCompile(`requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored`).FindSubmatch(out)
		if m == nil || string(m[1]) != string(m[3]) || string(m[4]) != "0" || string(m[5]) != "0" {
			t.Fatalf("h2load %v:\n%s", args, out)
		}
	}
}

// rawConn opens a raw TCP connection to a server, sends the preface and
// returns a framer to drive it by hand.
func rawConn(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, ClientPreface)
	return c, http2.NewFramer(c, bufio.NewReader(c))
}

// expectGoAway reads frames until GOAWAY and checks its code and that the
// connection is then closed.
func expectGoAway(t *testing.T, fr *http2.Framer, code http2.ErrCode) {
	t.Helper()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY(%v): %v", code, err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != code {
				t.Fatalf("GOAWAY %v, want %v (%s)", ga.ErrCode, code, ga.DebugData())
			}
			break
		}
	}
	for {
		if _, err := fr.ReadFrame(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("connection not closed after GOAWAY")
				}
			}
			return
		}
	}
}

func headerBlock(fields ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return buf.Bytes()
}

var getBlock = []string{":method", "GET", ":scheme", "http", ":path", "/", ":authority", "x"}

func TestServerMalformed(t *testing.T) {
	s := &Server{Handler: echoHandler, MaxBodySize: 100}
	addr := startServer(t, s)
	f := func(name string, code http2.ErrCode, send func(fr *http2.Framer, c net.Conn)) {
		t.Run(name, func(t *testing.T) {
			c, fr := rawConn(t, addr)
			send(fr, c)
			expectGoAway(t, fr, code)
		})
	}
	settings := func(fr *http2.Framer) { fr.WriteSettings() }
	f("first frame not SETTINGS", http2.ErrCodeProtocol, func(fr *http2.Framer, c net.Conn) {
		fr.WritePing(false, [8]byte{})
	})
	f("DATA on stream 0", http2.ErrCodeProtocol, func(fr *http2.Framer, c net.Conn) {
		settings(fr)
		c.Write([]byte{0, 0, 1, 0, 0, 0, 0, 0, 0, 'x'})
	})
	f("bad HPACK", http2.ErrCodeCompression, func(fr *http2.Framer, c net.Conn) {
		settings(fr)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff, 0xff}, EndHeaders: true, EndStream: true})
	})
	f("frame too large", http2.ErrCodeFrameSize, func(fr *http2.Framer, c net.Conn) {
		settings(fr)
		fr.WriteData(1, true, make([]byte, 20000))
	})
	f("CONTINUATION without HEADERS", http2.ErrCodeProtocol, func(fr *http2.Framer, c net.Conn) {
		settings(fr)
		fr.WriteContinuation(1, true, headerBlock(getBlock...))
	})
	f("interleaved header block", http2.ErrCodeProtocol, func(fr *http2.Framer, c net.Conn) {
		settings(fr)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(getBlock...), EndStream: true})
		fr.WritePing(false, [8]byte{})
	})
	f("even stream id", http2.ErrCodeProtocol, func(fr *http2.Framer, c net.Conn) {
		settings(fr)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: headerBlock(getBlock...), EndHeaders: true, EndStream: true})
	})
	f("window overflow", http2.ErrCodeFlowControl, func(fr *http2.Framer, c net.Conn) {
		settings(fr)
		fr.WriteWindowUpdate(0, 1<<31-1)
	})
	f("bad SETTINGS value", http2.ErrCodeProtocol, func(fr *http2.Framer, c net.Conn) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 10})
	})
	f("DATA on idle stream", http2.ErrCodeProtocol, func(fr *http2.Framer, c net.Conn) {
		settings(fr)
		fr.WriteData(5, true, []byte("x"))
	})

	t.Run("stream errors keep the connection", func(t *testing.T) {
		_, fr := rawConn(t, addr)
		settings(fr)
		// Uppercase header name: malformed → RST_STREAM(PROTOCOL_ERROR).
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(append(getBlock[:8:8], "Bad", "x")...), EndHeaders: true, EndStream: true})
		// Missing :path.
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: headerBlock(":method", "GET", ":scheme", "http"), EndHeaders: true, EndStream: true})
		// Body over MaxBodySize → 413 and RST_STREAM(NO_ERROR).
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: headerBlock(":method", "POST", ":scheme", "http", ":path", "/", ":authority", "x"), EndHeaders: true})
		fr.WriteData(5, false, make([]byte, 101))
		// A good request split over HEADERS + CONTINUATION still works.
		blk := headerBlock(getBlock...)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, BlockFragment: blk[:3], EndStream: true})
		fr.WriteContinuation(7, true, blk[3:])
		want := map[uint32]string{1: "rst PROTOCOL_ERROR", 3: "rst PROTOCOL_ERROR", 5: "413", 7: "200"}
		got := map[uint32]string{}
		dec := hpack.NewDecoder(4096, nil)
		for len(got) < len(want) {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("read: %v (got %v)", err, got)
			}
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				if _, seen := got[f.StreamID]; !seen {
					got[f.StreamID] = "rst " + f.ErrCode.String()
				}
			case *http2.HeadersFrame:
				fields, err := dec.DecodeFull(f.HeaderBlockFragment())
				if err != nil {
					t.Fatal(err)
				}
				got[f.StreamID] = fields[0].Value
			case *http2.GoAwayFrame:
				t.Fatalf("unexpected GOAWAY %v", f.ErrCode)
			}
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("stream %d: got %q, want %q", id, got[id], w)
			}
		}
		st := s.Stats()
		if st.Rejected < 1 || st.StreamErrors < 2 || st.Requests < 1 || st.ConnErrors < 10 || st.ConnsTotal < 11 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("refused beyond MaxConcurrentStreams", func(t *testing.T) {
		block := make(chan struct{})
		s2 := &Server{MaxConcurrentStreams: 1, Handler: func(w *Response, r *Request) { <-block }}
		addr2 := startServer(t, s2)
		_, fr := rawConn(t, addr2)
		settings(fr)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(getBlock...), EndHeaders: true, EndStream: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: headerBlock(getBlock...), EndHeaders: true, EndStream: true})
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if rst, ok := f.(*http2.RSTStreamFrame); ok {
				if rst.StreamID != 3 || rst.ErrCode != http2.ErrCodeRefusedStream {
					t.Fatalf("got RST_STREAM %d %v", rst.StreamID, rst.ErrCode)
				}
				break
			}
		}
		close(block)
	})
}

// fakeConn feeds fixed input to the server and discards its output.
type fakeConn struct {
	r io.Reader
}

func (c *fakeConn) Read(p []byte) (int, error)         { return c.r.Read(p) }
func (c *fakeConn) Write(p []byte) (int, error)        { return len(p), nil }
func (c *fakeConn) Close() error                       { return nil }
func (c *fakeConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c *fakeConn) SetDeadline(t time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(t time.Time) error { return nil }

// FuzzServeConn feeds arbitrary bytes after the preface to a server
// connection: it must never panic or hang. Seeds live in
// testdata/fuzz/FuzzServeConn.
func FuzzServeConn(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(getBlock...), EndHeaders: true, EndStream: true})
	blk := headerBlock(":method", "POST", ":scheme", "http", ":path", "/p", ":authority", "x", "content-length", "5")
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: blk[:4]})
	fr.WriteContinuation(3, true, blk[4:])
	fr.WriteData(3, false, []byte("he"))
	fr.WriteData(3, true, []byte("llo"))
	fr.WritePing(false, [8]byte{1})
	fr.WriteWindowUpdate(0, 1000)
	fr.WriteRSTStream(1, http2.ErrCodeCancel)
	fr.WriteGoAway(3, http2.ErrCodeNo, nil)
	f.Add(seed.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &Server{Handler: echoHandler, MaxBodySize: 64, InlineHandler: len(data)%2 == 0}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeConn(&fakeConn{r: io.MultiReader(bytes.NewReader([]byte(ClientPreface)), bytes.NewReader(data))})
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("ServeConn did not return")
		}
	})
}

// FuzzClientConn feeds arbitrary server bytes (after a valid SETTINGS
// frame) to a client connection with three requests in flight: it must
// never panic or hang, and every request must complete.
func FuzzClientConn(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	fr.WriteSettingsAck()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(":status", "200", "location", "/x"), EndHeaders: true})
	fr.WriteData(1, true, []byte("body"))
	blk := headerBlock(":status", "100")
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: blk, EndHeaders: true})
	blk = headerBlock(":status", "201", "content-length", "0")
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: blk[:2]})
	fr.WriteContinuation(3, true, blk[2:])
	fr.WriteRSTStream(5, http2.ErrCodeRefusedStream)
	fr.WriteWindowUpdate(0, 100)
	fr.WritePing(false, [8]byte{})
	fr.WriteGoAway(3, http2.ErrCodeNo, nil)
	f.Add(seed.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		pr, pw := io.Pipe()
		c := &pipeConn{r: pr, ready: make(chan struct{})}
		go func() {
			fr := http2.NewFramer(pw, nil)
			fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 10})
			<-c.ready
			pw.Write(data)
			pw.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := NewConn(ctx, c, &ClientOptions{CaptureHeaders: []string{"location"}})
		if err != nil {
			close(c.ready)
			return
		}
		tmpl := NewRequestTemplate("POST", "x", "application/json")
		done := make(chan struct{}, 3)
		var resps [3]ClientResponse
		started := 0
		for i := range resps {
			if conn.RoundTrip(&ClientRequest{Template: tmpl, Path: []byte("/"), Body: []byte("abc")}, &resps[i], func(*ClientResponse, error) { done <- struct{}{} }) == nil {
				started++
			}
		}
		close(c.ready)
		for range started {
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatal("request did not complete")
			}
		}
		conn.Close()
	})
}

// pipeConn is a net.Conn reading from a pipe and discarding writes.
type pipeConn struct {
	r     *io.PipeReader
	ready chan struct{}
}

func (c *pipeConn) Read(p []byte) (int, error)         { return c.r.Read(p) }
func (c *pipeConn) Write(p []byte) (int, error)        { return len(p), nil }
func (c *pipeConn) Close() error                       { c.r.Close(); return nil }
func (c *pipeConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c *pipeConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c *pipeConn) SetDeadline(t time.Time) error      { return nil }
func (c *pipeConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *pipeConn) SetWriteDeadline(t time.Time) error { return nil }
