package aslite

// Durability (Config.DataDir): an append-only log of every change and
// snapshots that compact it, the way Aerospike's storage engine keeps a
// namespace on a device.
//
// Data flow: a write changes its partition under the partition's lock and,
// still under it, appends a full-state record (the record's bins, generation,
// void and last-update time, or a delete) to the journal's memory buffer;
// the order of one record's changes in the log is therefore the order in
// which they happened. One flusher goroutine writes the buffer to the
// current log file and fsyncs it: with CommitSync at once and every writer
// waits, before its reply leaves, until the log is synced past its change
// (group commit: one fsync covers every write that arrived meanwhile);
// with CommitInterval every CommitInterval, and replies do not wait (a
// crash loses at most the last interval).
//
// When the log outgrows SnapshotBytes, the journal starts a new log
// (generation g+1) and a background goroutine writes snapshot g+1: every
// live record, partition by partition. A change made while the snapshot is
// written is in log g+1 too, and replaying full-state records over the
// snapshot is idempotent, so snapshot g+1 + log g+1 (+ later logs) is the
// state. Once snapshot g+1 is renamed into place and synced, older
// snapshots and logs are removed.
//
// Recovery (New): the newest snapshot with a valid trailer is loaded, then
// every log from its generation on is replayed in order. A log is read up to
// its first torn or corrupted record (length or CRC-32C mismatch): what is
// intact is recovered, what follows is dropped and logged, and the server
// starts; new changes go to a fresh log.
//
// File formats (all integers big-endian):
//
//	log-<gen>.wal        records
//	snapshot-<gen>.snap  "ASLSNAP1" records, then an end record (op 4, count)
//	record               u32 payload length, u32 CRC-32C of payload, payload
//	payload              u8 op, then
//	  1 put       u8 len, namespace, u8 len, set, digest[20], u16 gen,
//	              u32 void, i64 lut (Unix ms), u16 nbins, u8 has-key,
//	              u32 len, record bytes
//	  2 delete    u8 len, namespace, digest[20]
//	  3 truncate  u8 len, namespace, u8 len, set, u8 all, i64 cutoff (Unix ms)
//	  4 end       u64 records in the snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Commit is when a durable write is acknowledged.
type Commit string

// Commit policies.
const (
	// CommitSync acknowledges a write once the log holding it is fsynced.
	CommitSync Commit = "sync"
	// CommitInterval fsyncs the log every CommitInterval and acknowledges
	// writes at once.
	CommitInterval Commit = "interval"
)

// ParseCommit parses a --commit value.
func ParseCommit(s string) (Commit, error) {
	switch c := Commit(s); c {
	case CommitSync, CommitInterval:
		return c, nil
	}
	return "", fmt.Errorf("%w: commit %q: want sync or interval", ErrConfig, s)
}

// ErrJournal is returned (and closes the connection, so the client never
// takes the write as acknowledged) when the log cannot be written.
var ErrJournal = errors.New("aslite: cannot write the journal")

