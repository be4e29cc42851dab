// Package service is what makes a chf service command: a configuration
// struct that registers its flags (Configurable; Base holds the flags
// every service has), ParseCommand reading the command line and the CHF_*
// environment, and Run starting the service's components in one Group
// until SIGINT or SIGTERM, then stopping them in reverse order. Pprof and
// the Go runtime's settings (chassis/sched) are applied on the way.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/chassis/flight"
	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// A command's configuration is a plain struct that starts from its
// package's Default value and registers one flag per field with
// RegisterFlags, using the struct's current values as the flags'
// defaults. So the flag set is the one description of the configuration:
// ParseCommand fills the struct from the command line and the CHF_*
// environment, and FlagString (a config's String, --check-flags) prints it
// back from the flag set, so that the printed configuration cannot drift
// from the flags.

// Configurable is a command's configuration.
type Configurable interface {
	// RegisterFlags registers a flag for every field on fs, with the
	// field's current value as the default.
	RegisterFlags(fs *flag.FlagSet)
	// Validate checks the parsed values; an error names the flag.
	Validate() error
}

// ErrUsage is wrapped by the errors of ParseCommand that are the user's
// (bad flags, positional arguments, invalid values): exit status 2.
var ErrUsage = errors.New("chassis: usage error")

// usageError marks err as ErrUsage while keeping its text.
type usageError struct{ err error }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{ErrUsage, e.err} }
func asUsage(err error) error        { return usageError{err} }

// ParseCommand parses args for the command name ("chf cgw") into cfg: it
// registers cfg's flags and --check-flags, parses the command line and then
// the environment (ParseFlags), refuses positional arguments and validates
// cfg. With --check-flags it prints the resolved configuration
// (FlagString) to stdout and returns run = false: the command exits without
// starting anything. about is the help text after the usage line. -h and
// --help return flag.ErrHelp.
func ParseCommand(name, about string, cfg Configurable, args []string) (run bool, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	check := fs.Bool("check-flags", false, "parse and validate flags and environment, print the resolved configuration and exit without starting")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n\n%s\nEvery flag also reads %s<FLAG> (upper case, '-' → '_') from the environment\nwhen not given.\n\nflags:\n", name, strings.TrimRight(about, "\n")+"\n", EnvPrefix)
		printDefaults(fs)
	}
	if err := ParseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, err
		}
		return false, asUsage(err)
	}
	if fs.NArg() > 0 {
		return false, asUsage(fmt.Errorf("cannot parse flags: unexpected argument %q", fs.Arg(0)))
	}
	if err := cfg.Validate(); err != nil {
		return false, asUsage(err)
	}
	if *check {
		fmt.Println(FlagString(fs))
		return false, nil
	}
	return true, nil
}

// removedFlag is implemented by the flag.Value of a flag that no longer
// exists (sched.Runtime registers two): the usage and FlagString leave it
// out, as the flag package asks a Value for IsBoolFlag.
type removedFlag interface{ IsRemoved() bool }

// isRemoved says whether fl is a removed flag.
func isRemoved(fl *flag.Flag) bool {
	r, ok := fl.Value.(removedFlag)
	return ok && r.IsRemoved()
}

// printDefaults is fs.PrintDefaults without the removed flags.
func printDefaults(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if !isRemoved(f) {
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	shown.PrintDefaults()
}

// FlagString prints the values of fs's flags as name=value pairs in name
// order (values with spaces or quotes quoted), leaving out --check-flags
// and removed flags.
func FlagString(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "check-flags" || isRemoved(f) {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		v := f.Value.String()
		if strings.ContainsAny(v, " \t\"") {
			v = strconv.Quote(v)
		}
		b.WriteString(f.Name + "=" + v)
	})
	return b.String()
}

// ConfigString is FlagString of the flags cfg registers: the String of a
// configuration. It registers them on a copy of the config (made by the
// caller, cfg), so the config itself is left alone.
func ConfigString(cfg Configurable) string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	return FlagString(fs)
}

