//go:build audit_misrate

package ocp

// This file is built only with -tags audit_misrate: an OCP that rates data
// one minor unit per MB too high, consistently (it reports what it
// charges), so that the load generator's audit can be shown to catch a
// CHF whose own figures agree with its debits. Never ship it.

import (
	"sync"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/tariff"
)

var (
	misrated   = map[*tariff.Rate]*tariff.Rate{}
	misratedMu sync.Mutex
)

// misrate returns a copy of a data rate priced one minor unit per MB
// higher.
func misrate(r *tariff.Rate) *tariff.Rate {
	if r == nil || r.ServiceOf() != chf.ServiceData {
		return r
	}
	misratedMu.Lock()
	defer misratedMu.Unlock()
	m, ok := misrated[r]
	if !ok {
		c := *r
		c.Price++
		m = &c
		misrated[r] = m
	}
	return m
}