const (
	jPut      = 1
	jDelete   = 2
	jTruncate = 3
	jEnd      = 4

	snapMagic    = "ASLSNAP1"
	maxJRecord   = 64 << 20
	jHeaderBytes = 8
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// journal is the durable log of one server. append is safe for concurrent
// use; it is called with a partition lock held.
type journal struct {
	dir      string
	commit   Commit
	interval time.Duration
	snapAt   int64
	log      *slog.Logger
	srv      *Server

	mu    sync.Mutex
	buf   []byte // appended, not yet written
	spare []byte
	seq   uint64 // last record appended
	err   error  // sticky write error

	f       *os.File // current log (flusher only, and rotate under mu)
	gen     uint64
	size    int64 // bytes in the current log
	written uint64

	syncMu sync.Mutex
	cond   *sync.Cond
	synced uint64 // records durable
	closed bool

	compactAtStart bool // logs were replayed: snapshot them at once

	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	snapWG  sync.WaitGroup
	snapRun atomic.Bool

	// Counters for Stats.
	fsyncs    atomic.Uint64
	snapshots atomic.Uint64
}

// put appends a put of the record d now holds (the caller holds its
// partition's lock) and returns its sequence number.
func (j *journal) put(ns *namespace, d *digest, e *entry, rec []byte) uint64 {
	j.mu.Lock()
	j.buf = encodePut(j.buf, ns, d, e, rec)
	return j.addedLocked()
}

// del appends a delete of d.
func (j *journal) del(ns *namespace, d *digest) uint64 {
	j.mu.Lock()
	at := len(j.buf)
	j.buf = append(j.buf, 0, 0, 0, 0, 0, 0, 0, 0, jDelete)
	j.buf = appendStr(j.buf, ns.name)
	j.buf = append(j.buf, d[:]...)
	sealRecord(j.buf[at:])
	return j.addedLocked()
}

// truncate appends a truncation.
func (j *journal) truncate(ns *namespace, set string, all bool, cutoff int64) uint64 {
	j.mu.Lock()
	at := len(j.buf)
	j.buf = append(j.buf, 0, 0, 0, 0, 0, 0, 0, 0, jTruncate)
	j.buf = appendStr(j.buf, ns.name)
	j.buf = appendStr(j.buf, set)
	a := byte(0)
	if all {
		a = 1
	}
	j.buf = append(j.buf, a)
	j.buf = binary.BigEndian.AppendUint64(j.buf, uint64(cutoff))
	sealRecord(j.buf[at:])
	return j.addedLocked()
}

// addedLocked counts the record just appended, unlocks mu and wakes the
// flusher.
func (j *journal) addedLocked() uint64 {
	j.seq++
	seq := j.seq
	j.mu.Unlock()
	if j.commit == CommitSync {
		select {
		case j.kick <- struct{}{}:
		default:
		}
	}
	return seq
}

func appendStr(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

// wait blocks until record seq is durable (CommitSync) and reports a write
// failure; with CommitInterval it returns at once.
func (j *journal) wait(seq uint64) error {
	if j.commit != CommitSync {
		return j.failed()
	}
	j.syncMu.Lock()
	for j.synced < seq && !j.closed {
		j.cond.Wait()
	}
	ok := j.synced >= seq
	j.syncMu.Unlock()
	if err := j.failed(); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: server closing", ErrJournal)
	}
	return nil
}

func (j *journal) failed() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// run is the flusher goroutine.
func (j *journal) run() {
	defer close(j.done)
	var tick <-chan time.Time
	if j.commit == CommitInterval {
		t := time.NewTicker(j.interval)
		defer t.Stop()
		tick = t.C
	}
	if j.compactAtStart && j.snapRun.CompareAndSwap(false, true) {
		j.startSnapshot() // fold the recovered logs into one snapshot
	}
	for {
		select {
		case <-j.kick:
		case <-tick:
		case <-j.stop:
			j.flush()
			return
		}
		j.flush()
		if j.size >= j.snapAt && j.snapRun.CompareAndSwap(false, true) {
			j.startSnapshot()
		}
	}
}

// flush writes and fsyncs what was appended, then releases the writers
// waiting for it. Flusher goroutine only.
func (j *journal) flush() {
	j.mu.Lock()
	b, seq := j.buf, j.seq
	j.buf, j.spare = j.spare[:0], nil
	j.mu.Unlock()
	var err error
	if len(b) > 0 {
		err = j.writeAll(b)
	}
	j.mu.Lock()
	if cap(b) <= maxRetained {
		j.spare = b[:0]
	}
	if err != nil && j.err == nil {
		j.err = fmt.Errorf("%w: %v", ErrJournal, err)
		j.log.Error("aslite journal write failed; writes now fail", "err", err)
	}
	j.mu.Unlock()
	j.syncMu.Lock()
	if seq > j.synced {
		j.synced = seq
	}
	j.cond.Broadcast()
	j.syncMu.Unlock()
}

func (j *journal) writeAll(b []byte) error {
	if _, err := j.f.Write(b); err != nil {
		return err
	}
	j.size += int64(len(b))
	j.fsyncs.Add(1)
	return j.f.Sync()
}

// startSnapshot rotates to a new log and writes a snapshot of everything in
// the background. Called on the flusher goroutine (which owns j.f).
func (j *journal) startSnapshot() {
	gen := j.gen + 1
	f, err := createLog(j.dir, gen)
	if err != nil {
		j.log.Error("aslite cannot start a new log; snapshot skipped", "err", err)
		j.snapRun.Store(false)
		return
	}
	// Everything appended so far is in the old log (flush ran just
	// before); changes appended from now on go to the new one.
	j.mu.Lock()
	old := j.f
	j.flushLockedTo(old)
	j.f, j.gen, j.size = f, gen, 0
	j.mu.Unlock()
	old.Close()
	j.snapWG.Add(1)
	go func() {
		defer j.snapWG.Done()
		defer j.snapRun.Store(false)
		start := time.Now()
		n, err := j.srv.writeSnapshot(j.dir, gen)
		if err != nil {
			j.log.Error("aslite snapshot failed", "gen", gen, "err", err)
			return
		}
		j.snapshots.Add(1)
		removeOlder(j.dir, gen, j.log)
		j.log.Info("aslite snapshot written", "gen", gen, "records", n, "took", time.Since(start).Round(time.Millisecond))
	}()
}

// flushLockedTo writes what was appended to f before a rotation. mu held;
// nothing is synced-waiting on it yet that the next flush would not cover.
func (j *journal) flushLockedTo(f *os.File) {
	if len(j.buf) == 0 {
		return
	}
	if _, err := f.Write(j.buf); err == nil {
		err = f.Sync()
		if err != nil && j.err == nil {
			j.err = fmt.Errorf("%w: %v", ErrJournal, err)
		}
	} else if j.err == nil {
		j.err = fmt.Errorf("%w: %v", ErrJournal, err)
	}
	j.buf = j.buf[:0]
	j.syncMu.Lock()
	j.synced = j.seq
	j.cond.Broadcast()
	j.syncMu.Unlock()
}

// close flushes, waits for a running snapshot and closes the log.
func (j *journal) close() {
	close(j.stop)
	<-j.done
	j.snapWG.Wait()
	j.syncMu.Lock()
	j.closed = true
	j.cond.Broadcast()
	j.syncMu.Unlock()
	j.f.Close()
}

// crash stops the journal as a kill would: what was appended but not yet
// written is lost. Tests only.
func (j *journal) crash() {
	j.mu.Lock()
	j.buf = j.buf[:0]
	j.err = fmt.Errorf("%w: crashed", ErrJournal)
	j.mu.Unlock()
	j.close()
}

func logName(gen uint64) string  { return fmt.Sprintf("log-%016d.wal", gen) }
func snapName(gen uint64) string { return fmt.Sprintf("snapshot-%016d.snap", gen) }

func createLog(dir string, gen uint64) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, logName(gen)), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot create log: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open data dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync data dir: %w", err)
	}
	return nil
}

