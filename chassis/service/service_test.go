package service

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/sched"
)

type testConfig struct {
	Base
	Peer  peer.Flags
	Count int
}

func (c *testConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Base.RegisterFlags(fs, "where to listen")
	c.Peer.RegisterFlags(fs)
	fs.IntVar(&c.Count, "count", c.Count, "how many")
}

func (c *testConfig) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	if c.Count < 0 {
		return errors.New("cannot use --count: negative")
	}
	_, err := c.Peer.Source()
	return err
}

func (c testConfig) String() string { return ConfigString(&c) }

func defaultTestConfig() testConfig {
	return testConfig{Base: Base{Listen: "127.0.0.1:1", Tracing: true}, Peer: peer.Flags{Name: "ocp", Addr: "127.0.0.1:2", Discovery: "static"}, Count: 3}
}

func TestParseCommand(t *testing.T) {
	t.Setenv("CHF_COUNT", "7")
	t.Setenv("CHF_TRACE_RATIO", "0.5")
	cfg := defaultTestConfig()
	run, err := ParseCommand("chf test", "Tests.", &cfg, []string{"--ocp", "127.0.0.1:9,127.0.0.1:10", "--log-level", "debug"})
	if !run || err != nil {
		t.Fatalf("ParseCommand = %v, %v", run, err)
	}
	if cfg.Count != 7 || cfg.Telemetry.TraceRatio != 0.5 || cfg.Peer.Addr != "127.0.0.1:9,127.0.0.1:10" || cfg.LogLevel != slog.LevelDebug {
		t.Fatalf("parsed %+v", cfg)
	}
	// String comes from the flag set: every flag, in name order, with the
	// parsed values, the tracing flags included.
	want := "count=7 discovery=static flight-files=10 flight-recorder= flight-threshold=50ms gogc=0 gomaxprocs=0 k8s-namespace= listen=127.0.0.1:1 log-level=DEBUG network= ocp=127.0.0.1:9,127.0.0.1:10 otlp-endpoint= pprof= runtime-profile=production trace-ratio=0.5"
	if got := cfg.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	// String leaves the config alone.
	if cfg.Count != 7 || cfg.Peer.Addr != "127.0.0.1:9,127.0.0.1:10" {
		t.Fatalf("String changed the config: %+v", cfg)
	}

	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--count", "-1"}, "--count"},
		{[]string{"--listen", "nohostport"}, "--listen"},
		{[]string{"--trace-ratio", "2"}, "--trace-ratio"},
		{[]string{"--discovery", "carrier-pigeon"}, "--ocp"},
		{[]string{"--count", "x"}, "count"},
		{[]string{"positional"}, "positional"},
		{[]string{"--runtime-profile", "turbo"}, "flag -runtime-profile"},
		{[]string{"--runtime-profile="}, "flag -runtime-profile"},
		// The removed flags name their replacement.
		{[]string{"--sysmon-park"}, "use --runtime-profile"},
		{[]string{"--sched-batch=false"}, "use --runtime-profile"},
	} {
		cfg := defaultTestConfig()
		run, err := parseQuiet(&cfg, tc.args)
		if run || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: run %v err %v, want a usage error naming %s", tc.args, run, err, tc.flag)
		}
	}
	// The profile from the environment, and a removed flag's variable
	// refused naming the replacement.
	t.Setenv("CHF_RUNTIME_PROFILE", "lab")
	cfg = defaultTestConfig()
	if run, err := parseQuiet(&cfg, nil); !run || err != nil || cfg.Runtime.Profile != sched.Lab {
		t.Errorf("CHF_RUNTIME_PROFILE=lab: run %v err %v profile %q", run, err, cfg.Runtime.Profile)
	}
	t.Setenv("CHF_SCHED_BATCH", "false")
	cfg = defaultTestConfig()
	if run, err := parseQuiet(&cfg, nil); run || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "CHF_SCHED_BATCH") || !strings.Contains(err.Error(), "use --runtime-profile") {
		t.Errorf("CHF_SCHED_BATCH=false: run %v err %v, want a usage error naming --runtime-profile", run, err)
	}
	os.Unsetenv("CHF_SCHED_BATCH")
	cfg = defaultTestConfig()
	if run, err := parseQuiet(&cfg, []string{"--help"}); run || !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: run %v err %v", run, err)
	}
}

