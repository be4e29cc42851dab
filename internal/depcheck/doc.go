// Package depcheck holds no code: its test asserts, with `go list`, which
// packages of the module must not depend on which (a CGW that does not
// link the Aerospike client, a load generator that does not link the
// services it measures, a store that stands alone). Add a fact to the
// table in depcheck_test.go when a dependency is cut, so it stays cut.
package depcheck
