package aslite

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
)

// durable starts a durable server on dir and a client of it.
func durable(t *testing.T, dir string, cfg Config) (*Server, *as.Client, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	cfg.Namespaces = []string{"test"}
	cfg.DataDir = dir
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return s, dial(t, s.Addr()), logs
}

func dial(t *testing.T, addr string) *as.Client {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	cp := as.NewClientPolicy()
	cp.Timeout = 5 * time.Second
	cl, err := as.NewClientWithPolicyAndHost(cp, as.NewHost(host, p))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func dkey(t *testing.T, set string, i int) *as.Key {
	t.Helper()
	k, err := as.NewKey("test", set, fmt.Sprintf("k%d", i))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func wpolicy() *as.WritePolicy {
	wp := as.NewWritePolicy(0, 0)
	wp.TotalTimeout = 5 * time.Second
	return wp
}

// dfill writes n records to set: bin v = i, and bin s a string; it returns
// what each key must hold.
func dfill(t *testing.T, cl *as.Client, set string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := cl.Put(wpolicy(), dkey(t, set, i), as.BinMap{"v": i, "s": strings.Repeat("x", i%50)}); err != nil {
			t.Fatal(err)
		}
	}
}

func dcheck(t *testing.T, cl *as.Client, set string, n int, want func(i int) (int, bool)) {
	t.Helper()
	for i := 0; i < n; i++ {
		rec, err := cl.Get(nil, dkey(t, set, i))
		v, exists := want(i)
		switch {
		case !exists && err == nil:
			t.Fatalf("%s/%d: exists after recovery, want deleted", set, i)
		case !exists:
			continue
		case err != nil:
			t.Fatalf("%s/%d: %v after recovery", set, i, err)
		case rec.Bins["v"] != v:
			t.Fatalf("%s/%d: v = %v after recovery, want %d", set, i, rec.Bins["v"], v)
		}
	}
}

// TestDurableRestart: puts, operate (incr), deletes and a set truncation
// survive a clean restart, generations included; a server without
// DataDir keeps nothing (the default is unchanged).
func TestDurableRestart(t *testing.T) {
	for _, commit := range []Commit{CommitSync, CommitInterval} {
		t.Run(string(commit), func(t *testing.T) {
			dir := t.TempDir()
			s, cl, _ := durable(t, dir, Config{Commit: commit, CommitInterval: 5 * time.Millisecond})
			dfill(t, cl, "a", 200)
			dfill(t, cl, "gone", 20)
			for i := 0; i < 200; i += 3 {
				if _, err := cl.Operate(wpolicy(), dkey(t, "a", i), as.AddOp(as.NewBin("v", 1000))); err != nil {
					t.Fatal(err)
				}
			}
			for i := 1; i < 200; i += 10 {
				if _, err := cl.Delete(wpolicy(), dkey(t, "a", i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := cl.Truncate(nil, "test", "gone", nil); err != nil {
				t.Fatal(err)
			}
			rec, err := cl.Get(nil, dkey(t, "a", 3))
			if err != nil {
				t.Fatal(err)
			}
			gen := rec.Generation
			cl.Close()
			s.Close()

			s, cl, _ = durable(t, dir, Config{Commit: commit})
			defer s.Close()
			defer cl.Close()
			dcheck(t, cl, "a", 200, func(i int) (int, bool) {
				v := i
				if i%3 == 0 {
					v += 1000
				}
				return v, i%10 != 1
			})
			dcheck(t, cl, "gone", 20, func(int) (int, bool) { return 0, false })
			rec, err = cl.Get(nil, dkey(t, "a", 3))
			if err != nil || rec.Generation != gen {
				t.Fatalf("generation after restart = %v (%v), want %d", rec, err, gen)
			}
		})
	}
}

// TestDurableSnapshots: with a small snapshot threshold the log is compacted
// into snapshots while writes go on; old files are removed and a restart
// recovers everything from the newest snapshot and the logs after it.
func TestDurableSnapshots(t *testing.T) {
	dir := t.TempDir()
	s, cl, _ := durable(t, dir, Config{SnapshotBytes: 8 << 10})
	for round := 0; round < 3; round++ {
		dfill(t, cl, "a", 300)
	}
	for i := 0; i < 300; i++ {
		if err := cl.Put(wpolicy(), dkey(t, "a", i), as.BinMap{"v": i * 2}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.jr.snapshots.Load() == 0 || s.jr.snapRun.Load() {
		if time.Now().After(deadline) {
			t.Fatal("no snapshot written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl.Close()
	s.Close()
	logs, snaps, err := dataFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 || logs[0] < snaps[0] {
		t.Fatalf("after compaction: logs %v snapshots %v; want one snapshot and only the logs from it on", logs, snaps)
	}
	s, cl, logText := durable(t, dir, Config{})
	defer s.Close()
	defer cl.Close()
	dcheck(t, cl, "a", 300, func(i int) (int, bool) { return i * 2, true })
	if s.recovered.snapshot == 0 || !strings.Contains(logText.String(), "aslite recovered") {
		t.Fatalf("recovery did not use a snapshot: %+v\n%s", s.recovered, logText)
	}
}

// TestDurableTornTail: after a crash, a torn last record (a write cut in
// the middle) and garbage after it are dropped and logged; everything
// acknowledged before is recovered and the server starts.
func TestDurableTornTail(t *testing.T) {
	dir := t.TempDir()
	s, cl, _ := durable(t, dir, Config{})
	dfill(t, cl, "a", 100)
	cl.Close()
	s.crash()
	last := lastLog(t, dir)
	// A torn record: a header promising 200 bytes, 13 of them present.
	torn := []byte{0, 0, 0, 200, 1, 2, 3, 4, jPut, 4, 't', 'e', 's', 't', 0, 1, 2, 3, 4, 5, 6}
	appendFile(t, last, torn)

	s, cl, logText := durable(t, dir, Config{})
	dcheck(t, cl, "a", 100, func(i int) (int, bool) { return i, true })
	if s.recovered.droppedBytes != int64(len(torn)) || !strings.Contains(logText.String(), "torn or corrupted") {
		t.Fatalf("dropped %d bytes, want %d; log:\n%s", s.recovered.droppedBytes, len(torn), logText)
	}
	// New writes after the recovery survive the next restart too.
	if err := cl.Put(wpolicy(), dkey(t, "a", 1000), as.BinMap{"v": 7}); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	s.crash()
	s, cl, _ = durable(t, dir, Config{})
	defer s.Close()
	defer cl.Close()
	dcheck(t, cl, "a", 100, func(i int) (int, bool) { return i, true })
	if rec, err := cl.Get(nil, dkey(t, "a", 1000)); err != nil || rec.Bins["v"] != 7 {
		t.Fatalf("write after recovery: %v %v", rec, err)
	}
}

// TestDurableCorruptedRecord: a record whose bytes changed on disk (CRC
// mismatch) ends the intact prefix: the records before it are recovered,
// the rest of the file is dropped and logged, and the server starts.
func TestDurableCorruptedRecord(t *testing.T) {
	dir := t.TempDir()
	s, cl, _ := durable(t, dir, Config{})
	dfill(t, cl, "a", 100)
	cl.Close()
	s.crash()
	last := lastLog(t, dir)
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	// Find the start of record 60 and flip a byte of its payload.
	off := 0
	for i := 0; i < 60; i++ {
		off += jHeaderBytes + int(uint32(b[off])<<24|uint32(b[off+1])<<16|uint32(b[off+2])<<8|uint32(b[off+3]))
	}
	b[off+jHeaderBytes+5] ^= 0xFF
	if err := os.WriteFile(last, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, cl, logText := durable(t, dir, Config{})
	defer s.Close()
	defer cl.Close()
	dcheck(t, cl, "a", 100, func(i int) (int, bool) { return i, i < 60 })
	if s.recovered.droppedBytes != int64(len(b)-off) || !strings.Contains(logText.String(), "checksum") {
		t.Fatalf("dropped %d bytes, want %d; log:\n%s", s.recovered.droppedBytes, len(b)-off, logText)
	}
}

// TestDurableRejectsBadCommit: an unknown commit policy is a config error
// naming it.
func TestDurableRejectsBadCommit(t *testing.T) {
	if _, err := New(Config{Namespaces: []string{"test"}, DataDir: t.TempDir(), Commit: "always"}); err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("New with commit %q: %v, want an error naming commit", "always", err)
	}
}

func lastLog(t *testing.T, dir string) string {
	t.Helper()
	logs, _, err := dataFiles(dir)
	if err != nil || len(logs) == 0 {
		t.Fatalf("no log in %s: %v", dir, err)
	}
	return filepath.Join(dir, logName(logs[len(logs)-1]))
}

func appendFile(t *testing.T, name string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// childEnv runs this test binary as a durable aslite server (see
// TestMain), printing its address on stdout.
const childEnv = "ASLITE_TEST_DURABLE_CHILD"

func runChild() {
	s, err := New(Config{Namespaces: []string{"test"}, DataDir: os.Getenv(childEnv), Commit: CommitSync})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(s.Addr())
	select {}
}

func startChild(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
	}()
	select {
	case a := <-addr:
		if a == "" {
			t.Fatal("child server did not start")
		}
		return cmd, a
	case <-time.After(30 * time.Second):
		t.Fatal("child server did not print its address within 30s")
	}
	return nil, ""
}

// TestDurableKill9: a separate aslite process with CommitSync is killed
// with SIGKILL while clients write; after a restart on the same directory
// every write the official client saw acknowledged is there.
func TestDurableKill9(t *testing.T) {
	dir := t.TempDir()
	cmd, addr := startChild(t, dir)
	cl := dial(t, addr)
	var mu sync.Mutex
	acked := map[int]int{} // key -> last acknowledged value
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := w*1000 + n%200
				wp := wpolicy()
				wp.TotalTimeout = time.Second
				wp.MaxRetries = 0
				if err := cl.Put(wp, dkey(t, "a", k), as.BinMap{"v": n}); err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked[k] = n
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Kill()
	cmd.Wait()
	close(stop)
	wg.Wait()
	cl.Close()
	if len(acked) < 50 {
		t.Fatalf("only %d keys acknowledged before the kill", len(acked))
	}
	_, addr = startChild(t, dir)
	cl = dial(t, addr)
	defer cl.Close()
	lost := 0
	for k, v := range acked {
		rec, err := cl.Get(nil, dkey(t, "a", k))
		// The write in flight at the kill may have landed (v+1 of the
		// same worker sequence is v+200 here); an older value is a loss.
		if err != nil || rec.Bins["v"].(int) < v {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes lost after kill -9", lost, len(acked))
	}
	t.Logf("%d keys, every acknowledged write recovered", len(acked))
}
