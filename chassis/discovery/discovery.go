// Package discovery provides the address sources the chassis client balances
// over: a static list, DNS (headless services) and, in the kubernetes
// subpackage, EndpointSlices watched with client-go informers.
//
// A Source delivers the complete endpoint set of one peer service on every
// change. Consumers build an immutable snapshot from each delivery; sources
// never mutate a slice after handing it over.
package discovery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrNoAddresses is returned when a source is built without any address.
var ErrNoAddresses = errors.New("discovery: no addresses")

// Endpoint is one reachable instance of a peer service.
type Endpoint struct {
	// Addr is host:port (IPv6 hosts in brackets).
	Addr string
}

// Source produces the endpoint set of one peer service.
type Source interface {
	// Run delivers the complete endpoint set on every change until ctx ends.
	// The slice passed to update is owned by the callee and never modified
	// afterwards by the source. Run calls update from one goroutine at a
	// time. It returns nil when ctx ends, or an error if the source cannot
	// start at all; transient failures keep the last delivered set in use.
	Run(ctx context.Context, update func([]Endpoint)) error
}

// Static returns a Source that delivers addrs once and never changes.
// Duplicate addresses are removed.
func Static(addrs ...string) Source {
	return staticSource(Dedup(toEndpoints(addrs)))
}

type staticSource []Endpoint

func (s staticSource) Run(ctx context.Context, update func([]Endpoint)) error {
	update(slices.Clone([]Endpoint(s)))
	<-ctx.Done()
	return nil
}

func toEndpoints(addrs []string) []Endpoint {
	eps := make([]Endpoint, 0, len(addrs))
	for _, a := range addrs {
		if a != "" {
			eps = append(eps, Endpoint{Addr: a})
		}
	}
	return eps
}

// Dedup sorts eps by address and removes duplicates in place, returning the
// shortened slice. Sources use it so that equal sets compare equal.
func Dedup(eps []Endpoint) []Endpoint {
	slices.SortFunc(eps, func(a, b Endpoint) int {
		switch {
		case a.Addr < b.Addr:
			return -1
		case a.Addr > b.Addr:
			return 1
		}
		return 0
	})
	return slices.CompactFunc(eps, func(a, b Endpoint) bool { return a.Addr == b.Addr })
}

// Equal reports whether two deduplicated, sorted sets are the same.
func Equal(a, b []Endpoint) bool {
	return slices.Equal(a, b)
}

// Health describes the freshness of a source's endpoint set.
type Health struct {
	// LastSuccess is when the source last confirmed its set (zero before).
	LastSuccess time.Time
	// Failing is true while the source cannot refresh its set; the last
	// delivered set stays in use meanwhile.
	Failing bool
	// Err is the last error, if Failing.
	Err error
}

// HealthReporter is implemented by sources that can fail after start (DNS,
// Kubernetes); the chassis exports their staleness.
type HealthReporter interface {
	Health() Health
}

// HealthState is a concurrency-safe Health holder for sources to embed.
type HealthState struct {
	mu sync.Mutex
	h  Health
}

// Health returns the current health.
func (s *HealthState) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

// Report records the outcome of a refresh at now.
func (s *HealthState) Report(err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.h = Health{LastSuccess: now}
		return
	}
	s.h.Failing, s.h.Err = true, err
}