// Base is the configuration every service command shares: --listen,
// --log-level, --pprof, the flight recorder's --flight-recorder,
// --flight-threshold and --flight-files, the Go runtime's --gomaxprocs,
// --gogc and --runtime-profile and, when Tracing is set, --trace-ratio
// and --otlp-endpoint.
type Base struct {
	Listen   string
	LogLevel slog.Level
	Pprof    string
	// Flight is the execution-trace flight recorder (--flight-recorder).
	Flight  flight.Config
	Runtime sched.Runtime
	// Tracing says whether the service has the tracing flags (not a flag).
	Tracing   bool
	Telemetry telemetry.Config
}

// RegisterFlags registers the Base flags; listenHelp describes --listen.
func (b *Base) RegisterFlags(fs *flag.FlagSet, listenHelp string) {
	fs.StringVar(&b.Listen, "listen", b.Listen, listenHelp)
	fs.TextVar(&b.LogLevel, "log-level", b.LogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&b.Pprof, "pprof", b.Pprof, "host:port to serve net/http/pprof on (profiling); empty = off")
	b.Flight.RegisterFlags(fs)
	b.Runtime.RegisterFlags(fs)
	if b.Tracing {
		fs.Float64Var(&b.Telemetry.TraceRatio, "trace-ratio", b.Telemetry.TraceRatio,
			"share of new traces sampled at this service, 0..1 (requests arriving with a sampled W3C traceparent are always traced while an OTLP endpoint is set); 0 for load runs")
		fs.StringVar(&b.Telemetry.OTLPEndpoint, "otlp-endpoint", b.Telemetry.OTLPEndpoint,
			"OTLP/HTTP collector endpoint for traces, host:port (plain HTTP) or URL; empty disables tracing")
	}
}

// Validate checks --listen (host:port), --gomaxprocs, --runtime-profile,
// the flight recorder's flags and --trace-ratio.
func (b *Base) Validate() error {
	if _, _, err := net.SplitHostPort(b.Listen); err != nil {
		return fmt.Errorf("cannot parse --listen %q: %w", b.Listen, err)
	}
	if err := b.Runtime.Validate(); err != nil {
		return err
	}
	if err := b.Flight.Validate(); err != nil {
		return err
	}
	if b.Tracing && (b.Telemetry.TraceRatio < 0 || b.Telemetry.TraceRatio > 1) {
		return fmt.Errorf("cannot use --trace-ratio %g: %w", b.Telemetry.TraceRatio, telemetry.ErrBadRatio)
	}
	return nil
}

// Group runs the components of a service: Run starts them in the order
// they were added, waits for SIGINT or SIGTERM (or ctx, or Fail), then
// stops the started ones in reverse order. All stops share one deadline
// (StopTimeout; a stop reached after it still gets lateStopGrace), and a
// stop that outlives its deadline is abandoned, so a stuck component
// cannot keep the process from exiting.
type Group struct {
	// Log receives the group's messages (default slog.Default()).
	Log *slog.Logger
	// StopTimeout bounds the whole stop sequence (default 10 s).
	StopTimeout time.Duration
	parts       []part
	failed      chan error
}

type part struct {
	name  string
	start func() error
	stop  func(ctx context.Context) error
}

// Add appends a component: start runs in order (an error stops the ones
// already started and is Run's error); stop (nil = nothing to stop) runs
// in reverse order. Add must not be called once Run runs.
func (g *Group) Add(name string, start func() error, stop func(ctx context.Context) error) {
	g.parts = append(g.parts, part{name, start, stop})
}