// dataFiles lists the generations of the logs and snapshots in dir.
func dataFiles(dir string) (logs, snaps []uint64, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read data dir: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		var list *[]uint64
		var num string
		switch {
		case strings.HasPrefix(name, "log-") && strings.HasSuffix(name, ".wal"):
			list, num = &logs, name[4:len(name)-4]
		case strings.HasPrefix(name, "snapshot-") && strings.HasSuffix(name, ".snap"):
			list, num = &snaps, name[9:len(name)-5]
		default:
			continue
		}
		if g, err := strconv.ParseUint(num, 10, 64); err == nil {
			*list = append(*list, g)
		}
	}
	sort.Slice(logs, func(a, b int) bool { return logs[a] < logs[b] })
	sort.Slice(snaps, func(a, b int) bool { return snaps[a] < snaps[b] })
	return logs, snaps, nil
}

// removeOlder deletes the snapshots and logs older than gen.
func removeOlder(dir string, gen uint64, log *slog.Logger) {
	logs, snaps, err := dataFiles(dir)
	if err != nil {
		log.Warn("aslite cannot list old data files", "err", err)
		return
	}
	for _, g := range logs {
		if g < gen {
			os.Remove(filepath.Join(dir, logName(g)))
		}
	}
	for _, g := range snaps {
		if g < gen {
			os.Remove(filepath.Join(dir, snapName(g)))
		}
	}
	syncDir(dir)
}

