package floor

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/sched"
)

// TestMain lets the test binary serve as the relay binary: Measure starts
// `EXE floor relay --kind K --size N [--next ADDR]`.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "floor" && os.Args[2] == "relay" {
		fs := flag.NewFlagSet("relay", flag.ExitOnError)
		kind := fs.String("kind", "", "")
		next := fs.String("next", "", "")
		size := fs.Int("size", 0, "")
		profile := sched.Production
		fs.Var(&profile, sched.FlagName, "")
		_ = fs.Parse(os.Args[3:])
		if err := Serve(context.Background(), *kind, *next, *size, profile, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testOptions(t *testing.T) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := Defaults()
	o.Exe, o.Hops, o.Rate, o.Duration, o.Warmup, o.Size = exe, 3, 400, time.Second, 100*time.Millisecond, 300
	return o
}

// TestMeasureChain: both relay kinds carry the paced exchanges through a
// chain of three processes; every relay's CPU is read, the rate is held
// and the latency is that of a round trip through the chain.
func TestMeasureChain(t *testing.T) {
	o := testOptions(t)
	var progress strings.Builder
	o.Progress = &progress
	rs, err := Measure(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Relay != RelayGo || rs[1].Relay != RelayRaw {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if r.RuntimeProfile != "production" || r.SchedBatch {
			t.Errorf("%s: runtime profile %q, SCHED_BATCH %v; want production by default", r.Relay, r.RuntimeProfile, r.SchedBatch)
		}
		if r.Exchanges < 300 || r.Achieved < 0.75*o.Rate || r.Achieved > 1.05*o.Rate {
			t.Errorf("%s: %d exchanges at %.0f/s, offered %.0f/s", r.Relay, r.Exchanges, r.Achieved, o.Rate)
		}
		if len(r.RelayUs) != o.Hops || !(r.TotalUs > 0) || r.PerHopUs != r.TotalUs/float64(o.Hops) {
			t.Errorf("%s: relay CPU %v, total %.1f, per hop %.1f", r.Relay, r.RelayUs, r.TotalUs, r.PerHopUs)
		}
		if r.RTT.Count != r.Exchanges || !(r.RTT.P50 > 0) || r.RTT.P50 > r.RTT.P99 {
			t.Errorf("%s: rtt %+v for %d exchanges", r.Relay, r.RTT, r.Exchanges)
		}
	}
	if !strings.Contains(progress.String(), "go relays:") || !strings.Contains(progress.String(), "raw relays:") {
		t.Errorf("progress: %q", progress.String())
	}
	var table strings.Builder
	Write(&table, rs)
	if !strings.Contains(table.String(), "CPU µs/exch") || !strings.Contains(table.String(), "runtime profile production") || !strings.Contains(table.String(), "raw relays' CPU µs per exchange, first hop first:") {
		t.Errorf("table:\n%s", table.String())
	}
}

// TestMeasureCancelled: a cancelled measurement returns the context's
// error within a second and leaves no relay process behind.
func TestMeasureCancelled(t *testing.T) {
	o := testOptions(t)
	o.Duration, o.Relays = time.Minute, []string{RelayRaw}
	ctx, cancel := context.WithCancel(context.Background())
	before := children(t)
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	_, err := Measure(ctx, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to stop", d)
	}
	if after := children(t); after > before {
		t.Errorf("%d child processes left, %d before", after, before)
	}
}

// children counts this process's live (not zombie) children.
func children(t *testing.T) int {
	t.Helper()
	n := 0
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	me := fmt.Sprint(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == me && f[0] != "Z" {
			n++
		}
	}
	return n
}

func TestOptionsValidate(t *testing.T) {
	f := func(mod func(*Options), flagName string) {
		t.Helper()
		o := Defaults()
		mod(&o)
		err := o.Validate()
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), flagName) {
			t.Errorf("error %v, want ErrInput naming %s", err, flagName)
		}
	}
	f(func(o *Options) { o.Hops = 0 }, "--hops")
	f(func(o *Options) { o.Hops = MaxHops + 1 }, "--hops")
	f(func(o *Options) { o.Rate = 0 }, "--rate")
	f(func(o *Options) { o.Rate = MaxRate * 2 }, "--rate")
	f(func(o *Options) { o.Duration = 0 }, "--duration")
	f(func(o *Options) { o.Warmup = -time.Second }, "--warmup")
	f(func(o *Options) { o.Size = 0 }, "--size")
	f(func(o *Options) { o.Size = MaxSize + 1 }, "--size")
	f(func(o *Options) { o.Relays = nil }, "--relays")
	f(func(o *Options) { o.Relays = []string{"go", "fast"} }, "--relays")
	if err := Defaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	f(func(o *Options) { o.Profile = "turbo" }, "--runtime-profile")
	if err := Serve(context.Background(), "fast", "", 10, sched.Lab, nil); !errors.Is(err, ErrInput) {
		t.Errorf("Serve with a bad kind: %v", err)
	}
	if err := Serve(context.Background(), RelayGo, "", 10, "turbo", nil); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "--runtime-profile") {
		t.Errorf("Serve with a bad profile: %v", err)
	}
}

// A relay that cannot reach its next one exits with an error instead of
// hanging, and Measure reports it.
func TestRelayNextUnreachable(t *testing.T) {
	ln, err := listenClosedPort()
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, w, _ := os.Pipe()
	defer r.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, RelayGo, ln, 8, sched.Production, w); w.Close() }()
	buf := make([]byte, 64)
	n, _ := r.Read(buf)
	addr := strings.TrimSpace(string(buf[:n]))
	c, err := dialTCP(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "next relay") {
		t.Fatalf("Serve with an unreachable next relay: %v", err)
	}
}

// listenClosedPort returns a loopback address nothing listens on.
func listenClosedPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

func dialTCP(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }
