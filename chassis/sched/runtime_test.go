package sched

import (
	"os"
	"path/filepath"
	"testing"
)

// cgroupMemoryLimit reads cgroup v2's memory.max, else v1's
// memory.limit_in_bytes; "max", v1's near-2^63 "none", garbage and a
// missing file mean no limit.
func TestCgroupMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		file, content string
		want          int64
	}{
		{"memory.max", "1073741824\n", 1 << 30},
		{"memory.max", "max\n", 0},
		{"memory/memory.limit_in_bytes", "536870912\n", 1 << 29},
		{"memory/memory.limit_in_bytes", "9223372036854771712\n", 0},
		{"memory.max", "lots\n", 0},
		{"", "", 0},
	} {
		root := t.TempDir()
		if c.file != "" {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, c.file)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, c.file), []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := cgroupMemoryLimit(root); got != c.want {
			t.Errorf("%s %q: %d, want %d", c.file, c.content, got, c.want)
		}
	}
}
