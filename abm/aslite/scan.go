package aslite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"slices"
	"time"
)

// scanFields are the scan-specific fields of a request.
type scanFields struct {
	pids       []byte // little-endian uint16 partition ids
	digests    []byte // 20-byte digests: resume each one's partition after it
	maxRecords uint64
	rps        uint32 // records per second at most (the policy's RecordsPerSecond); 0 = no limit
	filter     []byte // filter expression (msgpack); nil = none
}

// scanPiece is how many records a scan sends under one hold of a
// partition's lock: between pieces it flushes what it has when pacing
// (records per second) calls for a pause, and yields the processor, so a
// scan of a large partition neither holds the lock nor keeps every other
// connection waiting for long. Unpaced and without the yield, a sweep's
// scan of 20 M records filled the sockets' buffers at the start of each
// command (tens of thousands of records, ~100 ms of CPU at GOMAXPROCS 1),
// and every request served meanwhile waited: a p99 spike of 35–66 ms
// every 3.9 s under the busy-hour scenario.
const scanPiece = 256

// handleScan serves a scan (or a query without a secondary-index filter,
// which is the same thing): the records of the requested partitions, each
// partition in digest order, then a LAST header. With a filter expression
// (filter.go) only the records for which it is true are sent; one outside
// the supported subset answers UNSUPPORTED.
func (s *Server) handleScan(c *conn, r *request, sf *scanFields) error {
	st := streamer{c: c}
	st.begin()
	h := &r.h
	switch {
	case r.nsBad || r.ns == nil:
		st.end(rcInvalidNamespace)
		return nil
	case r.unsupported || h.info2&(info2Write|info2Delete) != 0:
		st.end(rcUnsupported)
		return nil
	case h.info1&info1Read == 0:
		st.end(rcParameter)
		return nil
	}
	for i := range r.ops {
		if r.ops[i].op != opRead {
			st.end(rcUnsupported)
			return nil
		}
	}
	if len(sf.pids)%2 != 0 || len(sf.digests)%20 != 0 {
		return fmt.Errorf("%w: partition arrays of %d and %d bytes", ErrMalformed, len(sf.pids), len(sf.digests))
	}
	var f *filter
	if sf.filter != nil {
		f = &c.ws.filter
		defer f.reset() // it aliases the request
		if rc := compileFilterRC(sf.filter, f); rc != rcOK {
			st.end(rc)
			return nil
		}
	}
	ns := r.ns
	var setID uint16
	if len(r.set) > 0 {
		var ok bool
		if setID, ok = ns.setID(r.set, false); !ok {
			st.end(rcOK)
			return nil
		}
	}
	sc := scanner{
		s: s, ns: ns, r: r, st: &st, ws: &c.ws,
		allSets: len(r.set) == 0, setID: setID,
		now: s.nowCL(), left: sf.maxRecords,
		noBins: h.info1&info1NoBinData != 0,
		rps:    sf.rps, start: time.Now(),
		filter: f,
	}
	if sc.left == 0 {
		sc.left = ^uint64(0)
	}
	if len(sf.pids) == 0 && len(sf.digests) == 0 {
		for pid := 0; pid < nPartitions && sc.left > 0; pid++ {
			if err := sc.partition(pid, nil); err != nil {
				return err
			}
		}
	}
	for b := sf.pids; len(b) > 0 && sc.left > 0; b = b[2:] {
		pid := int(binary.LittleEndian.Uint16(b))
		if pid >= nPartitions {
			return fmt.Errorf("%w: partition id %d", ErrMalformed, pid)
		}
		if err := sc.partition(pid, nil); err != nil {
			return err
		}
	}
	for b := sf.digests; len(b) > 0 && sc.left > 0; b = b[20:] {
		var d digest
		copy(d[:], b)
		if err := sc.partition(partitionOf(&d), &d); err != nil {
			return err
		}
	}
	st.end(rcOK)
	return nil
}

type scanner struct {
	s       *Server
	ns      *namespace
	r       *request
	st      *streamer
	ws      *workspace
	allSets bool
	setID   uint16
	now     uint32
	left    uint64
	noBins  bool
	rps     uint32    // records per second at most; 0 = no limit
	start   time.Time // of the scan, for rps
	sent    uint64    // records sent so far, for rps
	filter  *filter   // records sent must match it; nil = all
}

