// Package fuzzcorpus writes seed corpus entries of Go fuzz tests: the
// files `go test` reads from testdata/fuzz/FuzzXxx and runs as
// regression tests. The corpus generators behind `go generate` use it.
package fuzzcorpus

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write writes data as the entry name of the fuzz test fuzz under dir
// (dir/fuzz/name), for a fuzz test whose only argument is a []byte.
func Write(dir, fuzz, name string, data []byte) error {
	d := filepath.Join(dir, fuzz)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("cannot create the corpus directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(d, name), Encode(data), 0o644); err != nil {
		return fmt.Errorf("cannot write the corpus entry: %w", err)
	}
	return nil
}

// Encode is the corpus file of one []byte argument.
func Encode(data []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data)
}
