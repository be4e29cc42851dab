package h2c

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// echoHandler answers POST with the request body and GET with a small
// JSON body; it sets X-Chf-Charged and Location like the Nchf front.
func echoHandler(w *Response, r *Request) {
	w.SetHeader("content-type", "application/json")
	switch string(r.Method) {
	case "POST":
		w.SetStatus(201)
		w.AddHeaderBytes("location", append([]byte("/loc"), r.Path...))
		w.AddHeaderInt("x-chf-charged", int64(len(r.Body)))
		w.Write(r.Body)
	default:
		w.AddHeaderBytes("X-Path", r.Path)
		w.WriteString(`{"ok":true}`)
	}
}

// startServer serves s on a loopback listener until the test ends.
func startServer(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

func stdClient() (*http.Client, *http2.Transport) {
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, tr
}

func TestServerStdlibClient(t *testing.T) {
	s := &Server{Handler: echoHandler, MaxBodySize: 1 << 20, InitialWindowSize: 65535}
	addr := startServer(t, s)
	hc, tr := stdClient()
	defer tr.CloseIdleConnections()

	post := func(t *testing.T, body []byte, wantStatus int) []byte {
		t.Helper()
		resp, err := hc.Post("http://"+addr+"/p/1", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("read body: %v", err)
		}
		if resp.StatusCode != wantStatus {
			t.Fatalf("status %d, want %d", resp.StatusCode, wantStatus)
		}
		if wantStatus == 201 {
			if loc := resp.Header.Get("Location"); loc != "/loc/p/1" {
				t.Fatalf("location %q", loc)
			}
			if c := resp.Header.Get("X-Chf-Charged"); c != strconv.Itoa(len(body)) {
				t.Fatalf("x-chf-charged %q", c)
			}
		}
		return got
	}

	t.Run("get", func(t *testing.T) {
		resp, err := hc.Get("http://" + addr + "/a?b=c")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != `{"ok":true}` || resp.Header.Get("X-Path") != "/a?b=c" {
			t.Fatalf("got %d %q %v", resp.StatusCode, b, resp.Header)
		}
	})
	t.Run("small and large bodies", func(t *testing.T) {
		for _, n := range []int{0, 1, 300, 65535, 65536, 300 << 10, 1 << 20} {
			body := bytes.Repeat([]byte{'x'}, n)
			for i := range body {
				body[i] = byte(i)
			}
			got := post(t, body, 201)
			if !bytes.Equal(got, body) {
				t.Fatalf("body of %d bytes echoed as %d bytes", n, len(got))
			}
		}
	})
	t.Run("too large", func(t *testing.T) {
		post(t, make([]byte, 1<<20+1), 413)
		post(t, make([]byte, 2<<20), 413)
		post(t, []byte("still works"), 201)
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 400)
		for g := 0; g < 200; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 3; i++ {
					body := []byte(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i))
					resp, err := hc.Post("http://"+addr+"/c", "application/json", bytes.NewReader(body))
					if err != nil {
						errs <- err
						return
					}
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if !bytes.Equal(got, body) {
						errs <- fmt.Errorf("got %q want %q", got, body)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
}

func TestServerInlineHandler(t *testing.T) {
	s := &Server{Handler: echoHandler, InlineHandler: true}
	addr := startServer(t, s)
	c, err := Dial(context.Background(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tmpl := NewRequestTemplate("POST", addr, "application/json")
	var resp ClientResponse
	for i := 0; i < 100; i++ {
		resp.Body = resp.Body[:0]
		if err := c.Do(context.Background(), &ClientRequest{Template: tmpl, Path: []byte("/x"), Body: []byte("hi")}, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Status != 201 || string(resp.Body) != "hi" {
			t.Fatalf("got %d %q", resp.Status, resp.Body)
		}
	}
}

// stdServer serves handler with the x/net/http2 server over h2c.
func stdServer(t testing.TB, maxStreams uint32, handler http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http2.Server{MaxConcurrentStreams: maxStreams}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.ServeConn(c, &http2.ServeConnOpts{Handler: handler})
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func stdEcho(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(500)
		return
	}
	if d := r.Header.Get("X-Delay"); d != "" {
		ms, _ := strconv.Atoi(d)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	w.Header().Set("Location", "/loc"+r.URL.Path)
	w.Header().Set("X-Chf-Charged", strconv.Itoa(len(body)))
	w.Header().Set("X-Method", r.Method)
	w.WriteHeader(201)
	w.Write(body)
}

func TestClientStdlibServer(t *testing.T) {
	addr := stdServer(t, 250, http.HandlerFunc(stdEcho))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, &ClientOptions{CaptureHeaders: []string{"location", "x-chf-charged", "x-method"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tmpl := NewRequestTemplate("POST", addr, "application/json")

	t.Run("bodies", func(t *testing.T) {
		var resp ClientResponse
		for _, n := range []int{0, 10, 65535, 65536, 200 << 10, 3 << 20} {
			body := make([]byte, n)
			for i := range body {
				body[i] = byte(i * 7)
			}
			resp.Body = resp.Body[:0]
			path := []byte("/p/" + strconv.Itoa(n))
			if err := c.Do(ctx, &ClientRequest{Template: tmpl, Path: path, Body: body}, &resp); err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			if resp.Status != 201 || !bytes.Equal(resp.Body, body) {
				t.Fatalf("%d bytes: status %d, body %d bytes", n, resp.Status, len(resp.Body))
			}
			if string(resp.Headers[0]) != "/loc"+string(path) || string(resp.Headers[1]) != strconv.Itoa(n) || string(resp.Headers[2]) != "POST" {
				t.Fatalf("headers %q", resp.Headers)
			}
		}
	})
	t.Run("async concurrent", func(t *testing.T) {
		const n = 2000
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failures []error
		sent := 0
		resps := make([]ClientResponse, n)
		bodies := make([][]byte, n)
		for sent < n {
			i := sent
			bodies[i] = []byte(strconv.Itoa(i))
			wg.Add(1)
			err := c.RoundTrip(&ClientRequest{Template: tmpl, Path: []byte("/a"), Body: bodies[i]}, &resps[i], func(r *ClientResponse, err error) {
				defer wg.Done()
				if err == nil && !bytes.Equal(r.Body, bodies[i]) {
					err = fmt.Errorf("request %d: body %q", i, r.Body)
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			})
			if errors.Is(err, ErrStreamLimit) {
				wg.Done()
				time.Sleep(100 * time.Microsecond)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			sent++
		}
		wg.Wait()
		if len(failures) > 0 {
			t.Fatal(failures[0])
		}
	})
	t.Run("get template", func(t *testing.T) {
		g := NewRequestTemplate("GET", addr, "")
		var resp ClientResponse
		if err := c.Do(ctx, &ClientRequest{Template: g, Path: []byte("/g")}, &resp); err != nil {
			t.Fatal(err)
		}
		if string(resp.Headers[2]) != "GET" {
			t.Fatalf("method %q", resp.Headers[2])
		}
	})
	t.Run("cancel", func(t *testing.T) {
		slow := NewRequestTemplate("POST", addr, "", "x-delay", "200")
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer ccancel()
		var resp ClientResponse
		err := c.Do(cctx, &ClientRequest{Template: slow, Path: []byte("/slow"), Body: []byte("x")}, &resp)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		if err := c.Do(ctx, &ClientRequest{Template: tmpl, Path: []byte("/after")}, &resp); err != nil || resp.Status != 201 {
			t.Fatalf("after cancel: %v %d", err, resp.Status)
		}
	})
}

func TestClientStreamLimit(t *testing.T) {
	release := make(chan struct{})
	addr := stdServer(t, 4, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.WriteHeader(204)
	}))
	c, err := Dial(context.Background(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tmpl := NewRequestTemplate("GET", addr, "")
	var wg sync.WaitGroup
	resps := make([]ClientResponse, 5)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		if err := c.RoundTrip(&ClientRequest{Template: tmpl, Path: []byte("/")}, &resps[i], func(r *ClientResponse, err error) {
			if err != nil || r.Status != 204 {
				t.Errorf("got %d %v", r.Status, err)
			}
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.MaxStreams(); n != 4 {
		t.Fatalf("MaxStreams %d, want 4", n)
	}
	if err := c.RoundTrip(&ClientRequest{Template: tmpl, Path: []byte("/")}, &resps[4], nil); !errors.Is(err, ErrStreamLimit) {
		t.Fatalf("5th stream: %v", err)
	}
	close(release)
	wg.Wait()
}

func TestShutdownGoAway(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	s := &Server{Handler: func(w *Response, r *Request) {
		if string(r.Path) == "/block" {
			entered <- struct{}{}
			<-release
		}
		w.WriteString("done")
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()
	c, err := Dial(context.Background(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tmpl := NewRequestTemplate("GET", addr, "")
	blocked := make(chan error, 1)
	var resp ClientResponse
	go func() {
		blocked <- c.Do(context.Background(), &ClientRequest{Template: tmpl, Path: []byte("/block")}, &resp)
	}()
	<-entered
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	// Wait for the client to see GOAWAY.
	deadline := time.Now().Add(5 * time.Second)
	for !errors.Is(c.Err(), ErrGoAway) {
		if time.Now().After(deadline) {
			t.Fatal("no GOAWAY")
		}
		time.Sleep(time.Millisecond)
	}
	var r2 ClientResponse
	if err := c.Do(context.Background(), &ClientRequest{Template: tmpl, Path: []byte("/new")}, &r2); !errors.Is(err, ErrGoAway) {
		t.Fatalf("new stream after GOAWAY: %v", err)
	}
	close(release)
	if err := <-blocked; err != nil || string(resp.Body) != "done" {
		t.Fatalf("in-flight stream: %v %q", err, resp.Body)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

func TestSniff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h2, h1 := Sniff(ln)
	s := &Server{Handler: echoHandler}
	h1srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "h1:"+r.URL.Path)
	})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.Serve(h2) }()
	go func() { defer wg.Done(); h1srv.Serve(h1) }()
	addr := ln.Addr().String()

	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + addr + "/one")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "h1:/one" || resp.ProtoMajor != 1 {
		t.Fatalf("h1 got %q %s", b, resp.Proto)
	}
	// A tiny HTTP/1.0 request shorter than the preface.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(raw, "GET / HTTP/1.0\r\n\r\n")
	b, _ = io.ReadAll(raw)
	raw.Close()
	if !bytes.Contains(b, []byte("h1:/")) {
		t.Fatalf("short h1 request got %q", b)
	}

	c, err := Dial(context.Background(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r ClientResponse
	if err := c.Do(context.Background(), &ClientRequest{Template: NewRequestTemplate("GET", addr, ""), Path: []byte("/two")}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 || string(r.Body) != `{"ok":true}` {
		t.Fatalf("h2 got %d %q", r.Status, r.Body)
	}
	c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Shutdown(ctx)
	h1srv.Shutdown(ctx)
	wg.Wait()
}

// TestRoundTripAllocs locks in the allocation budget of a steady-state
// round trip (client and server together, inline handler): x/net's
// HeadersFrame on each side (the HPACK decoders allocate nothing).
func TestRoundTripAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	addr := startServer(t, &Server{Handler: jsonHandler, InlineHandler: true})
	c, err := Dial(context.Background(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := ClientRequest{Template: NewRequestTemplate("POST", addr, "application/json"), Path: []byte("/nchf-convergedcharging/v3/chargingdata"), Body: []byte(`{"a":1}`)}
	var resp ClientResponse
	do := func() {
		resp.Body = resp.Body[:0]
		if err := c.Do(context.Background(), &req, &resp); err != nil || resp.Status != 200 {
			t.Fatalf("Do: %v %d", err, resp.Status)
		}
	}
	for range 100 {
		do()
	}
	if n := testing.AllocsPerRun(500, do); n > 2 {
		t.Fatalf("%.1f allocations per round trip, want <= 2", n)
	}
}

func TestHead(t *testing.T) {
	addr := startServer(t, &Server{Handler: jsonHandler})
	hc, tr := stdClient()
	defer tr.CloseIdleConnections()
	resp, err := hc.Head("http://" + addr + "/h")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(jsonBody)) {
		t.Fatalf("HEAD: %d, content-length %d", resp.StatusCode, resp.ContentLength)
	}
}

// TestClientServerCancelStress mixes completed and cancelled streams on
// one connection (client resets, server discards) and checks that every
// completed response belongs to its request despite stream pooling.
func TestClientServerCancelStress(t *testing.T) {
	s := &Server{Handler: func(w *Response, r *Request) {
		if len(r.Body) > 0 && r.Body[0]%4 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		w.AddHeaderBytes("x-echo", r.Path)
		w.Write(r.Body)
	}}
	addr := startServer(t, s)
	c, err := Dial(context.Background(), addr, &ClientOptions{CaptureHeaders: []string{"x-echo"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tmpl := NewRequestTemplate("POST", addr, "")
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp ClientResponse
			for i := 0; i < 60; i++ {
				body := []byte{byte(g + i), byte(g), byte(i)}
				path := []byte(fmt.Sprintf("/%d/%d", g, i))
				timeout := time.Second
				if i%3 == 0 {
					timeout = time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				resp.Body = resp.Body[:0]
				err := c.Do(ctx, &ClientRequest{Template: tmpl, Path: path, Body: body}, &resp)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrStreamLimit) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(resp.Body, body) || string(resp.Headers[0]) != string(path) {
					errs <- fmt.Errorf("request %s got body %v header %q", path, resp.Body, resp.Headers[0])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := c.Active(); n != 0 {
		t.Fatalf("%d streams still active", n)
	}
}