// writeSnapshot writes every live record to snapshot gen.
func (s *Server) writeSnapshot(dir string, gen uint64) (uint64, error) {
	tmp := filepath.Join(dir, snapName(gen)+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return 0, fmt.Errorf("cannot create snapshot: %w", err)
	}
	defer os.Remove(tmp)
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(snapMagic)
	var n uint64
	var rec []byte
	now := s.nowCL()
	for _, ns := range s.ns {
		for i := range ns.parts {
			p := &ns.parts[i]
			p.mu.RLock()
			for d, e := range p.m {
				if expired(&e, now) {
					continue
				}
				rec = encodePut(rec[:0], ns, &d, &e, p.bytes(&e))
				w.Write(rec)
				n++
			}
			p.mu.RUnlock()
		}
	}
	end := []byte{0, 0, 0, 0, 0, 0, 0, 0, jEnd}
	end = binary.BigEndian.AppendUint64(end, n)
	sealRecord(end)
	w.Write(end)
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, fmt.Errorf("cannot write snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, fmt.Errorf("cannot sync snapshot: %w", err)
	}
	f.Close()
	if err := os.Rename(tmp, filepath.Join(dir, snapName(gen))); err != nil {
		return 0, fmt.Errorf("cannot install snapshot: %w", err)
	}
	return n, syncDir(dir)
}

// encodePut appends a sealed put record.
func encodePut(b []byte, ns *namespace, d *digest, e *entry, rec []byte) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, jPut)
	b = appendStr(b, ns.name)
	b = appendStr(b, ns.setName(e.set))
	b = append(b, d[:]...)
	b = binary.BigEndian.AppendUint16(b, e.gen)
	b = binary.BigEndian.AppendUint32(b, e.void)
	b = binary.BigEndian.AppendUint64(b, uint64(e.lut()))
	b = binary.BigEndian.AppendUint16(b, e.nbins)
	hasKey := byte(0)
	if e.set&entryHasKey != 0 {
		hasKey = 1
	}
	b = append(b, hasKey)
	b = binary.BigEndian.AppendUint32(b, uint32(len(rec)))
	b = append(b, rec...)
	sealRecord(b[at:])
	return b
}

func sealRecord(r []byte) {
	payload := r[jHeaderBytes:]
	binary.BigEndian.PutUint32(r, uint32(len(payload)))
	binary.BigEndian.PutUint32(r[4:], crc32.Checksum(payload, crcTable))
}

// recovery counts what openJournal found.
type recovery struct {
	snapshot       uint64 // generation loaded, 0 = none
	records        uint64 // records applied (snapshot and logs)
	droppedBytes   int64  // bytes after a torn or corrupted record
	skipped        uint64 // records of namespaces not served, or expired
	logsReplayed   int
	corruptedFiles []string
}

