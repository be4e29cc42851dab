package tail

import (
	"strings"
	"sync"
	"testing"
)

// TestBufKeepsTheEnd: the last Size bytes are kept across writes of any
// size, from concurrent writers, and read back trimmed.
func TestBufKeepsTheEnd(t *testing.T) {
	var b Buf
	if _, err := b.Write([]byte("  first line\n")); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "first line" {
		t.Fatalf("String() = %q", got)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte(strings.Repeat("x", 97)))
			}
		}()
	}
	wg.Wait()
	n, _ := b.Write([]byte(strings.Repeat("y", 10) + "the end"))
	if n != 17 {
		t.Fatalf("Write returned %d, want 17", n)
	}
	got := b.String()
	if len(got) != Size || !strings.HasSuffix(got, "yyyyyyyyyythe end") || strings.Contains(got, "first") {
		t.Fatalf("kept %d bytes ending %q", len(got), got[max(0, len(got)-20):])
	}
}
