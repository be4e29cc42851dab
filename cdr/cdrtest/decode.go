// Package cdrtest decodes CHF-CDR files for tests: package
// cdr/collector's decoder (encoding/asn1, independent of the cdr
// package's encoder) under the names the tests use.
package cdrtest

import "github.com/chf-testbed/testbed/cdr/collector"

// Record is a decoded ChargingRecord.
type Record = collector.Record

// Container is one used-unit container.
type Container = collector.Container

// Decode decodes a concatenation of BER CHFRecords.
func Decode(b []byte) ([]Record, error) { return collector.Decode(b) }

// DecodeDir decodes every finished file under dir (collector.DecodeDir).
func DecodeDir(dir string) ([]Record, error) { return collector.DecodeDir(dir) }
