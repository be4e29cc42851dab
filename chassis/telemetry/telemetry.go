// Package telemetry holds the process-wide OpenTelemetry state of a service:
// a MeterProvider exported through the OTel Prometheus exporter (served on
// /metrics by server.Server), process CPU and memory instruments, and an
// optional TracerProvider with a parent-based ratio sampler exporting over
// OTLP/HTTP when an endpoint is configured.
//
// Tracing is off until Setup (or SetTracerProvider) enables it; while off,
// the chassis still passes incoming W3C traceparent headers on to the next
// hop, so a sampled trace started upstream is never broken.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the chassis' instruments.
const ScopeName = "github.com/chf-testbed/testbed/chassis"

// LatencyBuckets are the histogram bounds (seconds) of request latencies.
var LatencyBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

type metricsState struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	meter    metric.Meter
}

var (
	metricsOnce sync.Once
	metricsSt   *metricsState
	metricsErr  error
)

// Meter returns the process-wide meter of the chassis; its instruments are
// exported on the registry returned by Registry.
func Meter() metric.Meter {
	initMetrics()
	if metricsSt == nil {
		panic("BUG: telemetry: metrics init failed: " + metricsErr.Error())
	}
	return metricsSt.meter
}

// Registry returns the Prometheus registry /metrics serves.
func Registry() *prometheus.Registry {
	Meter()
	return metricsSt.registry
}

func initMetrics() {
	metricsOnce.Do(func() {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
		if err != nil {
			metricsErr = fmt.Errorf("cannot create Prometheus exporter: %w", err)
			return
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		st := &metricsState{registry: reg, provider: mp, meter: mp.Meter(ScopeName)}
		if err := registerProcess(st.meter); err != nil {
			metricsErr = err
			return
		}
		metricsSt = st
	})
}

// registerProcess adds process CPU seconds and resident memory.
func registerProcess(m metric.Meter) error {
	cpu, err := m.Float64ObservableCounter("process.cpu", metric.WithUnit("s"),
		metric.WithDescription("Total user and system CPU time spent by the process."))
	if err != nil {
		return fmt.Errorf("cannot create process.cpu: %w", err)
	}
	rss, err := m.Int64ObservableGauge("process.resident_memory", metric.WithUnit("By"),
		metric.WithDescription("Resident set size of the process."))
	if err != nil {
		return fmt.Errorf("cannot create process.resident_memory: %w", err)
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
			o.ObserveFloat64(cpu, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds())
		}
		if v := residentBytes(); v >= 0 {
			o.ObserveInt64(rss, v)
		}
		return nil
	}, cpu, rss)
	if err != nil {
		return fmt.Errorf("cannot register process callback: %w", err)
	}
	return nil
}

// residentBytes reads the resident set size from /proc/self/statm (-1 when
// unavailable).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	i := 0
	for i < len(b) && b[i] != ' ' {
		i++
	}
	i++
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if i >= len(b) || j == i {
		return -1
	}
	pages, err := strconv.ParseInt(string(b[i:j]), 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}

// Tracing is the active tracing state.
type Tracing struct {
	Tracer trace.Tracer
	// Root reports whether spans may be started without a sampled parent
	// (the sampler's ratio is above zero).
	Root bool
}

var tracing atomic.Pointer[Tracing]

// Active returns the tracing state, or nil when tracing is off.
func Active() *Tracing { return tracing.Load() }

// SetTracerProvider enables tracing with tp (nil disables it). root says
// whether tp's sampler can start traces without a sampled parent. Tests use
// it with an in-memory exporter.
func SetTracerProvider(tp trace.TracerProvider, root bool) {
	if tp == nil {
		tracing.Store(nil)
		return
	}
	tracing.Store(&Tracing{Tracer: tp.Tracer(ScopeName), Root: root})
}

// Config configures Setup.
type Config struct {
	// Service is the service.name resource attribute ("cgw", "ocp", "abm").
	Service string
	// TraceRatio is the share of new traces sampled at this service
	// (0 = none, the default for load runs: only requests arriving with a
	// sampled traceparent are traced).
	TraceRatio float64
	// OTLPEndpoint is the OTLP/HTTP collector endpoint (host:port or URL);
	// empty = spans are not exported and tracing stays off.
	OTLPEndpoint string
}

// ErrBadRatio is returned by Setup for a ratio outside [0, 1].
var ErrBadRatio = errors.New("telemetry: trace ratio must be within [0, 1]")

// Setup enables tracing per cfg and returns a function flushing and
// stopping the exporter. Without an OTLP endpoint it does nothing.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if cfg.TraceRatio < 0 || cfg.TraceRatio > 1 {
		return noop, fmt.Errorf("cannot set up tracing: %w (got %g)", ErrBadRatio, cfg.TraceRatio)
	}
	if cfg.OTLPEndpoint == "" {
		return noop, nil
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(cfg.OTLPEndpoint)}
	if !hasScheme(cfg.OTLPEndpoint) {
		opts = []otlptracehttp.Option{otlptracehttp.WithEndpoint(cfg.OTLPEndpoint), otlptracehttp.WithInsecure()}
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return noop, fmt.Errorf("cannot create OTLP trace exporter for %s: %w", cfg.OTLPEndpoint, err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", cfg.Service))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TraceRatio))),
	)
	SetTracerProvider(tp, cfg.TraceRatio > 0)
	return func(ctx context.Context) error {
		SetTracerProvider(nil, false)
		return tp.Shutdown(ctx)
	}, nil
}

func hasScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ':':
			return i+2 < len(s) && s[i+1] == '/' && s[i+2] == '/'
		case c == '/' || c == '.':
			return false
		}
	}
	return false
}