// parseQuiet is ParseCommand without the flag package's own messages.
func parseQuiet(cfg Configurable, args []string) (bool, error) {
	return ParseCommand("chf test", "Tests.", quietConfig{cfg}, args)
}

type quietConfig struct{ Configurable }

// flagSetTo returns fs with its output set to w.
func flagSetTo(fs *flag.FlagSet, w io.Writer) *flag.FlagSet {
	fs.SetOutput(w)
	return fs
}

func (q quietConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.SetOutput(io.Discard)
	q.Configurable.RegisterFlags(fs)
}

func TestGroup(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var events []string
	add := func(g *Group, name string, startErr error) {
		g.Add(name, func() error {
			events = append(events, "start "+name)
			return startErr
		}, func(context.Context) error {
			events = append(events, "stop "+name)
			return nil
		})
	}

	// Stopped by ctx: start in order, stop in reverse.
	ctx, cancel := context.WithCancel(context.Background())
	g := &Group{Log: quiet}
	add(g, "a", nil)
	add(g, "b", nil)
	g.Add("c", func() error { cancel(); return nil }, nil)
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start a", "start b", "stop b", "stop a"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}

	// A failed start stops what started before it, and is the error.
	events = nil
	g = &Group{Log: quiet}
	add(g, "a", nil)
	add(g, "b", errors.New("boom"))
	add(g, "c", nil)
	if err := g.Run(context.Background()); err == nil || err.Error() != "boom" {
		t.Fatalf("Run = %v, want boom", err)
	}
	if want := []string{"start a", "start b", "stop a"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}

	// Fail stops the group; a stop that hangs is abandoned at the
	// deadline and reported.
	events = nil
	g = &Group{Log: quiet, StopTimeout: 50 * time.Millisecond}
	add(g, "a", nil)
	hang := make(chan struct{})
	defer close(hang)
	g.Add("stuck", func() error { go g.Fail(errors.New("died")); return nil }, func(context.Context) error { <-hang; return nil })
	start := time.Now()
	err := g.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "died") || !strings.Contains(err.Error(), "cannot stop stuck") {
		t.Fatalf("Run = %v, want died and the stuck stop", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Run took %s with a 50ms stop deadline", el)
	}
	if want := []string{"start a", "stop a"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}

	// SIGTERM while a component starts: the process is not killed; what
	// started is stopped in reverse and the rest never starts.
	events = nil
	g = &Group{Log: quiet}
	add(g, "a", nil)
	g.Add("b", func() error {
		events = append(events, "start b")
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Error(err)
		}
		time.Sleep(50 * time.Millisecond) // the signal is delivered meanwhile
		return nil
	}, func(context.Context) error { events = append(events, "stop b"); return nil })
	add(g, "c", nil)
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start a", "start b", "stop b", "stop a"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
}

// TestGroupBackground: a background component runs from its start until
// the group stops, which cancels it and waits for it; one that ignores the
// cancellation is abandoned at the stop deadline.
func TestGroupBackground(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	g := &Group{Log: quiet}
	running, ended := make(chan struct{}), make(chan struct{})
	g.Background("worker", func(ctx context.Context) {
		close(running)
		<-ctx.Done()
		close(ended)
	})
	g.Add("trigger", func() error { go func() { <-running; cancel() }(); return nil }, nil)
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Run returned before the background component ended")
	}

	ctx, cancel = context.WithCancel(context.Background())
	g = &Group{Log: quiet, StopTimeout: 50 * time.Millisecond}
	g.Background("stuck", func(context.Context) { select {} })
	g.Add("trigger", func() error { cancel(); return nil }, nil)
	start := time.Now()
	_ = g.Run(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a stuck background component held the stop for %v", d)
	}
}

