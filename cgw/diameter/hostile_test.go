package diameter

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// waitPeers waits until the server has n peers.
func waitPeers(t *testing.T, s *Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Peers != n {
		if time.Now().After(deadline) {
			t.Fatalf("peers %+v, want %d", s.Stats(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPeerThatNeverSendsCER: a connection that sends nothing is closed
// at CERTimeout and holds no peer slot.
func TestPeerThatNeverSendsCER(t *testing.T) {
	s := startServer(t, Config{CERTimeout: 150 * time.Millisecond}, newFakeCharger())
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Fatalf("silent peer: read %x, %v; want EOF", b, err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 3*time.Second {
		t.Errorf("closed after %s, want about the 150ms CERTimeout", took)
	}
	waitPeers(t, s, 0)
}

// TestPeerThatStopsReading: a peer that sends DWRs and never reads the
// answers fills its socket buffers; the server abandons it at
// WriteTimeout instead of blocking forever, and serves others meanwhile.
//
// Both socket buffers are small and fixed (the server's send buffer, set
// on the listener and inherited by the peer's socket, and the peer's
// receive buffer, set before connecting so that the window is small from
// the start): with the host's defaults (a send buffer autotuned up to
// tcp_wmem's 4 MiB) the server answered some 40,000 DWRs, one write each,
// before its writes blocked, which under the race detector on a busy CI
// host took longer than the test waited (1 run in 150).
func TestPeerThatStopsReading(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 1_000_000)
	lc := net.ListenConfig{Control: setBuffer(syscall.SO_SNDBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := startServerOn(t, Config{WriteTimeout: 200 * time.Millisecond}, f, ln)
	d := net.Dialer{Timeout: 5 * time.Second, Control: setBuffer(syscall.SO_RCVBUF)}
	raw := rawConnectWith(t, &d, ln.Addr().String(), "deaf.loadgen.test", "loadgen.test", 2001)
	dwr := wire.AppendHeader(nil, wire.FlagRequest, wire.CmdDeviceWatchdog, 0, 1, 1)
	dwr = wire.AppendString(dwr, wire.CodeOriginHost, wire.AVPMandatory, 0, "deaf.loadgen.test")
	dwr = wire.AppendString(dwr, wire.CodeOriginRealm, wire.AVPMandatory, 0, "loadgen.test")
	wire.SetLength(dwr)
	burst := make([]byte, 0, len(dwr)*1000)
	for range 1000 {
		burst = append(burst, dwr...)
	}
	// Write until the server closes the connection. A write that times
	// out only says the server is not reading now: a slow server (CI under
	// load) may just be behind, its writes not yet stuck, so keep pushing
	// until they are and it gives up on us.
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	var written int
	closed := false
	for !closed && time.Now().Before(deadline) {
		raw.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := raw.Write(burst)
		written += n
		var ne net.Error
		closed = err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	if !closed {
		t.Logf("after writing %d bytes of DWRs for %s, the server has not closed the deaf peer's connection", written, time.Since(start).Round(time.Millisecond))
	}
	waitPeers(t, s, 0)
	// Others are served.
	good := dial(t, s.Addr(), "pgw1.loadgen.test")
	a := do(t, good, &gy.Request{SessionID: good.NewSessionID(), Type: gy.Event, IMSI: imsi1, Action: gy.DirectDebiting, HasAction: true,
		Services: []gy.Service{{RatingGroup: 30, Request: true}}})
	expectResult(t, a, 2001)
}

// setBuffer returns a socket Control that sets the buffer opt (SO_SNDBUF
// or SO_RCVBUF) to 4 KiB (Linux doubles it for its bookkeeping).
func setBuffer(opt int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4<<10)
		}); err != nil {
			return err
		}
		return serr
	}
}

// TestDWRStorm: a peer sending DWRs as fast as it can gets every DWA,
// and a peer charging at the same time is answered throughout.
func TestDWRStorm(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 1_000_000)
	s := startServer(t, Config{}, f)
	raw := rawConnect(t, s.Addr(), "storm.loadgen.test", "loadgen.test", 2001)
	defer raw.Close()
	const n = 20000
	go func() {
		bw := bufio.NewWriter(raw)
		for i := range n {
			dwr := wire.AppendHeader(nil, wire.FlagRequest, wire.CmdDeviceWatchdog, 0, uint32(i), uint32(i))
			dwr = wire.AppendString(dwr, wire.CodeOriginHost, wire.AVPMandatory, 0, "storm.loadgen.test")
			dwr = wire.AppendString(dwr, wire.CodeOriginRealm, wire.AVPMandatory, 0, "loadgen.test")
			wire.SetLength(dwr)
			if _, err := bw.Write(dwr); err != nil {
				return
			}
		}
		bw.Flush()
	}()
	good := dial(t, s.Addr(), "pgw1.loadgen.test")
	br := bufio.NewReader(raw)
	raw.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := range n {
		if got := readResult(t, br); got != 2001 {
			t.Fatalf("DWA %d: Result-Code %d", i, got)
		}
		if i%5000 == 0 {
			a := do(t, good, &gy.Request{SessionID: good.NewSessionID(), Type: gy.Event, IMSI: imsi1, Action: gy.DirectDebiting, HasAction: true,
				Services: []gy.Service{{RatingGroup: 30, Request: true}}})
			expectResult(t, a, 2001)
		}
	}
}

// cer is a valid CER from host.
func cer(host string) []byte {
	m := wire.AppendHeader(nil, wire.FlagRequest, wire.CmdCapabilitiesExchange, 0, 1, 1)
	m = wire.AppendString(m, wire.CodeOriginHost, wire.AVPMandatory, 0, host)
	m = wire.AppendString(m, wire.CodeOriginRealm, wire.AVPMandatory, 0, "loadgen.test")
	m = wire.AppendBytes(m, 257, wire.AVPMandatory, 0, []byte{0, 1, 127, 0, 0, 1})
	m = wire.AppendUint32(m, 266, wire.AVPMandatory, 0, 0)
	m = wire.AppendString(m, 269, 0, 0, "fuzz")
	m = wire.AppendUint32(m, wire.CodeAuthApplicationID, wire.AVPMandatory, 0, 4)
	wire.SetLength(m)
	return m
}

// FuzzPeer feeds arbitrary bytes to a live server as one peer's whole
// connection: the CER/CEA exchange, DWR/DWA, DPR and CCRs, through the
// real framing (wire.ReadMessage). The server must answer well-formed
// messages only, close the connection, and keep serving. Corpus:
// testdata/fuzz/FuzzPeer.
func FuzzPeer(f *testing.F) {
	c := cer("fuzz.loadgen.test")
	dwr := wire.AppendHeader(nil, wire.FlagRequest, wire.CmdDeviceWatchdog, 0, 2, 2)
	dwr = wire.AppendString(dwr, wire.CodeOriginHost, wire.AVPMandatory, 0, "fuzz.loadgen.test")
	dwr = wire.AppendString(dwr, wire.CodeOriginRealm, wire.AVPMandatory, 0, "loadgen.test")
	wire.SetLength(dwr)
	f.Add(c)
	f.Add(append(append([]byte(nil), c...), dwr...))
	for _, m := range seedCCRs() {
		f.Add(append(append([]byte(nil), c...), m...))
	}
	f.Add(dwr)
	f.Add([]byte{1, 0, 0, 20})
	fc := newFakeCharger()
	fc.add(supi1, 1_000_000)
	s := startServer(f, Config{MaxMessageSize: 16 << 10, CERTimeout: time.Second}, fc)
	f.Fuzz(func(t *testing.T, in []byte) {
		conn, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write(in)
		conn.(*net.TCPConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(conn)
		for {
			msg, err := wire.ReadMessage(br, nil, 1<<20)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("server sent a malformed message or did not close: %v", err)
			}
			if _, err := wire.ParseHeader(msg); err != nil {
				t.Fatalf("server sent %x: %v", msg, err)
			}
		}
	})
}
