//go:build !unix

package aslite

func arenaAlloc(n int) []byte { return make([]byte, 0, n) }

func arenaFree(b []byte) {}
