package peer

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/balancer"
	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/server"
)

var benchLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func benchServer(b *testing.B, h fasthttp.RequestHandler) *server.Server {
	b.Helper()
	s, err := server.New(server.Config{Service: "bench", Listen: "127.0.0.1:0", Handler: h, Logger: benchLog})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func benchClient(b *testing.B, cfg Config) *Client {
	b.Helper()
	cfg.Peer, cfg.Logger = "bench", benchLog
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// cpuTime returns the process' user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClientDo measures the hot path: pick an endpoint and make a pooled
// call to an echo server on loopback, one call at a time (ns/op is the
// round trip; cpu-µs/op covers client and server, both in this process).
func BenchmarkClientDo(b *testing.B) {
	s := benchServer(b, echoHandler)
	c := benchClient(b, Config{Source: discovery.Static(s.Addr())})
	body := make([]byte, 200)
	dst := make([]byte, 0, 512)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		var err error
		if dst, err = c.Do(ctx, "/ocp/v1/charge", body, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
}

// BenchmarkHop compares a direct pod-to-pod call with the same call through
// one extra proxy hop (net/http/httputil.ReverseProxy on loopback, standing
// in for an ingress or Service proxy). CPU covers every party.
func BenchmarkHop(b *testing.B) {
	s := benchServer(b, echoHandler)
	target, _ := url.Parse("http://" + s.Addr())
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute}
	rp.ErrorLog = nil
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: rp}
	go hs.Serve(ln)
	b.Cleanup(func() { hs.Close() })
	fs := startFasthttpProxy(b, s.Addr())

	for _, tc := range []struct{ name, addr string }{
		{"direct", s.Addr()},
		{"via-httputil-proxy", ln.Addr().String()},
		{"via-fasthttp-proxy", fs},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := benchClient(b, Config{Source: discovery.Static(tc.addr)})
			body := make([]byte, 200)
			dst := make([]byte, 0, 512)
			ctx := context.Background()
			for i := 0; i < 100; i++ {
				c.Do(ctx, "/ocp/v1/charge", body, dst[:0])
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				var err error
				if dst, err = c.Do(ctx, "/ocp/v1/charge", body, dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// startFasthttpProxy starts a minimal fasthttp reverse proxy to upstream.
func startFasthttpProxy(b *testing.B, upstream string) string {
	hc := &fasthttp.HostClient{Addr: upstream, MaxConns: 512}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		req := &ctx.Request
		req.Header.Del("Connection")
		if err := hc.Do(req, &ctx.Response); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// BenchmarkSlowEndpoint: four endpoints, one of which answers after 5 ms;
// 16 callers. Reports the share of calls sent to the slow endpoint and
// p50/p90/p99/p99.9 latency per policy, closed loop (each caller sends as
// soon as its previous call returns) and open loop (16 callers together
// sending 1,000 calls/s on a fixed schedule, latency timed from the
// scheduled send time). Run with a fixed count, e.g. -benchtime=20000x. On
// a loaded 2-core machine the closed-loop quantiles mostly measure CPU
// contention (p2c keeps more callers busy on the fast endpoints); the
// open-loop figures and %slow are the ones to compare.
func BenchmarkSlowEndpoint(b *testing.B) {
	var addrs []string
	var slowHits atomic.Int64
	for i := 0; i < 4; i++ {
		slow := i == 0
		s := benchServer(b, func(ctx *fasthttp.RequestCtx) {
			if slow {
				slowHits.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
			ctx.SetBodyString("ok")
		})
		addrs = append(addrs, s.Addr())
	}
	const workers = 16
	for _, mode := range []string{"closed", "open-1000rps"} {
		for _, policy := range []string{balancer.PolicyRoundRobin, balancer.PolicyP2C} {
			b.Run(mode+"/"+policy, func(b *testing.B) {
				c := benchClient(b, Config{Source: discovery.Static(addrs...),
					Balancer: balancer.Config{Policy: policy, ConsecutiveFailures: -1}})
				lat := make([][]time.Duration, workers)
				var wg sync.WaitGroup
				perWorker := (b.N + workers - 1) / workers
				interval := time.Duration(workers) * time.Second / 1000
				slowHits.Store(0)
				b.ResetTimer()
				start := time.Now()
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						dst := make([]byte, 0, 64)
						for k := 0; k < perWorker; k++ {
							t0 := time.Now()
							if mode != "closed" {
								t0 = start.Add(time.Duration(k)*interval + time.Duration(w)*interval/workers)
								time.Sleep(time.Until(t0))
							}
							if _, err := c.Do(context.Background(), "/x", nil, dst[:0]); err != nil {
								b.Error(err)
								return
							}
							lat[w] = append(lat[w], time.Since(t0))
						}
					}(w)
				}
				wg.Wait()
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) == 0 {
					return
				}
				q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e3 }
				b.ReportMetric(100*float64(slowHits.Load())/float64(len(all)), "%slow")
				b.ReportMetric(q(0.50), "p50-µs")
				b.ReportMetric(q(0.90), "p90-µs")
				b.ReportMetric(q(0.99), "p99-µs")
				b.ReportMetric(q(0.999), "p99.9-µs")
			})
		}
	}
}
