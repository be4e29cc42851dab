package aslite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// request is one decoded single-record command (or one batch row). Its
// slices alias the request buffer.
type request struct {
	h           msgHeader
	ns          *namespace
	nsBad       bool
	set         []byte
	key         []byte // KEY field data: particle type + value
	d           digest
	hasDigest   bool
	unsupported bool // a field or op aslite does not implement
	ops         []wireOp
}

// wbin is a bin of the record being written; name and val alias the
// request, the partition arena or workspace.calc.
type wbin struct {
	name  []byte
	ptype byte
	val   []byte
}

// workspace holds a connection's scratch buffers, reused across requests.
type workspace struct {
	req      request
	row      request
	ops      []wireOp
	rowOps   []wireOp
	bins     []wbin
	calc     []byte
	rec      []byte
	inflated []byte
	digests  []digest
	filter   filter // a scan's compiled filter expression
	logSeq   uint64 // last journal record of this request (durable servers)
}

func (ws *workspace) release() {
	if cap(ws.rec) > maxRetained {
		ws.rec = nil
	}
	if cap(ws.calc) > maxRetained {
		ws.calc = nil
	}
	if cap(ws.inflated) > maxRetained {
		ws.inflated = nil
	}
	if cap(ws.digests) > 1<<16 {
		ws.digests = nil
	}
	ws.req = request{}
	ws.row = request{}
}

func (ws *workspace) find(name []byte) *wbin {
	for i := range ws.bins {
		if bytes.Equal(ws.bins[i].name, name) {
			return &ws.bins[i]
		}
	}
	return nil
}

func (ws *workspace) set(name []byte, ptype byte, val []byte) {
	if b := ws.find(name); b != nil {
		b.ptype, b.val = ptype, val
		return
	}
	ws.bins = append(ws.bins, wbin{name: name, ptype: ptype, val: val})
}

func (ws *workspace) del(name []byte) {
	for i := range ws.bins {
		if bytes.Equal(ws.bins[i].name, name) {
			ws.bins = append(ws.bins[:i], ws.bins[i+1:]...)
			return
		}
	}
}

// loadBins decodes stored bins (wire format) into ws.bins.
func (ws *workspace) loadBins(b []byte) {
	ws.bins = ws.bins[:0]
	for len(b) > 0 {
		op, rest, err := nextOp(b)
		if err != nil {
			panic("BUG: aslite: corrupt stored record")
		}
		ws.bins = append(ws.bins, wbin{name: op.name, ptype: op.ptype, val: op.val})
		b = rest
	}
}

// findBin finds a bin in stored bins (wire format).
func findBin(b, name []byte) (wireOp, bool) {
	for len(b) > 0 {
		op, rest, err := nextOp(b)
		if err != nil {
			panic("BUG: aslite: corrupt stored record")
		}
		if bytes.Equal(op.name, name) {
			return op, true
		}
		b = rest
	}
	return wireOp{}, false
}

