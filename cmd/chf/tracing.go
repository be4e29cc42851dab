package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// checkTracing validates the tracing flags (--trace-ratio, --otlp-endpoint)
// without starting an exporter; --check-flags uses it.
func checkTracing(cfg *telemetry.Config) error {
	if cfg.TraceRatio < 0 || cfg.TraceRatio > 1 {
		return fmt.Errorf("cannot use --trace-ratio %g: %w", cfg.TraceRatio, telemetry.ErrBadRatio)
	}
	return nil
}

// startTracing enables OpenTelemetry tracing for service per cfg (nothing
// is exported without --otlp-endpoint) and returns the function that
// flushes and stops it.
func startTracing(cfg *telemetry.Config, service string, log *slog.Logger) (stop func(), err error) {
	cfg.Service = service
	shutdown, err := telemetry.Setup(context.Background(), *cfg)
	if err != nil {
		return func() {}, err
	}
	if cfg.OTLPEndpoint != "" {
		log.Info("tracing", "otlp_endpoint", cfg.OTLPEndpoint, "ratio", cfg.TraceRatio)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("cannot flush traces", "err", err)
		}
	}, nil
}
