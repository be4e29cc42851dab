// Package readfile reads a file named by a user (a flag, a config field)
// with a bound on its size and on the wait for its bytes, so that a path
// such as /dev/zero, a FIFO nobody writes or a multi-gigabyte file gives a
// clear error instead of a hang or a process that grows until it is
// killed (os.ReadFile reads until EOF, however long that takes).
package readfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// Wait is how long Read waits for the bytes of a file that is not a
// regular one (a pipe, a FIFO, a terminal, /dev/stdin).
var Wait = time.Minute

// MaxSecretBytes bounds a token or password file (the CGW's and loadgen's
// --operator-token-file).
const MaxSecretBytes = 64 << 10

// ErrTooLarge is wrapped by Read's error for a file larger than its limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the contents of the file at path, which may hold at most
// limit bytes. A regular file larger than limit fails before anything is
// read; anything else (a pipe, a device) fails once limit+1 bytes have
// arrived, or when no EOF came within Wait. Opening never blocks: a FIFO
// without a writer reads as empty.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a file", path)
	}
	if fi.Mode().IsRegular() {
		if fi.Size() > limit {
			return nil, fmt.Errorf("%s holds %d bytes, more than the %d allowed: %w", path, fi.Size(), limit, ErrTooLarge)
		}
	} else {
		// Pollable files (pipes, FIFOs, terminals) honour the deadline;
		// the others (e.g. /dev/zero) never block, and the limit stops them.
		_ = f.SetReadDeadline(time.Now().Add(Wait))
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, fmt.Errorf("%s: no end of file within %v (a pipe or device nobody finished writing?)", path, Wait)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s holds more than the %d bytes allowed: %w", path, limit, ErrTooLarge)
	}
	return b, nil
}