// handleMsg decodes an AS_MSG request body and appends the reply to c.out.
// It returns an error (closing the connection) only for a malformed message.
func (s *Server) handleMsg(c *conn, body []byte) error {
	h, err := parseMsgHeader(body)
	if err != nil {
		return err
	}
	ws := &c.ws
	r := &ws.req
	*r = request{h: h}
	rest := body[msgHeaderSize:]
	var batchField []byte
	var batchType byte
	var scan scanFields
	for i := 0; i < h.nFields; i++ {
		var typ byte
		var data []byte
		if typ, data, rest, err = nextField(rest); err != nil {
			if r.unsupported || scan.filter != nil {
				// The client mis-sizes the batch field that follows a
				// filter expression; the frame is intact, so answer.
				var at int
				c.out, at = beginProto(c.out)
				c.out = appendMsgHeader(c.out, info3Last, rcUnsupported, 0, 0, 0, 0, 0)
				finishProto(c.out, at, protoMsg)
				return nil
			}
			return fmt.Errorf("cannot decode field %d: %w", i, err)
		}
		switch typ {
		case fieldNamespace:
			r.ns = s.byName[string(data)]
			r.nsBad = r.ns == nil
		case fieldSet:
			r.set = data
		case fieldKey:
			r.key = data
		case fieldDigest:
			if len(data) != len(r.d) {
				return fmt.Errorf("%w: digest of %d bytes", ErrMalformed, len(data))
			}
			copy(r.d[:], data)
			r.hasDigest = true
		case fieldBatchIndex, fieldBatchIndexWithSet:
			batchField, batchType = data, typ
		case fieldPIDArray:
			scan.pids = data
		case fieldDigestArray:
			scan.digests = data
		case fieldMaxRecords:
			if len(data) != 8 {
				return fmt.Errorf("%w: max-records field of %d bytes", ErrMalformed, len(data))
			}
			scan.maxRecords = binary.BigEndian.Uint64(data)
		case fieldRecordsPerSecond:
			if len(data) != 4 {
				return fmt.Errorf("%w: records-per-second field of %d bytes", ErrMalformed, len(data))
			}
			scan.rps = binary.BigEndian.Uint32(data)
		case fieldTranID, fieldSocketTimeout, fieldScanOptions:
			// Scan bookkeeping: nothing to do in memory.
		case fieldFilterExp:
			// Compiled by handleScan; refused by every other command.
			scan.filter = data
		default:
			// UDFs, secondary-index queries and anything newer:
			// answered UNSUPPORTED, never ignored.
			r.unsupported = true
		}
	}
	if scan.filter != nil && (batchField != nil || r.hasDigest) {
		r.unsupported = true
	}
	ws.ops = ws.ops[:0]
	for i := 0; i < h.nOps; i++ {
		var op wireOp
		if op, rest, err = nextOp(rest); err != nil {
			return fmt.Errorf("cannot decode op %d: %w", i, err)
		}
		ws.ops = append(ws.ops, op)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(rest))
	}
	r.ops = ws.ops
	switch {
	case batchField != nil:
		return s.handleBatch(c, r, batchType, batchField)
	case !r.hasDigest:
		return s.handleScan(c, r, &scan)
	}
	var at int
	c.out, at = beginProto(c.out)
	c.out = s.execute(ws, c.out, r, 0)
	finishProto(c.out, at, protoMsg)
	return nil
}

// execute runs one single-record command and appends its reply (header
// and bins; index goes in the batch-index slot).
func (s *Server) execute(ws *workspace, dst []byte, r *request, index uint32) []byte {
	switch {
	case r.nsBad || r.ns == nil:
		return appendMsgHeader(dst, 0, rcInvalidNamespace, 0, 0, index, 0, 0)
	case r.unsupported:
		return appendMsgHeader(dst, 0, rcUnsupported, 0, 0, index, 0, 0)
	case !r.hasDigest:
		return appendMsgHeader(dst, 0, rcParameter, 0, 0, index, 0, 0)
	}
	if r.h.info2&(info2Write|info2Delete) != 0 {
		return s.write(ws, dst, r, index)
	}
	return s.read(dst, r, index)
}

func isWriteOp(op byte) bool {
	switch op {
	case opWrite, opCDTModify, opIncr, opExpModify, opAppend, opPrepend, opTouch, opBitModify, opDelete, opHLLModify:
		return true
	}
	return false
}

