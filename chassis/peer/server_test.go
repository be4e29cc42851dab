package peer

import (
	"context"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/server"
)

// startServer starts a chassis server on 127.0.0.1:0 and stops it at the end
// of the test.
func startServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	if cfg.Service == "" {
		cfg.Service = "test"
	}
	cfg.Listen = "127.0.0.1:0"
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

func httpDo(t *testing.T, method, url string, body []byte) (int, string, *fasthttp.ResponseHeader) {
	t.Helper()
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(url)
	req.SetBody(body)
	c := &fasthttp.Client{}
	if err := c.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	h := &fasthttp.ResponseHeader{}
	resp.Header.CopyTo(h)
	return resp.StatusCode(), string(resp.Body()), h
}

func echoHandler(ctx *fasthttp.RequestCtx) {
	ctx.SetBody(ctx.PostBody())
}
