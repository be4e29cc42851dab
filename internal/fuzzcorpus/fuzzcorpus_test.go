package fuzzcorpus

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, "FuzzX", "seed-0", []byte("a\x00\"b")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "FuzzX", "seed-0"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "go test fuzz v1\n[]byte(\"a\\x00\\\"b\")\n"; string(b) != want {
		t.Fatalf("entry %q, want %q", b, want)
	}
}
