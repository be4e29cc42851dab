//go:build perfgate_slowdown

// A deliberate slowdown for checking that the performance gate catches a
// regression (make perf-gate-selftest). Built only with
// `-tags perfgate_slowdown`; an ordinary build has none of this.
//
// The OCP process burns a fixed amount of CPU work in every request it
// serves: about $PERFGATE_SLOWDOWN (a Go duration, default 100µs)
// measured on this machine at start-up. It hooks in through the chassis's
// tracing entry point: a tracer provider whose Start does the work and
// returns a non-recording span, so nothing else changes (no span is
// recorded, no traceparent leaves). OCP's server spans are started for
// every request when a provider with root sampling is installed
// (chassis/context.go); its client spans towards the ABM are left alone,
// so the cost is paid once per OCP request.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// slowdownEnv names the environment variable holding the CPU time burnt
// per OCP request. It is not CHF_*: the local testbed does not pass those
// on to the services.
const slowdownEnv = "PERFGATE_SLOWDOWN"

func init() {
	if len(os.Args) < 2 || os.Args[1] != "ocp" {
		return
	}
	per := 100 * time.Microsecond
	if v := os.Getenv(slowdownEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "chf ocp: cannot parse %s=%q: want a duration such as 100us\n", slowdownEnv, v)
			os.Exit(2)
		}
		per = d
	}
	iters := int(float64(per) / float64(spinCost()))
	fmt.Fprintf(os.Stderr, "chf ocp: perfgate_slowdown build: %d spin iterations (~%s of CPU) per request\n", iters, per)
	telemetry.SetTracerProvider(slowProvider{iters: iters}, true)
}

// spinCost measures the time of one spin iteration: the fastest of a few
// timed rounds, so that a round preempted by other work does not count.
func spinCost() time.Duration {
	const n = 1 << 20
	best := time.Duration(1<<63 - 1)
	for range 7 {
		start := time.Now()
		spin(n)
		if d := time.Since(start); d < best {
			best = d
		}
	}
	return max(best/n, time.Nanosecond/8)
}

var spinSink uint64

// spin does n rounds of xorshift work the compiler cannot drop.
func spin(n int) {
	x := spinSink | 1
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	spinSink = x
}

type slowProvider struct {
	noop.TracerProvider
	iters int
}

func (p slowProvider) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return slowTracer{iters: p.iters}
}

type slowTracer struct {
	noop.Tracer
	iters int
}

// Start burns the CPU of one request for server spans and returns the
// parent's (non-recording) span, as the no-op tracer does.
func (t slowTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if cfg := trace.NewSpanStartConfig(opts...); cfg.SpanKind() == trace.SpanKindServer {
		spin(t.iters)
	}
	return t.Tracer.Start(ctx, name, opts...)
}
