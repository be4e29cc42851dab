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
