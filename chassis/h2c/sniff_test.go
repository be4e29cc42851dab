package h2c

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestSniffRejectsGarbage: a connection that starts with neither the
// HTTP/2 preface nor an HTTP/1.1 method is closed without an answer, with
// a FIN (not a reset), and is routed to neither listener.
func TestSniffRejectsGarbage(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h2, h1 := Sniff(ln)
	defer h2.Close()
	defer h1.Close()
	routed := make(chan string, 2)
	for name, l := range map[string]net.Listener{"h2": h2, "h1": h1} {
		go func() {
			if c, err := l.Accept(); err == nil {
				routed <- name
				c.Close()
			}
		}()
	}
	for _, first := range []string{"INVALID CONNECTION PREFACE\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\rQ", "\x16\x03\x01\x02\x00"} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(first)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(make([]byte, 64))
		c.Close()
		if n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("%q: read %d bytes, %v; want a clean close (EOF)", first, n, err)
		}
	}
	select {
	case name := <-routed:
		t.Fatalf("a garbage connection was routed to %s", name)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestHTTPMethod(t *testing.T) {
	f := func(in string, want bool) {
		t.Helper()
		if got := httpMethod([]byte(in)); got != want {
			t.Errorf("httpMethod(%q) = %v, want %v", in, got, want)
		}
	}
	f("GET / HTTP/1.1", true)
	f("POST /x", true)
	f("OPTIONS * HTTP/1.1", true)
	f("G", true)  // a prefix: more may follow
	f("PO", true) // idem
	f("", true)   // nothing read yet
	f("GETX / HTTP/1.1", false)
	f("INVALID CONNECTION PREFACE", false)
	f("get / HTTP/1.1", false)
	f("\x16\x03\x01", false) // a TLS ClientHello
}
