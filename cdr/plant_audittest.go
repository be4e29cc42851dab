//go:build audit_cdrdrop

package cdr

// This file is built only with -tags audit_cdrdrop: a recorder that
// loses the first record with a charge, so that the load generator's
// CDR check can be shown to catch a missing CDR. Never ship it.

import "sync/atomic"

var dropped atomic.Bool

// planted reports whether rec is the record to drop.
func planted(rec *Record) bool {
	return rec.Charged != 0 && dropped.CompareAndSwap(false, true)
}
