package flight

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFiles waits up to 10 s for dir to hold n files and returns them.
func waitFiles(t *testing.T, dir string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, _ := filepath.Glob(filepath.Join(dir, "*.trace"))
		if len(m) >= n || time.Now().After(deadline) {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// busy makes trace events while the recorder runs.
func busy() {
	for i := 0; i < 200; i++ {
		done := make(chan struct{})
		go func() { close(done) }()
		<-done
		time.Sleep(time.Millisecond)
	}
}

// A call under the threshold writes nothing; one at or over it writes the
// last seconds of the execution trace, as runtime/trace writes it; calls
// during the pause after a snapshot write one more after it, not one
// each; SIGUSR1 writes one too; at --flight-files the recorder stops, and
// Observe is a no-op again.
func TestSnapshots(t *testing.T) {
	pause = 300 * time.Millisecond
	defer func() { pause = Window }()
	dir := filepath.Join(t.TempDir(), "fr")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := Start(Config{Dir: dir, Threshold: 20 * time.Millisecond, Files: 3}, "svc", log)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	busy()
	Observe(19 * time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
		t.Fatalf("a call under the threshold wrote %v", m)
	}
	Observe(20 * time.Millisecond)
	m := waitFiles(t, dir, 1)
	if len(m) != 1 || !strings.HasPrefix(filepath.Base(m[0]), "svc-") {
		t.Fatalf("after a slow call: %v", m)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	// runtime/trace's header, then the events: "go 1.26 trace\x00..."
	if !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:16], []byte(" trace")) || len(b) < 1024 {
		t.Fatalf("snapshot of %d bytes starting %q: not an execution trace", len(b), b[:min(len(b), 16)])
	}
	for range 50 { // a stall slows many calls: one more snapshot, after the pause
		Observe(time.Second)
	}
	if m := waitFiles(t, dir, 2); len(m) != 2 {
		t.Fatalf("after a burst of slow calls: %v", m)
	}
	time.Sleep(2 * pause)
	if m, _ := filepath.Glob(filepath.Join(dir, "*.trace")); len(m) != 2 {
		t.Fatalf("a burst of slow calls wrote %d snapshots, want one after the first", len(m)-1)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if m := waitFiles(t, dir, 3); len(m) != 3 || r.Written() != 3 {
		t.Fatalf("after SIGUSR1: %v (written %d)", m, r.Written())
	}
	deadline := time.Now().Add(5 * time.Second)
	for active.Load() != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if active.Load() != nil {
		t.Fatal("the recorder still runs after --flight-files snapshots")
	}
	Observe(time.Second)
	time.Sleep(2 * pause)
	if m, _ := filepath.Glob(filepath.Join(dir, "*.trace")); len(m) != 3 {
		t.Fatalf("%d snapshots after the limit of 3", len(m))
	}
	// Another recorder may start once this one stopped.
	r.Stop()
	r2, err := Start(Config{Dir: dir, Threshold: time.Second, Files: 1}, "svc", log)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	r2.Stop()
}

// Go runs one flight recorder per process: a second cannot start while
// one runs, and says why (a runtime/trace.Start beside it is allowed);
// bad flags are refused naming the flag.
func TestStartRefuses(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := trace.Start(io.Discard); err != nil {
		t.Fatal(err)
	}
	r, err := Start(Config{Dir: t.TempDir(), Threshold: time.Second, Files: 1}, "svc", log)
	trace.Stop()
	if err != nil {
		t.Fatalf("beside runtime/trace.Start: %v", err)
	}
	_, err = Start(Config{Dir: t.TempDir(), Threshold: time.Millisecond, Files: 1}, "svc2", log)
	if err == nil || !strings.Contains(err.Error(), "flight recorder") {
		t.Fatalf("a second recorder: %v", err)
	}
	if a := active.Load(); a != r {
		t.Fatal("a recorder that failed to start replaced the running one")
	}
	r.Stop()
	if active.Load() != nil {
		t.Fatal("a stopped recorder still receives calls")
	}
	if _, err := Start(Config{Threshold: time.Second, Files: 1}, "svc", log); err == nil {
		t.Fatal("started without a directory")
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Start(Config{Dir: filepath.Join(file, "sub"), Threshold: time.Second, Files: 1}, "svc", log); err == nil || !strings.Contains(err.Error(), "--flight-recorder") {
		t.Fatalf("a directory under a file: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--flight-threshold", "0"}, "--flight-threshold"},
		{[]string{"--flight-threshold", "-1s"}, "--flight-threshold"},
		{[]string{"--flight-files", "0"}, "--flight-files"},
		{[]string{"--flight-files", "1001"}, "--flight-files"},
	} {
		var cfg Config
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
	var cfg Config
	cfg.RegisterFlags(flag.NewFlagSet("x", flag.ContinueOnError))
	if cfg.Validate() != nil || cfg.Threshold != DefaultThreshold || cfg.Files != DefaultFiles || cfg.Dir != "" {
		t.Errorf("defaults %+v", cfg)
	}
}

// Without a recorder SIGUSR1 is logged, not fatal (its default action
// would end the process, this test's included).
func TestIgnoreSignal(t *testing.T) {
	lines := make(chanWriter, 16)
	IgnoreSignal(slog.New(slog.NewTextHandler(lines, nil)))
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		if !strings.Contains(l, "SIGUSR1 ignored") {
			t.Fatalf("log %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SIGUSR1 not logged")
	}
}

// chanWriter hands each write (one log line) to the test.
type chanWriter chan string

func (c chanWriter) Write(p []byte) (int, error) {
	c <- string(p)
	return len(p), nil
}

// Observe is on every request's path: without a recorder, or under the
// threshold, it is an atomic load and a compare, and allocates nothing.
func BenchmarkObserve(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Observe(time.Millisecond)
		}
	})
	b.Run("on", func(b *testing.B) {
		r, err := Start(Config{Dir: b.TempDir(), Threshold: time.Hour, Files: 1}, "bench", slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Stop()
		b.ReportAllocs()
		for b.Loop() {
			Observe(time.Millisecond)
		}
	})
}

func TestObserveAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Observe(time.Second) }); n != 0 {
		t.Fatalf("Observe without a recorder allocates %v times", n)
	}
}
