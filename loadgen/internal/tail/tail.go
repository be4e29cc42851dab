// Package tail keeps the end of a child process's output for error
// messages.
package tail

import (
	"strings"
	"sync"
)

// Size is how many bytes a Buf keeps.
const Size = 2048

// Buf keeps the last Size bytes written to it. It is safe for concurrent
// use: exec.Cmd copies a child's output from a goroutine of its own while
// the caller may already read it.
type Buf struct {
	mu  sync.Mutex
	buf []byte
}

func (t *Buf) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > Size {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-Size:]...)
	}
	t.mu.Unlock()
	return len(p), nil
}

// String is what was kept, spaces trimmed.
func (t *Buf) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
