package h2c

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// jsonBody is a ~300-byte Nchf-sized JSON response.
var jsonBody = []byte(`{"invocationTimeStamp":"2026-11-30T04:00:00Z","invocationSequenceNumber":1,"multipleUnitInformation":[{"resultCode":"SUCCESS","ratingGroup":100,"grantedUnit":{"totalVolume":10485760},"validityTime":3600,"quotaHoldingTime":60,"finalUnitIndication":null,"triggers":[{"triggerType":"QUOTA_THRESHOLD","triggerCategory":"IMMEDIATE_REPORT"}]}]}`)

func jsonHandler(w *Response, r *Request) {
	w.SetHeader("content-type", "application/json")
	w.Write(jsonBody)
}

func stdJSONHandler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Write(jsonBody)
}

// BenchmarkRoundTrip measures a request/response over loopback with 32
// concurrent streams on one connection: this package's client and server
// versus the x/net/http2 Transport and Server.
func BenchmarkRoundTrip(b *testing.B) {
	reqBody := jsonBody[:200]
	run := func(b *testing.B, addr string) {
		c, err := Dial(context.Background(), addr, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		tmpl := NewRequestTemplate("POST", addr, "application/json")
		b.ReportAllocs()
		b.SetParallelism(16)
		defer reportCPU(b, selfCPU())
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var resp ClientResponse
			req := ClientRequest{Template: tmpl, Path: []byte("/nchf-convergedcharging/v3/chargingdata/imsi-001010000000001.0123456789abcdef/update"), Body: reqBody}
			for pb.Next() {
				resp.Body = resp.Body[:0]
				if err := c.Do(context.Background(), &req, &resp); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("h2c-client/h2c-server", func(b *testing.B) {
		run(b, startServer(b, &Server{Handler: jsonHandler}))
	})
	b.Run("h2c-client/h2c-server-inline", func(b *testing.B) {
		run(b, startServer(b, &Server{Handler: jsonHandler, InlineHandler: true}))
	})
	b.Run("h2c-client/std-server", func(b *testing.B) {
		run(b, stdServer(b, 250, http.HandlerFunc(stdJSONHandler)))
	})
	b.Run("std-client/h2c-server", func(b *testing.B) {
		stdRun(b, startServer(b, &Server{Handler: jsonHandler}), reqBody)
	})
	b.Run("std-client/std-server", func(b *testing.B) {
		stdRun(b, stdServer(b, 250, http.HandlerFunc(stdJSONHandler)), reqBody)
	})
}

// reportCPU reports this process's CPU time per operation since start
// (client and server together: both run in this process).
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((selfCPU()-start).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/op")
}

func stdRun(b *testing.B, addr string, reqBody []byte) {
	hc, tr := stdClient()
	defer tr.CloseIdleConnections()
	url := "http://" + addr + "/nchf-convergedcharging/v3/chargingdata/imsi-001010000000001.0123456789abcdef/update"
	b.ReportAllocs()
	b.SetParallelism(16)
	defer reportCPU(b, selfCPU())
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := hc.Post(url, "application/json", bytes.NewReader(reqBody))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// The CPU benchmarks run the server in a child process (this test binary
// re-executed with H2C_BENCH_SERVER set) so that its CPU time is measured
// apart from the client's.

const benchServerEnv = "H2C_BENCH_SERVER"

// TestMain runs the benchmark server when asked to, and the tests otherwise.
func TestMain(m *testing.M) {
	if kind := os.Getenv(benchServerEnv); kind != "" {
		runBenchServer(kind)
		return
	}
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(3 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to d for goroutines running this package's
// code to end and returns the stacks of those that remain.
func leakedGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "chassis/h2c.") && !strings.Contains(g, "leakedGoroutines") &&
				!strings.Contains(g, "TestMain") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runBenchServer serves kind ("h2c", "h2c-inline", "std") on a loopback
// port, prints the address and serves until stdin closes.
func runBenchServer(kind string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	switch kind {
	case "h2c", "h2c-inline":
		s := &Server{Handler: jsonHandler, InlineHandler: kind == "h2c-inline"}
		go s.Serve(ln)
	case "std":
		srv := &http2.Server{MaxConcurrentStreams: 256}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go srv.ServeConn(c, &http2.ServeConnOpts{Handler: http.HandlerFunc(stdJSONHandler)})
			}
		}()
	}
	if path := os.Getenv("H2C_BENCH_SERVER_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	io.Copy(io.Discard, os.Stdin)
}

type benchServer struct {
	cmd  *exec.Cmd
	addr string
	in   io.WriteCloser
}

func startBenchServer(b *testing.B, kind string) *benchServer {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), benchServerEnv+"="+kind, "GOMAXPROCS=2")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	s := &benchServer{cmd: cmd, addr: strings.TrimSpace(line), in: in}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	return s
}

// cpuTicks returns a process's user+system CPU time from /proc/<pid>/stat.
func cpuTicks(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may contain spaces).
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}

// syscalls returns a process's read and write system call counts from
// /proc/<pid>/io.
func syscalls(pid int) (r, w int64) {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			r, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			w, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return r, w
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkServerCPUH2load drives each server kind with h2load at a fixed
// rate (H2C_BENCH_RPS, default 10000 req/s, over 4 connections with up
// to 64 streams each) for H2C_BENCH_REQUESTS requests (default 50000) and
// reports the server's and h2load's CPU microseconds per request. Run it
// with -benchtime=1x; each iteration is one full h2load run.
func BenchmarkServerCPUH2load(b *testing.B) {
	bin, err := exec.LookPath("h2load")
	if err != nil {
		b.Skip("h2load not installed")
	}
	rps := benchEnvInt("H2C_BENCH_RPS", 10000)
	n := benchEnvInt("H2C_BENCH_REQUESTS", 50000)
	for _, kind := range []string{"h2c", "h2c-inline", "std"} {
		b.Run(kind, func(b *testing.B) {
			srv := startBenchServer(b, kind)
			for range b.N {
				before := cpuTicks(srv.cmd.Process.Pid)
				r0, w0 := syscalls(srv.cmd.Process.Pid)
				cmd := exec.Command(bin, "-n", strconv.Itoa(n), "-c4", "-m64", "--rps", strconv.Itoa(rps/4),
					"-H", "content-type: application/json", "http://"+srv.addr+"/nchf-convergedcharging/v3/chargingdata")
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("h2load: %v\n%s", err, out)
				}
				if !bytes.Contains(out, []byte(strconv.Itoa(n)+" succeeded")) {
					b.Fatalf("h2load:\n%s", out)
				}
				server := cpuTicks(srv.cmd.Process.Pid) - before
				r1, w1 := syscalls(srv.cmd.Process.Pid)
				b.ReportMetric(float64(r1-r0)/float64(n), "server-reads/req")
				b.ReportMetric(float64(w1-w0)/float64(n), "server-writes/req")
				ps := cmd.ProcessState
				client := ps.UserTime() + ps.SystemTime()
				b.ReportMetric(float64(server.Microseconds())/float64(n), "server-cpu-µs/req")
				b.ReportMetric(float64(client.Microseconds())/float64(n), "h2load-cpu-µs/req")
			}
		})
	}
}

// BenchmarkClientCPU drives a server (in a child process: h2c-inline,
// h2c or the x/net/http2 server) at a fixed rate with this package's client, open loop over 4
// connections with up to 64 streams each, and reports the client's CPU
// per request (this process) next to the server's. "smooth" starts each
// request at its own time; "tick-10ms" starts the requests due every
// 10 ms together, which is close to what h2load --rps does (compare with
// BenchmarkServerCPUH2load/h2c-inline's h2load-cpu-µs/req). Run it with
// -benchtime=1x.
func BenchmarkClientCPU(b *testing.B) {
	for _, tc := range []struct {
		tick   time.Duration
		server string
	}{
		{0, "h2c-inline"}, {0, "h2c"}, {0, "std"}, {10 * time.Millisecond, "h2c-inline"},
	} {
		name := "smooth"
		if tc.tick > 0 {
			name = "tick-" + tc.tick.String()
		}
		b.Run(name+"/"+tc.server, func(b *testing.B) { benchClientCPU(b, tc.tick, tc.server) })
	}
}

func benchClientCPU(b *testing.B, tick time.Duration, server string) {
	rps := benchEnvInt("H2C_BENCH_RPS", 10000)
	n := benchEnvInt("H2C_BENCH_REQUESTS", 50000)
	srv := startBenchServer(b, server)
	const conns, streams = 4, 64
	cs := make([]*Conn, conns)
	for i := range cs {
		c, err := Dial(context.Background(), srv.addr, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
	}
	tmpl := NewRequestTemplate("POST", srv.addr, "application/json")
	path := []byte("/nchf-convergedcharging/v3/chargingdata")
	for range b.N {
		var done, failed, dropped atomic.Int64
		var wg sync.WaitGroup
		beforeSelf, beforeSrv := selfCPU(), cpuTicks(srv.cmd.Process.Pid)
		r0, w0 := syscalls(srv.cmd.Process.Pid)
		for i, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				free := make(chan *ClientResponse, streams)
				for range streams {
					free <- new(ClientResponse)
				}
				cb := func(r *ClientResponse, err error) {
					if err != nil {
						failed.Add(1)
					}
					done.Add(1)
					free <- r
				}
				share := n / conns
				if i == 0 {
					share += n % conns
				}
				interval := time.Duration(float64(time.Second) * conns / float64(rps))
				start := time.Now()
				req := ClientRequest{Template: tmpl, Path: path}
				for sent := 0; sent < share; {
					due := min(int(time.Since(start)/interval)+1, share)
					for ; sent < due; sent++ {
						select {
						case r := <-free:
							r.Body = r.Body[:0]
							if err := c.RoundTrip(&req, r, cb); err != nil {
								free <- r
								dropped.Add(1)
							}
						default:
							dropped.Add(1)
						}
					}
					next := start.Add(time.Duration(sent) * interval)
					if tick > 0 {
						next = start.Add((time.Since(start)/tick + 1) * tick)
					}
					time.Sleep(time.Until(next))
				}
				for range streams {
					<-free
				}
			}()
		}
		wg.Wait()
		client := selfCPU() - beforeSelf
		server := cpuTicks(srv.cmd.Process.Pid) - beforeSrv
		r1, w1 := syscalls(srv.cmd.Process.Pid)
		if failed.Load() > 0 || done.Load() == 0 {
			b.Fatalf("failed %d, done %d, dropped %d of %d", failed.Load(), done.Load(), dropped.Load(), n)
		}
		// Requests the generator could not start in time (all 64 streams
		// of a connection busy) are counted, not retried.
		d := float64(done.Load())
		b.ReportMetric(float64(client.Microseconds())/d, "client-cpu-µs/req")
		b.ReportMetric(float64(server.Microseconds())/d, "server-cpu-µs/req")
		b.ReportMetric(float64(r1-r0)/d, "server-reads/req")
		b.ReportMetric(float64(w1-w0)/d, "server-writes/req")
		b.ReportMetric(float64(dropped.Load()), "dropped")
	}
}
