package readfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadRegular(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	want := []byte("hello, charging")
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Read(p, int64(len(want)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Read at the limit = %q, %v; want %q", got, err, want)
	}
	_, err = Read(p, int64(len(want))-1)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) {
		t.Fatalf("Read over the limit: %v; want ErrTooLarge naming %s", err, p)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := Read(t.TempDir(), 10); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory: %v", err)
	}
}

// TestReadEndlessDevice: /dev/zero never ends; the limit stops the read.
func TestReadEndlessDevice(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	_, err := Read("/dev/zero", 1<<20)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read(/dev/zero) = %v; want ErrTooLarge", err)
	}
}

// TestReadFIFO: a FIFO without a writer reads as empty at once; one whose
// writer never closes fails after Wait instead of hanging.
func TestReadFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan error, 1)
	go func() {
		b, err := Read(p, 100)
		if err == nil && len(b) != 0 {
			err = errors.New("read bytes from a FIFO nobody wrote")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read blocked on a FIFO without a writer")
	}

	w, err := os.OpenFile(p, os.O_RDWR, 0) // a writer that never closes
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte("part")); err != nil {
		t.Fatal(err)
	}
	old := Wait
	Wait = 200 * time.Millisecond
	defer func() { Wait = old }()
	start := time.Now()
	_, err = Read(p, 100)
	if err == nil || !strings.Contains(err.Error(), "no end of file") {
		t.Fatalf("Read of an unfinished FIFO = %v; want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timed out after %v, want about %v", d, Wait)
	}
}