// partition sends the live records of partition pid in digest order,
// starting after `after` when it is not nil. The digests are collected
// under the partition's lock and sorted outside it; the records are then
// sent scanPiece at a time, each piece under the lock, skipping those
// deleted or expired meanwhile (a scan is not a snapshot, as in
// Aerospike).
func (sc *scanner) partition(pid int, after *digest) error {
	p := &sc.ns.parts[pid]
	p.mu.RLock()
	ds := sc.ws.digests[:0]
	for d, e := range p.m {
		if (sc.allSets || e.set&setMask == sc.setID) && !expired(&e, sc.now) &&
			(after == nil || bytes.Compare(d[:], after[:]) > 0) {
			ds = append(ds, d)
		}
	}
	p.mu.RUnlock()
	slices.SortFunc(ds, func(a, b digest) int { return bytes.Compare(a[:], b[:]) })
	for i := 0; i < len(ds) && sc.left > 0; i += scanPiece {
		if i > 0 {
			if err := sc.pause(); err != nil {
				return err
			}
		}
		p.mu.RLock()
		sc.piece(p, ds[i:min(i+scanPiece, len(ds))])
		p.mu.RUnlock()
	}
	if cap(ds) <= 1<<16 {
		sc.ws.digests = ds
	}
	if err := sc.st.maybeFlush(); err != nil {
		return err
	}
	return sc.pause()
}

// pause is what a scan does between two pieces: with a records-per-second
// limit, it sends what it has and sleeps until the records sent so far are
// due (or the server stops); without one, it lets other goroutines run.
func (sc *scanner) pause() error {
	var wait time.Duration
	if sc.rps > 0 {
		wait = time.Until(sc.start.Add(time.Duration(float64(sc.sent) / float64(sc.rps) * float64(time.Second))))
	}
	if wait <= 0 {
		runtime.Gosched()
		return nil
	}
	if err := sc.st.flush(); err != nil {
		return err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-sc.s.stop:
		return net.ErrClosed
	}
}

// piece appends the records of ds still live in p (and matching the
// scan's filter) to the reply. The caller holds p.mu for reading.
func (sc *scanner) piece(p *partition, ds []digest) {
	c := sc.st.c
	for i := range ds {
		if sc.left == 0 {
			return
		}
		e, ok := p.m[ds[i]]
		if !ok || expired(&e, sc.now) {
			continue
		}
		bins := p.bins(&e)
		if sc.filter != nil && !sc.filter.match(bins) {
			// Filtered out: not sent, so counted neither against
			// MaxRecords nor against RecordsPerSecond.
			continue
		}
		sc.left--
		sc.sent++
		key := p.storedKey(&e)
		nf := 3
		if key != nil {
			nf++
		}
		setName := sc.ns.setName(e.set)
		if setName == "" {
			nf--
		}
		at := len(c.out)
		c.out = appendMsgHeader(c.out, 0, rcOK, uint32(e.gen), e.void, 0, nf, 0)
		c.out = appendField(c.out, fieldNamespace, []byte(sc.ns.name))
		if setName != "" {
			c.out = appendField(c.out, fieldSet, []byte(setName))
		}
		c.out = appendField(c.out, fieldDigest, ds[i][:])
		if key != nil {
			c.out = appendField(c.out, fieldKey, key)
		}
		nops := 0
		switch {
		case sc.noBins:
		case len(sc.r.ops) == 0:
			c.out = append(c.out, bins...)
			nops = int(e.nbins)
		default:
			for j := range sc.r.ops {
				if b, ok := findBin(bins, sc.r.ops[j].name); ok {
					c.out = appendOp(c.out, b.ptype, b.name, b.val)
					nops++
				}
			}
			if nops == 0 {
				// As Aerospike: a record holding none of the named bins
				// is not sent (nor counted).
				c.out = c.out[:at]
				sc.left++
				sc.sent--
				continue
			}
		}
		binary.BigEndian.PutUint16(c.out[at+20:], uint16(nops))
	}
}
