// Package difftest holds the differential test of aslite against the real
// Aerospike CE server: the same sequence of client operations, the same
// answers required. It has no non-test code; see difftest_test.go and
// abm/aslite/README.md, "Differences from Aerospike CE 8.1".
package difftest
