package server

import (
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// instruments are the server's OpenTelemetry instruments, created once
// per process on the telemetry meter and exported on /metrics as
//
//	http_server_request_duration_seconds{component,http_route,http_response_status_code}
//	http_server_active_requests{component}
//
// (process_cpu_seconds_total and process_resident_memory_bytes come from
// chassis/telemetry, on the same registry).
type instruments struct {
	serverDuration metric.Float64Histogram
	serverActive   metric.Int64ObservableUpDownCounter
}

var (
	instOnce sync.Once
	inst     *instruments
)

func getInstruments() *instruments {
	instOnce.Do(func() {
		m := telemetry.Meter()
		must := func(err error) {
			if err != nil {
				panic(fmt.Sprintf("BUG: cannot create chassis instrument: %v", err))
			}
		}
		i := &instruments{}
		var err error
		bounds := metric.WithExplicitBucketBoundaries(telemetry.LatencyBuckets...)
		i.serverDuration, err = m.Float64Histogram("http.server.request.duration", metric.WithUnit("s"), bounds,
			metric.WithDescription("Requests served, by route and status code, and their latency."))
		must(err)
		i.serverActive, err = m.Int64ObservableUpDownCounter("http.server.active_requests",
			metric.WithDescription("Requests being served."))
		must(err)
		inst = i
	})
	return inst
}