// Background adds a component that is one goroutine running run until
// its context is cancelled: started in order, and on stop cancelled and
// waited for within the stop's deadline.
func (g *Group) Background(name string, run func(ctx context.Context)) {
	var stop context.CancelFunc
	done := make(chan struct{})
	g.Add(name, func() error {
		var ctx context.Context
		ctx, stop = context.WithCancel(context.Background())
		go func() { defer close(done); run(ctx) }()
		return nil
	}, func(ctx context.Context) error {
		stop()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// Fail makes Run stop the group and return err (for a component that
// failed after starting). Only the first failure counts. It is safe for
// concurrent use once Run has been called.
func (g *Group) Fail(err error) {
	select {
	case g.failed <- err:
	default:
	}
}

// Run starts the components, waits and stops them; see Group.
func (g *Group) Run(ctx context.Context) error {
	log := g.Log
	if log == nil {
		log = slog.Default()
	}
	timeout := g.StopTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if g.failed == nil {
		g.failed = make(chan error, 1)
	}
	// Signals are taken over before the first component starts, so a
	// SIGTERM during start-up stops what has started (in reverse) instead
	// of killing the process: the rest is not started.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	started := 0
	var runErr error
	var stopped bool
	for _, p := range g.parts {
		select {
		case got := <-sig:
			log.Info("stopping during start-up", "signal", got.String(), "not_started", p.name)
			stopped = true
		default:
		}
		if stopped {
			break
		}
		if p.start != nil {
			if err := p.start(); err != nil {
				runErr = err
				break
			}
		}
		started++
	}
	if runErr == nil && !stopped {
		select {
		case got := <-sig:
			log.Info("stopping", "signal", got.String())
		case <-ctx.Done():
			log.Info("stopping", "reason", ctx.Err())
		case runErr = <-g.failed:
			log.Error("stopping", "err", runErr)
		}
	}
	signal.Stop(sig) // a second signal now has its default effect
	deadline := time.Now().Add(timeout)
	errs := []error{runErr}
	for i := started - 1; i >= 0; i-- {
		p := g.parts[i]
		if p.stop == nil {
			continue
		}
		if err := stopBy(p, deadline); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lateStopGrace is what a stop gets once the group's stop deadline has
// passed (an earlier stop used it up), to close its resources.
const lateStopGrace = time.Second

// stopBy runs p's stop with a context ending at deadline (in
// lateStopGrace when deadline has passed) and waits for it no longer.
func stopBy(p part, deadline time.Time) error {
	if now := time.Now(); !now.Before(deadline) {
		deadline = now.Add(lateStopGrace)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.stop(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("cannot stop %s: %w", p.name, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cannot stop %s in time: %w", p.name, ctx.Err())
	}
}

// Config is a service command's configuration that can add its
// components to a Group.
type Config interface {
	Configurable
	// Common returns the shared part of the configuration.
	Common() *Base
	// AddTo adds the service's components to g in start order; log is
	// the service's logger. It runs after Validate.
	AddTo(g *Group, log *slog.Logger) error
}

// Run is a service command: ParseCommand, then a logger at --log-level
// with a "service" attribute (also slog's default), the Go runtime's
// settings (sched.ApplyRuntime: this may re-execute the binary), tracing
// and pprof when configured, then svc's components, all run in one Group
// until SIGINT or SIGTERM. Its usage names the command "chf <service>".
func Run(service, about string, svc Config, args []string) error {
	return RunCommand("chf "+service, service, about, svc, args)
}

// RunCommand is Run for a binary of its own: command is the name its
// usage shows (e.g. "aslite").
func RunCommand(command, service, about string, svc Config, args []string) error {
	run, err := ParseCommand(command, about, svc, args)
	if !run {
		return err
	}
	b := svc.Common()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: b.LogLevel})).With("service", service)
	slog.SetDefault(log)
	sched.ApplyRuntime(b.Runtime, log)
	g := &Group{Log: log}
	if b.Tracing {
		var shutdown func(context.Context) error
		g.Add("tracing", func() error {
			tcfg := b.Telemetry
			tcfg.Service = service
			var err error
			if shutdown, err = telemetry.Setup(context.Background(), tcfg); err != nil {
				return err
			}
			if tcfg.OTLPEndpoint != "" {
				log.Info("tracing", "otlp_endpoint", tcfg.OTLPEndpoint, "ratio", tcfg.TraceRatio)
			}
			return nil
		}, func(ctx context.Context) error {
			if err := shutdown(ctx); err != nil {
				log.Warn("cannot flush traces", "err", err)
			}
			return nil
		})
	}
	if b.Pprof != "" {
		g.Add("pprof", func() error {
			_, _, err := StartPprof(b.Pprof, log)
			return err
		}, nil)
	}
	if b.Flight.Dir != "" {
		var fr *flight.Recorder
		g.Add("flight recorder", func() (err error) {
			fr, err = flight.Start(b.Flight, service, log)
			return err
		}, func(context.Context) error { fr.Stop(); return nil })
	} else {
		flight.IgnoreSignal(log)
	}
	if err := svc.AddTo(g, log); err != nil {
		return err
	}
	return g.Run(context.Background())
}
