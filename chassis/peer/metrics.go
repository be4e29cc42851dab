package peer

import (
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// instruments are the client's OpenTelemetry instruments, created once per
// process on the telemetry meter and exported on /metrics as
//
//	http_client_request_duration_seconds{peer_service,http_route,http_response_status_code}
//	http_client_active_requests{peer_service}
//	chf_client_retries_total{peer_service}
//	chf_client_ejections_total{peer_service}
//	chf_client_endpoints{peer_service,state}
//	chf_discovery_staleness_seconds{peer_service}
type instruments struct {
	clientDuration metric.Float64Histogram
	clientActive   metric.Int64ObservableUpDownCounter
	retries        metric.Int64Counter
	ejections      metric.Int64Counter
	endpoints      metric.Int64ObservableGauge
	staleness      metric.Float64ObservableGauge
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
		i.clientDuration, err = m.Float64Histogram("http.client.request.duration", metric.WithUnit("s"), bounds,
			metric.WithDescription("Calls to peer services (retries included), by peer, route and status code (0 = transport error), and their latency."))
		must(err)
		i.clientActive, err = m.Int64ObservableUpDownCounter("http.client.active_requests",
			metric.WithDescription("Calls in progress to a peer service."))
		must(err)
		i.retries, err = m.Int64Counter("chf.client.retries", metric.WithDescription("Calls retried on another endpoint."))
		must(err)
		i.ejections, err = m.Int64Counter("chf.client.ejections", metric.WithDescription("Endpoints ejected as outliers."))
		must(err)
		i.endpoints, err = m.Int64ObservableGauge("chf.client.endpoints",
			metric.WithDescription("Endpoints of a peer service by state (healthy, ejected)."))
		must(err)
		i.staleness, err = m.Float64ObservableGauge("chf.discovery.staleness", metric.WithUnit("s"),
			metric.WithDescription("How long the discovery source of a peer has been failing while the last known endpoint set stays in use (0 = fresh)."))
		must(err)
		inst = i
	})
	return inst
}
