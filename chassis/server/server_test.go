package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/hop"
	"github.com/chf-testbed/testbed/chassis/telemetry/telemetrytest"
)

// startServer starts a chassis server on 127.0.0.1:0 and stops it at the end
// of the test.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Service == "" {
		cfg.Service = "test"
	}
	cfg.Listen = "127.0.0.1:0"
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
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

func TestServerHealthReadyMetrics(t *testing.T) {
	// Metrics are process-wide: a fresh service name keeps -count=N runs apart.
	svc := fmt.Sprintf("metrics-test-%d", time.Now().UnixNano())
	var mu sync.Mutex
	var readyErr error = errors.New("aerospike unreachable")
	s := startServer(t, Config{
		Service: svc,
		Handler: echoHandler,
		Ready: func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			return readyErr
		},
	})
	base := "http://" + s.Addr()
	if code, body, _ := httpDo(t, "GET", base+"/healthz", nil); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body, _ := httpDo(t, "GET", base+"/readyz", nil); code != 503 || !strings.Contains(body, "aerospike unreachable") {
		t.Fatalf("/readyz not ready = %d %q", code, body)
	}
	mu.Lock()
	readyErr = nil
	mu.Unlock()
	if code, _, _ := httpDo(t, "GET", base+"/readyz", nil); code != 200 {
		t.Fatalf("/readyz ready = %d", code)
	}
	for i := 0; i < 3; i++ {
		if code, body, _ := httpDo(t, "POST", base+"/ocp/v1/charge", []byte("x")); code != 200 || body != "x" {
			t.Fatalf("POST = %d %q", code, body)
		}
	}
	httpDo(t, "POST", base+"/chf/v1/accounts/imsi-001010000000001", nil)
	code, body, _ := httpDo(t, "GET", base+"/metrics", nil)
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`http_server_request_duration_seconds_count{component="` + svc + `",http_response_status_code="200",http_route="/ocp/v1/charge"} 3`,
		`http_route="/chf/v1/accounts/{id}"`,
		`http_server_request_duration_seconds_bucket{`,
		`http_server_active_requests{component="` + svc + `"} `,
		"process_cpu_seconds_total ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	telemetrytest.CheckLabels(t, []byte(body))
	telemetrytest.Promtool(t, []byte(body))
}

func TestServerLimits(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	s := startServer(t, Config{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) == "/block" {
				entered <- struct{}{}
				<-release
			}
			ctx.SetStatusCode(204)
		},
		MaxInFlight: 1,
		MaxBodySize: 1024,
	})
	base := "http://" + s.Addr()
	if code, _, _ := httpDo(t, "POST", base+"/x", bytes.Repeat([]byte("a"), 1024)); code != 204 {
		t.Fatalf("body at limit = %d, want 204", code)
	}
	if code, _, _ := httpDo(t, "POST", base+"/x", bytes.Repeat([]byte("a"), 4096)); code != 413 {
		t.Fatalf("oversized body = %d, want 413", code)
	}
	done := make(chan int)
	go func() {
		code, _, _ := httpDo(t, "POST", base+"/block", nil)
		done <- code
	}()
	<-entered
	code, _, h := httpDo(t, "POST", base+"/x", nil)
	if code != 503 || len(h.Peek(hop.OverloadHeader)) == 0 {
		t.Fatalf("over MaxInFlight = %d (overload header %q), want 503", code, h.Peek(hop.OverloadHeader))
	}
	close(release)
	if code := <-done; code != 204 {
		t.Fatalf("blocked request = %d", code)
	}
}

func TestServerShutdownDrains(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	s, err := New(Config{Service: "t", Listen: "127.0.0.1:0", Handler: func(ctx *fasthttp.RequestCtx) {
		close(entered)
		<-release
		ctx.SetBodyString("done")
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code int
		body string
	}
	res := make(chan result, 1)
	go func() {
		code, body, _ := httpDo(t, "POST", "http://"+s.Addr()+"/slow", nil)
		res <- result{code, body}
	}()
	<-entered
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v before the in-flight request finished", err)
	case <-time.After(150 * time.Millisecond):
	}
	close(release)
	if r := <-res; r.code != 200 || r.body != "done" {
		t.Fatalf("in-flight request during shutdown = %d %q", r.code, r.body)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := fasthttp.DialTimeout(s.Addr(), time.Second); err == nil {
		t.Fatalf("server still accepts connections after Shutdown")
	}
}