func (s *Server) read(dst []byte, r *request, index uint32) []byte {
	h := &r.h
	getAll := h.info1&info1GetAll != 0 || len(r.ops) == 0
	noBins := h.info1&info1NoBinData != 0
	respondAll := h.info2&info2RespondAllOps != 0
	for i := range r.ops {
		op := &r.ops[i]
		switch {
		case op.op == opRead:
			if len(op.name) > 0 && h.info1&info1GetAll != 0 {
				return appendMsgHeader(dst, 0, rcParameter, 0, 0, index, 0, 0)
			}
		case isWriteOp(op.op):
			return appendMsgHeader(dst, 0, rcParameter, 0, 0, index, 0, 0)
		default:
			return appendMsgHeader(dst, 0, rcUnsupported, 0, 0, index, 0, 0)
		}
	}
	// A positive TTL on a read is a read-touch percentage: not implemented.
	if t := int32(h.ttl); t > 0 {
		return appendMsgHeader(dst, 0, rcUnsupported, 0, 0, index, 0, 0)
	}
	now := s.nowCL()
	p := &r.ns.parts[partitionOf(&r.d)]
	p.mu.RLock()
	e, ok := p.m[r.d]
	if !ok || expired(&e, now) {
		p.mu.RUnlock()
		return appendMsgHeader(dst, 0, rcKeyNotFound, 0, 0, index, 0, 0)
	}
	at := len(dst)
	dst = appendMsgHeader(dst, 0, rcOK, uint32(e.gen), e.void, index, 0, 0)
	nops := 0
	switch {
	case noBins:
	case getAll:
		dst = append(dst, p.bins(&e)...)
		nops = int(e.nbins)
	default:
		bins := p.bins(&e)
		for i := range r.ops {
			op := &r.ops[i]
			if len(op.name) == 0 {
				continue
			}
			if b, ok := findBin(bins, op.name); ok {
				dst = appendOp(dst, b.ptype, b.name, b.val)
				nops++
			} else if respondAll {
				dst = appendOp(dst, ptNull, op.name, nil)
				nops++
			}
		}
	}
	p.mu.RUnlock()
	binary.BigEndian.PutUint16(dst[at+20:], uint16(nops))
	return dst
}

// maxTTL is the largest TTL accepted (Aerospike's default max-ttl, 10 years).
const maxTTL = 10 * 365 * 24 * 3600

// validateWrite checks a write's ops before any lock is taken.
func validateWrite(r *request) byte {
	h := &r.h
	getAll := h.info1&info1GetAll != 0
	if getAll && h.info2&info2RespondAllOps != 0 {
		return rcParameter
	}
	for i := range r.ops {
		op := &r.ops[i]
		if len(op.name) > maxBinName {
			return rcBinNameTooLong
		}
		switch op.op {
		case opRead:
			if len(op.name) > 0 && getAll {
				return rcParameter
			}
		case opWrite:
			if len(op.name) == 0 || op.ptype != ptNull && !validParticle(op.ptype, op.val) {
				return rcParameter
			}
		case opIncr:
			if len(op.name) == 0 || (op.ptype != ptInteger && op.ptype != ptFloat) || len(op.val) != 8 {
				return rcParameter
			}
		case opAppend, opPrepend:
			if len(op.name) == 0 || (op.ptype != ptString && op.ptype != ptBlob) {
				return rcParameter
			}
		case opTouch, opDelete:
		case opCDTRead, opCDTModify, opExpRead, opExpModify, opBitRead, opBitModify, opHLLRead, opHLLModify:
			return rcUnsupported
		default:
			return rcParameter
		}
	}
	if h.ttl != ttlNeverExpire && h.ttl != ttlDontUpdate && h.ttl > maxTTL {
		return rcParameter
	}
	if len(r.key) > math.MaxUint16 {
		return rcParameter
	}
	return rcOK
}

func hasOp(r *request, op byte) bool {
	for i := range r.ops {
		if r.ops[i].op == op {
			return true
		}
	}
	return false
}

// setsTTL reports whether a write with ttl gives the record an expiry.
func (s *Server) setsTTL(ttl uint32) bool {
	switch ttl {
	case ttlNeverExpire, ttlDontUpdate:
		return false
	case ttlNamespaceDefault:
		return s.cfg.DefaultTTL > 0
	}
	return true
}

func (s *Server) voidTime(ttl, now uint32, old *entry) uint32 {
	switch ttl {
	case ttlNeverExpire:
		return 0
	case ttlDontUpdate:
		if old != nil {
			return old.void
		}
		ttl = 0
	}
	if ttl == ttlNamespaceDefault {
		if s.cfg.DefaultTTL <= 0 {
			return 0
		}
		ttl = uint32(s.cfg.DefaultTTL.Seconds())
		if ttl == 0 {
			ttl = 1
		}
	}
	return now + ttl
}

