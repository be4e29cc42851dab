package aslite

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"
)

// The client benchmarks run aslite in a child process (this test binary
// re-executed as TestBenchServerProcess) so that the server's CPU is read
// from /proc/<pid>/stat exactly as for redis-server in BenchmarkRedis.
//
//	go test -run '^$' -bench 'Client|Redis' -benchtime 100000x -count 5 ./abm/aslite

const benchKeys = 10000

// TestBenchServerProcess is the child: it serves until stdin closes.
func TestBenchServerProcess(t *testing.T) {
	if os.Getenv("ASLITE_BENCH_CHILD") != "1" {
		t.Skip("helper process for the benchmarks")
	}
	cfg := Config{Namespaces: []string{"chf"}, Logger: quietLogger()}
	if c := os.Getenv("ASLITE_BENCH_COMMIT"); c != "" && c != "off" {
		cfg.DataDir, cfg.Commit = t.TempDir(), Commit(c)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("ASLITE_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("ADDR %s\n", s.Addr())
	bufio.NewReader(os.Stdin).ReadString('\n')
	s.Close()
}

// childServer starts the aslite child process and returns its address and pid.
func childServer(b *testing.B) (string, int) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^TestBenchServerProcess$")
	procs := os.Getenv("ASLITE_BENCH_SERVER_PROCS") // GOMAXPROCS of the server
	if procs == "" {
		procs = "2"
	}
	cmd.Env = append(os.Environ(), "ASLITE_BENCH_CHILD=1", "GOMAXPROCS="+procs)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return addr, cmd.Process.Pid
		}
	}
	b.Fatal("aslite child did not start")
	return "", 0
}

// procCPU returns the user+system CPU time of pid (0 = this process).
func procCPU(b *testing.B, pid int) time.Duration {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("cannot read cpu time: %v", err)
	}
	// Fields after the parenthesised command name: state is field 3,
	// utime and stime are fields 14 and 15.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // CLK_TCK = 100 on Linux
}

// accountBins is an account-sized record: ~150 bytes of bins.
func accountBins(i int) as.BinMap {
	return as.BinMap{
		"balance":  100000000 + i,
		"currency": "EUR",
		"res":      bytes.Repeat([]byte{byte(i)}, 100),
	}
}

func benchClient(b *testing.B, op func(c *as.Client, keys []*as.Key, r *rand.Rand) error) {
	addr, pid := childServer(b)
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	cp := as.NewClientPolicy()
	cp.ConnectionQueueSize = 64
	c, err := as.NewClientWithPolicy(cp, host, p)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	keys := make([]*as.Key, benchKeys)
	for i := range keys {
		keys[i], _ = as.NewKey("chf", "accounts", fmt.Sprintf("imsi-%015d", 1010000000001+i))
		if err := c.Put(nil, keys[i], accountBins(i)); err != nil {
			b.Fatal(err)
		}
	}
	var seed atomic.Uint64
	b.SetParallelism(8) // 8 x GOMAXPROCS client goroutines
	b.ReportAllocs()
	srv0, self0, t0 := procCPU(b, pid), procCPU(b, 0), time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(seed.Add(1), 7))
		for pb.Next() {
			if err := op(c, keys, r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	elapsed := time.Since(t0)
	srv, self := procCPU(b, pid)-srv0, procCPU(b, 0)-self0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(srv.Microseconds())/float64(b.N), "server-µs/op")
	b.ReportMetric(float64(self.Microseconds())/float64(b.N), "client-µs/op")
}

func BenchmarkClientGet(b *testing.B) {
	benchClient(b, func(c *as.Client, keys []*as.Key, r *rand.Rand) error {
		_, err := c.Get(nil, keys[r.IntN(len(keys))])
		return err
	})
}

func BenchmarkClientPut(b *testing.B) {
	var i atomic.Int64
	benchClient(b, func(c *as.Client, keys []*as.Key, r *rand.Rand) error {
		return c.Put(nil, keys[r.IntN(len(keys))], accountBins(int(i.Add(1))))
	})
}

// BenchmarkClientPutDurable is BenchmarkClientPut against a server with
// durability off, Config.Commit interval and sync (a data dir on the
// test's temporary directory); latency-µs/op is the mean time one Put
// takes as its client goroutine sees it.
//
//	go test -run '^$' -bench ClientPutDurable -benchtime 20000x -count 3 ./abm/aslite
func BenchmarkClientPutDurable(b *testing.B) {
	for _, commit := range []string{"off", "interval", "sync"} {
		b.Run("commit="+commit, func(b *testing.B) {
			b.Setenv("ASLITE_BENCH_COMMIT", commit)
			var i atomic.Int64
			var lat atomic.Int64
			benchClient(b, func(c *as.Client, keys []*as.Key, r *rand.Rand) error {
				t0 := time.Now()
				err := c.Put(nil, keys[r.IntN(len(keys))], accountBins(int(i.Add(1))))
				lat.Add(int64(time.Since(t0)))
				return err
			})
			b.ReportMetric(float64(lat.Load())/1e3/float64(b.N), "latency-µs/op")
		})
	}
}

