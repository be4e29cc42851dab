//go:build unix

package aslite

import (
	"fmt"
	"syscall"
)

// Record bytes live in anonymous memory mappings outside the Go heap: the
// garbage collector neither scans them nor lets them count towards its
// heap goal (which would double the resident size of a large store), and
// a partition's old mapping goes back to the kernel the moment it grows or
// is compacted. Pages never written are not resident.

// arenaAlloc returns a zeroed, page-aligned slice of length 0 and capacity
// at least n.
func arenaAlloc(n int) []byte {
	const page = 4096
	n = (n + page - 1) &^ (page - 1)
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(fmt.Sprintf("aslite: cannot map %d bytes for records: %v", n, err))
	}
	return b[:0]
}

// arenaFree releases a slice returned by arenaAlloc; b must not be used
// afterwards.
func arenaFree(b []byte) {
	if cap(b) == 0 {
		return
	}
	if err := syscall.Munmap(b[:cap(b)]); err != nil {
		panic(fmt.Sprintf("BUG: aslite: cannot unmap record arena: %v", err))
	}
}
