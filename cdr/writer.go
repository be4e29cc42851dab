package cdr

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Fsync policies (--cdr-fsync).
const (
	// FsyncRotate syncs a file before it is closed and renamed to its
	// final name: every *.ber file is durable; a crash of the machine
	// can lose what the open file held.
	FsyncRotate = "rotate"
	// FsyncFlush also syncs after every flush of the buffer
	// (--cdr-flush-interval): a machine crash loses at most one interval.
	FsyncFlush = "flush"
	// FsyncNone never syncs: the kernel writes back when it likes.
	FsyncNone = "none"
)

// Suffixes of the files in the directory: a file being written ends in
// OpenSuffix and is renamed to Suffix once complete.
const (
	Suffix     = ".ber"
	OpenSuffix = ".ber.open"
)

// maxRecord is the size a record is expected to stay within (a record
// with --cdr-partial-containers containers of 64); a bigger one is still
// written, through a temporary buffer.
const maxRecord = 8 << 10

// ErrClosed is returned by Writer.Write after Close.
var ErrClosed = errors.New("cdr: writer closed")

// WriterConfig configures a Writer.
type WriterConfig struct {
	Dir     string        // directory of the files (created when missing)
	Prefix  string        // file name prefix (the node name)
	MaxSize int64         // rotate once a file holds this many bytes (> 0)
	MaxAge  time.Duration // rotate a non-empty file this long after it opened (> 0)
	Fsync   string        // FsyncRotate, FsyncFlush or FsyncNone
	Buffer  int           // write buffer size (default 64 KiB)
	Now     func() time.Time
	Logger  *slog.Logger
}

// Writer appends encoded CHFRecords to rotating files named
// PREFIX-YYYYMMDDThhmmss.nnnnnnnnnZ-SEQ.ber: each file is a plain
// concatenation of BER CHFRecords (no TS 32.297 file header). It is safe
// for concurrent use; records are written whole and in the order Write
// was called, each with the next LocalSequence.
type Writer struct {
	cfg WriterConfig

	mu      sync.Mutex
	f       *os.File
	bw      *bufio.Writer
	name    string // final name of the open file
	size    int64
	opened  time.Time
	fileSeq int
	next    uint64 // LocalSequence of the next record
	closed  bool
	err     error // first write error; the writer stops writing after it

	records, bytes, files uint64
}

// NewWriter creates the directory, finishes files a previous run left
// open (truncated to their last whole record and renamed) and returns a
// Writer. The first file is opened by the first Write.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 64 << 10
	}
	cfg.Buffer = max(cfg.Buffer, 2*maxRecord)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "chf"
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create CDR directory: %w", err)
	}
	if err := recoverOpen(cfg.Dir, cfg.Prefix, cfg.Logger); err != nil {
		return nil, err
	}
	return &Writer{cfg: cfg, next: 1}, nil
}

// recoverOpen renames the *.ber.open files of prefix left by a run that
// did not close, after truncating each to its last whole record.
func recoverOpen(dir, prefix string, log *slog.Logger) error {
	names, err := filepath.Glob(filepath.Join(dir, prefix+"-*"+OpenSuffix))
	if err != nil {
		return fmt.Errorf("cannot list CDR directory: %w", err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return fmt.Errorf("cannot read unfinished CDR file: %w", err)
		}
		whole := 0
		for whole < len(b) {
			l, ok := tlvLen(b[whole:])
			if !ok {
				break
			}
			whole += l
		}
		if whole < len(b) {
			if err := os.Truncate(n, int64(whole)); err != nil {
				return fmt.Errorf("cannot truncate unfinished CDR file: %w", err)
			}
		}
		final := strings.TrimSuffix(n, OpenSuffix) + Suffix
		if err := os.Rename(n, final); err != nil {
			return fmt.Errorf("cannot finish CDR file: %w", err)
		}
		log.Warn("finished a CDR file left open by an earlier run", "file", final, "bytes", whole, "dropped", len(b)-whole)
	}
	return nil
}