// TestRuntimeFlags: --gomaxprocs, --gogc and --runtime-profile are every
// service's, production by default; a negative --gomaxprocs or --gogc or
// an unknown profile is refused naming the flag.
func TestRuntimeFlags(t *testing.T) {
	var b Base
	b.Listen = "127.0.0.1:1"
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	b.RegisterFlags(fs, "listen")
	if f := fs.Lookup("runtime-profile"); f == nil || f.DefValue != "production" || b.Runtime.Profile.SchedBatch() || b.Runtime.Profile.KeepSysmonAwake() {
		t.Fatalf("--runtime-profile is not production by default: %+v", f)
	}
	if err := fs.Parse([]string{"--gomaxprocs", "1", "--gogc", "400", "--runtime-profile", "lab"}); err != nil {
		t.Fatal(err)
	}
	if b.Runtime.GOMAXPROCS != 1 || b.Runtime.GOGC != 400 || b.Runtime.Profile != sched.Lab || !b.Runtime.Profile.SchedBatch() || !b.Runtime.Profile.KeepSysmonAwake() {
		t.Fatalf("parsed %+v", b.Runtime)
	}
	if err := fs.Parse([]string{"--runtime-profile=production"}); err != nil || b.Runtime.Profile != sched.Production {
		t.Fatalf("--runtime-profile=production: %v, %+v", err, b.Runtime)
	}
	for _, bad := range [][]string{{"--runtime-profile", "Lab"}, {"--sysmon-park"}, {"--sched-batch"}} {
		if err := fs.Parse(bad); err == nil {
			t.Errorf("%v parsed", bad)
		}
	}
	// The removed flags are neither in the usage nor in FlagString.
	var usage strings.Builder
	printDefaults(flagSetTo(fs, &usage))
	if u := usage.String(); !strings.Contains(u, "-runtime-profile value") || strings.Contains(u, "sysmon-park") || strings.Contains(u, "sched-batch") {
		t.Errorf("usage:\n%s", u)
	}
	if s := FlagString(fs); strings.Contains(s, "sysmon-park") || strings.Contains(s, "sched-batch") || !strings.Contains(s, "runtime-profile=production") {
		t.Errorf("FlagString = %s", s)
	}
	b.Runtime.Profile = "turbo"
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "--runtime-profile") {
		t.Fatalf("Validate with profile turbo = %v, want an error naming --runtime-profile", err)
	}
	b.Runtime.Profile = ""
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	b.Runtime.GOMAXPROCS = -1
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "--gomaxprocs -1") {
		t.Fatalf("Validate with --gomaxprocs -1 = %v, want an error naming the flag", err)
	}
	b.Runtime.GOMAXPROCS = 999999999999 // the runtime would abort: "procresize: invalid arg"
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "--gomaxprocs 999999999999") {
		t.Fatalf("Validate with --gomaxprocs 999999999999 = %v, want an error naming the flag", err)
	}
	b.Runtime.GOMAXPROCS, b.Runtime.GOGC = 0, -5
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "--gogc -5") {
		t.Fatalf("Validate with --gogc -5 = %v, want an error naming the flag", err)
	}
}

func TestParseFlags(t *testing.T) {
	newFS := func() (*flag.FlagSet, *string, *int, *string) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		return fs, fs.String("listen", "127.0.0.1:8080", "listen address"),
			fs.Int("max-inflight", 0, "limit"), fs.String("k8s-namespace", "", "namespace")
	}
	t.Setenv("CHF_LISTEN", "0.0.0.0:9000")
	t.Setenv("CHF_MAX_INFLIGHT", "77")
	t.Setenv("POD_NAMESPACE", "chf")
	fs, listen, maxIn, ns := newFS()
	if err := ParseFlags(fs, []string{"--max-inflight", "5"}); err != nil {
		t.Fatal(err)
	}
	if *listen != "0.0.0.0:9000" || *maxIn != 5 || *ns != "chf" {
		t.Fatalf("got listen=%q max-inflight=%d ns=%q", *listen, *maxIn, *ns)
	}
	t.Setenv("CHF_MAX_INFLIGHT", "lots")
	fs, _, _, _ = newFS()
	err := ParseFlags(fs, nil)
	if err == nil || !strings.Contains(err.Error(), "CHF_MAX_INFLIGHT") || !strings.Contains(err.Error(), "--max-inflight") {
		t.Fatalf("bad env value err = %v", err)
	}
	fs, _, _, _ = newFS()
	if err := ParseFlags(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help err = %v", err)
	}
}