func (s *Server) write(ws *workspace, dst []byte, r *request, index uint32) []byte {
	if rc := validateWrite(r); rc != rcOK {
		return appendMsgHeader(dst, 0, rc, 0, 0, index, 0, 0)
	}
	setID, ok := r.ns.setID(r.set, true)
	if !ok {
		return appendMsgHeader(dst, 0, rcParameter, 0, 0, index, 0, 0)
	}
	t := s.now()
	now := uint32(max(t.Unix()-citrusleafEpoch, 1))
	p := &r.ns.parts[partitionOf(&r.d)]
	p.mu.Lock()
	dst = s.writeLocked(ws, dst, r, index, p, setID, now, t.UnixMilli())
	p.mu.Unlock()
	return dst
}

func (s *Server) writeLocked(ws *workspace, dst []byte, r *request, index uint32, p *partition, setID uint16, now uint32, nowMs int64) []byte {
	h := &r.h
	ns := r.ns
	old, exists := p.m[r.d]
	if exists && expired(&old, now) {
		p.remove(&r.d, &old)
		ns.deleted(&old)
		exists = false
	}
	var curGen uint32
	if exists {
		curGen = uint32(old.gen)
	}
	fail := func(rc byte) []byte { return appendMsgHeader(dst, 0, rc, 0, 0, index, 0, 0) }
	switch {
	// As Aerospike 8.1 (the differential test): the existence checks
	// come before the generation checks, and a delete of a missing record
	// is KEY_NOT_FOUND whatever generation it expects.
	case h.info2&info2CreateOnly != 0 && exists:
		return fail(rcKeyExists)
	case h.info3&(info3UpdateOnly|info3ReplaceOnly) != 0 && !exists:
		return fail(rcKeyNotFound)
	case h.info2&info2Delete != 0 && !exists:
		return fail(rcKeyNotFound)
	case h.info2&info2Generation != 0 && h.gen != curGen:
		return fail(rcGeneration)
	case h.info2&info2GenerationGT != 0 && h.gen <= curGen:
		return fail(rcGeneration)
	case s.cfg.ForbidTTL && h.info2&info2Delete == 0 && s.setsTTL(h.ttl) && (exists || !hasOp(r, opTouch)):
		// After the record's checks, as Aerospike: a touch of a missing
		// record is KEY_NOT_FOUND even with nsup-period 0.
		return fail(rcForbidden)
	}
	if h.info2&info2Delete != 0 {
		if !exists {
			return fail(rcKeyNotFound)
		}
		p.remove(&r.d, &old)
		ns.deleted(&old)
		if s.jr != nil {
			ws.logSeq = s.jr.del(ns, &r.d)
		}
		return appendMsgHeader(dst, 0, rcOK, 0, 0, index, 0, 0)
	}
	ws.bins = ws.bins[:0]
	ws.calc = ws.calc[:0]
	if exists && h.info3&(info3CreateOrReplace|info3ReplaceOnly) == 0 {
		ws.loadBins(p.bins(&old))
	}
	respondAll := h.info2&info2RespondAllOps != 0
	at := len(dst)
	dst = appendMsgHeader(dst, 0, rcOK, 0, 0, index, 0, 0)
	nops := 0
	for i := range r.ops {
		op := &r.ops[i]
		switch op.op {
		case opRead:
			if len(op.name) == 0 {
				continue
			}
			if b := ws.find(op.name); b != nil {
				dst = appendOp(dst, b.ptype, b.name, b.val)
				nops++
			} else if respondAll {
				dst = appendOp(dst, ptNull, op.name, nil)
				nops++
			}
			continue
		case opWrite:
			if op.ptype == ptNull {
				ws.del(op.name)
			} else {
				ws.set(op.name, op.ptype, op.val)
			}
		case opIncr:
			b := ws.find(op.name)
			switch {
			case b == nil:
				ws.set(op.name, op.ptype, op.val)
			case b.ptype != op.ptype:
				dst = dst[:at]
				return fail(rcBinType)
			case op.ptype == ptInteger:
				v := binary.BigEndian.Uint64(b.val) + binary.BigEndian.Uint64(op.val)
				start := len(ws.calc)
				ws.calc = binary.BigEndian.AppendUint64(ws.calc, v)
				b.val = ws.calc[start:]
			default:
				v := math.Float64frombits(binary.BigEndian.Uint64(b.val)) + math.Float64frombits(binary.BigEndian.Uint64(op.val))
				start := len(ws.calc)
				ws.calc = binary.BigEndian.AppendUint64(ws.calc, math.Float64bits(v))
				b.val = ws.calc[start:]
			}
		case opAppend, opPrepend:
			b := ws.find(op.name)
			switch {
			case b == nil:
				ws.set(op.name, op.ptype, op.val)
			case b.ptype != op.ptype:
				dst = dst[:at]
				return fail(rcBinType)
			default:
				start := len(ws.calc)
				if op.op == opAppend {
					ws.calc = append(append(ws.calc, b.val...), op.val...)
				} else {
					ws.calc = append(append(ws.calc, op.val...), b.val...)
				}
				b.val = ws.calc[start:]
			}
		case opTouch:
			if !exists {
				dst = dst[:at]
				return fail(rcKeyNotFound)
			}
		case opDelete:
			ws.bins = ws.bins[:0]
		}
		if respondAll {
			dst = appendOp(dst, ptNull, op.name, nil)
			nops++
		}
	}
	if len(ws.bins) == 0 {
		if !exists {
			dst = dst[:at]
			return fail(rcKeyNotFound)
		}
		p.remove(&r.d, &old)
		ns.deleted(&old)
		if s.jr != nil {
			ws.logSeq = s.jr.del(ns, &r.d)
		}
		binary.BigEndian.PutUint16(dst[at+20:], uint16(nops))
		return dst
	}
	// Lay out the record: [u16 key length, key] then the bins.
	rec := ws.rec[:0]
	key := r.key
	if exists && old.set&entryHasKey != 0 {
		key = p.storedKey(&old)
	}
	e := entry{set: setID, nbins: uint16(len(ws.bins))}
	if exists {
		e.set = old.set & setMask
	}
	if key != nil {
		e.set |= entryHasKey
		rec = binary.BigEndian.AppendUint16(rec, uint16(len(key)))
		rec = append(rec, key...)
	}
	for i := range ws.bins {
		b := &ws.bins[i]
		rec = appendOp(rec, b.ptype, b.name, b.val)
	}
	ws.rec = rec
	if len(rec) > s.cfg.MaxRecordSize || len(ws.bins) > math.MaxUint16 {
		dst = dst[:at]
		return fail(rcRecordTooBig)
	}
	e.gen = 1
	if exists {
		e.gen = old.gen + 1
		if e.gen == 0 {
			e.gen = 1
		}
	}
	var oldp *entry
	if exists {
		oldp = &old
	}
	e.void = s.voidTime(h.ttl, now, oldp)
	e.setLUT(nowMs)
	p.put(&r.d, e, rec, oldp)
	if !exists {
		ns.created(&e)
	}
	if s.jr != nil {
		ws.logSeq = s.jr.put(ns, &r.d, &e, rec)
	}
	binary.BigEndian.PutUint32(dst[at+6:], uint32(e.gen))
	binary.BigEndian.PutUint32(dst[at+10:], e.void)
	if h.info1&info1GetAll != 0 {
		dst = dst[:at+msgHeaderSize]
		stored := p.m[r.d]
		dst = append(dst, p.bins(&stored)...)
		nops = len(ws.bins)
	}
	binary.BigEndian.PutUint16(dst[at+20:], uint16(nops))
	return dst
}
