package h2c

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestSniffFasthttp serves one port with fasthttp (HTTP/1.1) and this
// package (h2c), as the CGW does.
func TestSniffFasthttp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h2, h1 := Sniff(ln)
	s := &Server{Handler: echoHandler}
	fs := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyString("fasthttp:" + string(ctx.Path()))
	}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.Serve(h2) }()
	go func() { defer wg.Done(); fs.Serve(h1) }()
	addr := ln.Addr().String()

	for i := 0; i < 3; i++ {
		hc := &http.Client{Timeout: 5 * time.Second}
		resp, err := hc.Get("http://" + addr + "/h1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "fasthttp:/h1" {
			t.Fatalf("HTTP/1.1 got %q", b)
		}
		hc.CloseIdleConnections()

		c, err := Dial(context.Background(), addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r ClientResponse
		if err := c.Do(context.Background(), &ClientRequest{Template: NewRequestTemplate("POST", addr, ""), Path: []byte("/h2"), Body: []byte("x")}, &r); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if r.Status != 201 || string(r.Body) != "x" {
			t.Fatalf("h2 got %d %q", r.Status, r.Body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fs.ShutdownWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	h1.Close()
	wg.Wait()
}