// BenchmarkClientRMW is the ABM's charging pattern: read the account, write
// it back with a generation check, retry on conflict. One op = one
// successful read-modify-write (two round trips).
func BenchmarkClientRMW(b *testing.B) {
	benchClient(b, func(c *as.Client, keys []*as.Key, r *rand.Rand) error {
		k := keys[r.IntN(len(keys))]
		for {
			rec, err := c.Get(nil, k)
			if err != nil {
				return err
			}
			wp := as.NewWritePolicy(rec.Generation, 0)
			wp.GenerationPolicy = as.EXPECT_GEN_EQUAL
			bins := as.BinMap{"balance": rec.Bins["balance"].(int) - 1, "currency": rec.Bins["currency"], "res": rec.Bins["res"]}
			err = c.Put(wp, k, bins)
			var ae *as.AerospikeError
			if errors.As(err, &ae) && ae.ResultCode == types.GENERATION_ERROR {
				continue
			}
			return err
		}
	})
}

// BenchmarkRedis is the yardstick: Debian's redis-server driven by
// redis-benchmark (GET and SET of 150-byte values, 16 connections, no
// pipelining, 10000 keys), server CPU read from /proc/<pid>/stat like
// aslite's. b.N is ignored: each iteration is a fixed run of 200000
// requests per command; run with -benchtime 1x.
func BenchmarkRedis(b *testing.B) {
	server, err1 := exec.LookPath("redis-server")
	bench, err2 := exec.LookPath("redis-benchmark")
	if err1 != nil || err2 != nil {
		b.Skip("redis-server and redis-benchmark not installed (apt-get install redis-server redis-tools)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	dir := b.TempDir()
	srv := exec.Command(server, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "yes")
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	const n = 200000
	for _, t := range []string{"set", "get"} {
		b.Run(strings.ToUpper(t), func(b *testing.B) {
			var srvCPU time.Duration
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				c0, t0 := procCPU(b, srv.Process.Pid), time.Now()
				out, err := exec.Command(bench, "-h", "127.0.0.1", "-p", port, "-t", t, "-d", "150", "-c", "16", "-r", strconv.Itoa(benchKeys), "-n", strconv.Itoa(n), "-q").CombinedOutput()
				if err != nil {
					b.Fatalf("redis-benchmark: %v\n%s", err, out)
				}
				elapsed += time.Since(t0)
				srvCPU += procCPU(b, srv.Process.Pid) - c0
			}
			ops := float64(n * b.N)
			b.ReportMetric(ops/elapsed.Seconds(), "ops/s")
			b.ReportMetric(float64(srvCPU.Microseconds())/ops, "server-µs/op")
		})
	}
}

// BenchmarkMemory fills a store with account-sized records through the
// server's write path (no network) and reports resident memory per record.
// ASLITE_BENCH_RECORDS sets the count (default 1000000); run with
// -benchtime 1x.
func BenchmarkMemory(b *testing.B) {
	n := 1000000
	if v := os.Getenv("ASLITE_BENCH_RECORDS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	for i := 0; i < b.N; i++ {
		runtime.GC()
		rss0 := rssBytes(b)
		s, err := New(Config{Namespaces: []string{"chf"}, Logger: quietLogger(), ReclaimInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		fill(b, s, n)
		runtime.GC()
		rss := rssBytes(b) - rss0
		debug.FreeOSMemory()
		settled := rssBytes(b) - rss0
		b.ReportMetric(float64(settled)/float64(n), "settled-rss-B/record")
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(rss)/float64(n), "rss-B/record")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		b.ReportMetric(float64(ms.HeapInuse)/float64(n), "heap-B/record")
		runtime.KeepAlive(s)
	}
}

// fill writes n account records through the write path.
func fill(b *testing.B, s *Server, n int) {
	ws := &workspace{}
	var out []byte
	res := bytes.Repeat([]byte{'r'}, 100)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i++ {
		// Digests are uniformly distributed like RIPEMD-160 ones; drawing
		// them at random keeps a 20M fill fast.
		var bal [8]byte
		v := uint64(100000000 + i)
		for j := 7; j >= 0; j-- {
			bal[j] = byte(v)
			v >>= 8
		}
		r := request{
			h:  msgHeader{info2: info2Write},
			ns: s.byName["chf"], set: []byte("accounts"), hasDigest: true,
			ops: []wireOp{
				{op: opWrite, ptype: ptInteger, name: []byte("balance"), val: bal[:]},
				{op: opWrite, ptype: ptString, name: []byte("currency"), val: []byte("EUR")},
				{op: opWrite, ptype: ptBlob, name: []byte("res"), val: res},
			},
		}
		binary.LittleEndian.PutUint64(r.d[0:], rng.Uint64())
		binary.LittleEndian.PutUint64(r.d[8:], rng.Uint64())
		binary.LittleEndian.PutUint32(r.d[16:], rng.Uint32())
		out = s.execute(ws, out[:0], &r, 0)
		if out[5] != rcOK {
			b.Fatalf("write failed: rc %d", out[5])
		}
	}
}

var rssRe = regexp.MustCompile(`VmRSS:\s+(\d+) kB`)

func rssBytes(b *testing.B) int64 {
	raw, err := os.ReadFile(filepath.Join("/proc/self/status"))
	if err != nil {
		b.Fatal(err)
	}
	m := rssRe.FindSubmatch(raw)
	if m == nil {
		b.Fatal("no VmRSS")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}