// openJournal recovers the state in dir into s and starts a journal on a
// new log.
func (s *Server) openJournal() (*journal, error) {
	cfg := &s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create data dir: %w", err)
	}
	logs, snaps, err := dataFiles(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	var rc recovery
	from := uint64(0)
	for i := len(snaps) - 1; i >= 0; i-- {
		ok, err := s.loadSnapshot(filepath.Join(cfg.DataDir, snapName(snaps[i])), &rc)
		if err != nil {
			return nil, err
		}
		if ok {
			rc.snapshot, from = snaps[i], snaps[i]
			break
		}
		rc.corruptedFiles = append(rc.corruptedFiles, snapName(snaps[i]))
		s.log.Warn("aslite snapshot incomplete or corrupted; trying an older one", "file", snapName(snaps[i]))
		s.free() // what it applied
		rc.records = 0
	}
	gen := from
	for _, g := range logs {
		gen = max(gen, g)
		if g < from {
			continue
		}
		if err := s.replayLog(filepath.Join(cfg.DataDir, logName(g)), &rc); err != nil {
			return nil, err
		}
		rc.logsReplayed++
	}
	if len(snaps) > 0 {
		gen = max(gen, snaps[len(snaps)-1])
	}
	gen++
	f, err := createLog(cfg.DataDir, gen)
	if err != nil {
		return nil, err
	}
	j := &journal{
		dir: cfg.DataDir, commit: cfg.Commit, interval: cfg.CommitInterval, snapAt: cfg.SnapshotBytes,
		log: s.log, srv: s, f: f, gen: gen,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	j.cond = sync.NewCond(&j.syncMu)
	j.compactAtStart = rc.logsReplayed > 0
	s.log.Info("aslite recovered", "dir", cfg.DataDir, "snapshot", rc.snapshot, "logs", rc.logsReplayed,
		"records", rc.records, "skipped", rc.skipped, "dropped_bytes", rc.droppedBytes, "commit", string(cfg.Commit))
	s.recovered = rc
	return j, nil
}

// free drops every record (a snapshot that turned out corrupted).
func (s *Server) free() {
	for _, ns := range s.ns {
		ns.free()
	}
}

// loadSnapshot applies snapshot file name; ok is false when it has no valid
// end record (its records are then partly applied: the caller frees them).
func (s *Server) loadSnapshot(name string, rc *recovery) (bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return false, fmt.Errorf("cannot open snapshot: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var magic [len(snapMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || string(magic[:]) != snapMagic {
		return false, nil
	}
	var n uint64
	var buf []byte
	for {
		payload, _, err := readRecord(r, &buf)
		if err != nil {
			return false, nil
		}
		if payload[0] == jEnd {
			return len(payload) == 9 && binary.BigEndian.Uint64(payload[1:]) == n, nil
		}
		if err := s.apply(payload, rc); err != nil {
			return false, nil
		}
		n++
	}
}

// replayLog applies the intact prefix of log file name.
func (s *Server) replayLog(name string, rc *recovery) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("cannot open log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cannot stat log: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var buf []byte
	var off int64
	for {
		payload, n, err := readRecord(r, &buf)
		if err == io.EOF {
			return nil
		}
		if err == nil {
			err = s.apply(payload, rc)
		}
		if err != nil {
			dropped := st.Size() - off
			rc.droppedBytes += dropped
			rc.corruptedFiles = append(rc.corruptedFiles, filepath.Base(name))
			s.log.Warn("aslite log has a torn or corrupted record; the rest of the file is dropped",
				"file", filepath.Base(name), "offset", off, "dropped_bytes", dropped, "err", err)
			return nil
		}
		off += int64(n)
	}
}

var errBadRecord = errors.New("bad record")

// readRecord reads one record; io.EOF only at a clean end.
func readRecord(r *bufio.Reader, buf *[]byte) ([]byte, int, error) {
	var h [jHeaderBytes]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		if n == 0 && err == io.EOF {
			return nil, 0, io.EOF
		}
		return nil, 0, fmt.Errorf("%w: torn header", errBadRecord)
	}
	size := binary.BigEndian.Uint32(h[:])
	if size == 0 || size > maxJRecord {
		return nil, 0, fmt.Errorf("%w: length %d", errBadRecord, size)
	}
	if cap(*buf) < int(size) {
		*buf = make([]byte, size)
	}
	b := (*buf)[:size]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, 0, fmt.Errorf("%w: torn payload", errBadRecord)
	}
	if crc32.Checksum(b, crcTable) != binary.BigEndian.Uint32(h[4:]) {
		return nil, 0, fmt.Errorf("%w: checksum", errBadRecord)
	}
	return b, jHeaderBytes + int(size), nil
}