// tlvLen is the total length of the BER TLV at the start of b, false
// when b does not hold it whole.
func tlvLen(b []byte) (int, bool) {
	i := 1
	if len(b) < 2 {
		return 0, false
	}
	if b[0]&0x1f == 0x1f {
		for i < len(b) && b[i]&0x80 != 0 {
			i++
		}
		i++
	}
	if i >= len(b) {
		return 0, false
	}
	l := int(b[i])
	i++
	if l&0x80 != 0 {
		n := l & 0x7f
		if n == 0 || n > 4 || i+n > len(b) {
			return 0, false
		}
		l = 0
		for _, c := range b[i : i+n] {
			l = l<<8 | int(c)
		}
		i += n
	}
	if i+l > len(b) {
		return 0, false
	}
	return i + l, true
}

// Write assigns r.LocalSequence, encodes r and appends it to the open
// file (opening or rotating files as needed). r is not kept.
func (w *Writer) Write(r *Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	now := w.cfg.Now()
	if w.f != nil && (w.size >= w.cfg.MaxSize || now.Sub(w.opened) >= w.cfg.MaxAge) {
		if err := w.rotateLocked(); err != nil {
			return w.fail(err)
		}
	}
	if w.f == nil {
		if err := w.openLocked(now); err != nil {
			return w.fail(err)
		}
	}
	if w.bw.Available() < maxRecord {
		// Encode into the buffer itself: flush when a record may not fit.
		if err := w.bw.Flush(); err != nil {
			return w.fail(fmt.Errorf("cannot write CDR file: %w", err))
		}
	}
	r.LocalSequence = w.next
	buf := AppendCHFRecord(w.bw.AvailableBuffer(), r)
	if _, err := w.bw.Write(buf); err != nil {
		return w.fail(fmt.Errorf("cannot write CDR file: %w", err))
	}
	w.next++
	w.size += int64(len(buf))
	w.records++
	w.bytes += uint64(len(buf))
	return nil
}

func (w *Writer) fail(err error) error {
	w.err = err
	w.cfg.Logger.Error("CDR writer stopped", "err", err)
	return err
}

func (w *Writer) openLocked(now time.Time) error {
	w.fileSeq++
	base := fmt.Sprintf("%s-%s-%06d", w.cfg.Prefix, now.UTC().Format("20060102T150405.000000000Z"), w.fileSeq)
	w.name = filepath.Join(w.cfg.Dir, base+Suffix)
	f, err := os.OpenFile(filepath.Join(w.cfg.Dir, base+OpenSuffix), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("cannot create CDR file: %w", err)
	}
	w.f, w.size, w.opened = f, 0, now
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(f, w.cfg.Buffer)
	} else {
		w.bw.Reset(f)
	}
	w.files++
	return nil
}

// rotateLocked flushes, syncs (unless FsyncNone), closes and renames the
// open file.
func (w *Writer) rotateLocked() error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("cannot write CDR file: %w", err)
	}
	if w.cfg.Fsync != FsyncNone {
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("cannot sync CDR file: %w", err)
		}
	}
	open := w.f.Name()
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("cannot close CDR file: %w", err)
	}
	w.f = nil
	if err := os.Rename(open, w.name); err != nil {
		return fmt.Errorf("cannot finish CDR file: %w", err)
	}
	return nil
}

// Flush writes the buffer to the open file (syncing it under
// FsyncFlush) and rotates the file when it is older than MaxAge. The
// Recorder calls it every --cdr-flush-interval.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.err != nil || w.f == nil {
		return w.err
	}
	if w.cfg.Now().Sub(w.opened) >= w.cfg.MaxAge {
		if err := w.rotateLocked(); err != nil {
			return w.fail(err)
		}
		return nil
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(fmt.Errorf("cannot write CDR file: %w", err))
	}
	if w.cfg.Fsync == FsyncFlush {
		if err := w.f.Sync(); err != nil {
			return w.fail(fmt.Errorf("cannot sync CDR file: %w", err))
		}
	}
	return nil
}

// Close flushes, syncs and finishes the open file. Later Writes fail
// with ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.f == nil || w.err != nil {
		return w.err
	}
	return w.rotateLocked()
}

// WriterStats are a Writer's running totals.
type WriterStats struct {
	Records, Bytes, Files uint64
}

// Stats returns the totals so far.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriterStats{Records: w.records, Bytes: w.bytes, Files: w.files}
}
