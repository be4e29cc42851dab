package aslite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// scanFields are the scan-specific fields of a request.
type scanFields struct {
	pids       []byte // little-endian uint16 partition ids
	digests    []byte // 20-byte digests: resume each one's partition after it
	maxRecords uint64
}

// handleScan serves a scan (or a query without a secondary-index filter,
// which is the same thing): the records of the requested partitions, each
// partition in digest order, then a LAST header.
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
}

// partition sends the live records of partition pid in digest order,
// starting after `after` when it is not nil.
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
	slices.SortFunc(ds, func(a, b digest) int { return bytes.Compare(a[:], b[:]) })
	c := sc.st.c
	for i := range ds {
		if sc.left == 0 {
			break
		}
		sc.left--
		e := p.m[ds[i]]
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
		bins := p.bins(&e)
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
		}
		binary.BigEndian.PutUint16(c.out[at+20:], uint16(nops))
	}
	p.mu.RUnlock()
	if cap(ds) <= 1<<16 {
		sc.ws.digests = ds
	}
	return sc.st.maybeFlush()
}