// apply replays one put, delete or truncate.
func (s *Server) apply(p []byte, rc *recovery) error {
	r := jreader{b: p[1:]}
	op := p[0]
	nsName := r.str()
	ns := s.byName[nsName]
	switch op {
	case jPut:
		set := r.str()
		var d digest
		copy(d[:], r.n(20))
		gen, void, lut, nbins := r.u16(), r.u32(), int64(r.u64()), r.u16()
		hasKey := r.n(1)
		rec := r.n(int(r.u32()))
		if r.bad || len(r.b) != 0 {
			return fmt.Errorf("%w: put", errBadRecord)
		}
		if ns == nil || (void != 0 && s.nowCL() >= void) {
			rc.skipped++
			return nil
		}
		id, ok := ns.setID([]byte(set), true)
		if !ok {
			rc.skipped++
			return nil
		}
		e := entry{gen: gen, void: void, nbins: nbins, set: id}
		if hasKey[0] == 1 {
			e.set |= entryHasKey
		}
		e.setLUT(lut)
		part := &ns.parts[partitionOf(&d)]
		part.mu.Lock()
		old, exists := part.m[d]
		var oldp *entry
		if exists {
			oldp = &old
		}
		part.put(&d, e, rec, oldp)
		if !exists {
			ns.created(&e)
		}
		part.mu.Unlock()
	case jDelete:
		var d digest
		copy(d[:], r.n(20))
		if r.bad || len(r.b) != 0 {
			return fmt.Errorf("%w: delete", errBadRecord)
		}
		if ns == nil {
			rc.skipped++
			return nil
		}
		part := &ns.parts[partitionOf(&d)]
		part.mu.Lock()
		if old, ok := part.m[d]; ok {
			part.remove(&d, &old)
			ns.deleted(&old)
		}
		part.mu.Unlock()
	case jTruncate:
		set := r.str()
		all := r.n(1)
		cutoff := int64(r.u64())
		if r.bad || len(r.b) != 0 {
			return fmt.Errorf("%w: truncate", errBadRecord)
		}
		if ns == nil {
			rc.skipped++
			return nil
		}
		if all[0] == 1 {
			ns.truncate(0, true, cutoff)
		} else if id, ok := ns.setID([]byte(set), false); ok {
			ns.truncate(id, false, cutoff)
		}
	default:
		return fmt.Errorf("%w: op %d", errBadRecord, op)
	}
	rc.records++
	return nil
}

// jreader reads a payload; bad is set on a short read.
type jreader struct {
	b   []byte
	bad bool
}

func (r *jreader) n(k int) []byte {
	if k < 0 || len(r.b) < k {
		r.bad = true
		r.b = nil
		return make([]byte, max(k, 1))
	}
	v := r.b[:k]
	r.b = r.b[k:]
	return v
}
func (r *jreader) str() string { return string(r.n(int(r.n(1)[0]))) }
func (r *jreader) u16() uint16 { return binary.BigEndian.Uint16(r.n(2)) }
func (r *jreader) u32() uint32 { return binary.BigEndian.Uint32(r.n(4)) }
func (r *jreader) u64() uint64 { return binary.BigEndian.Uint64(r.n(8)) }

// crash stops the server as kill -9 would, as far as the data directory can
// tell: the journal loses what it had not written yet and takes no
// snapshot. Tests only.
func (s *Server) crash() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if s.jr != nil {
		s.jr.crash()
	}
	s.free()
}
