package aslite

import (
	"encoding/binary"
	"fmt"
)

// flushSize is the reply size above which a batch or scan reply is sent
// as one proto frame and a new frame started.
const flushSize = 128 << 10

// streamer sends a multi-frame reply (batch, scan) from c.out.
type streamer struct {
	c  *conn
	at int
}

func (st *streamer) begin() {
	st.c.out, st.at = beginProto(st.c.out[:0])
}

// maybeFlush sends the current frame when it is large and starts a new one.
func (st *streamer) maybeFlush() error {
	if len(st.c.out)-st.at < flushSize {
		return nil
	}
	return st.flush()
}

// flush sends the current frame, if it holds anything, and starts a new
// one.
func (st *streamer) flush() error {
	if len(st.c.out) == st.at+8 { // only the frame header
		return nil
	}
	finishProto(st.c.out, st.at, protoMsg)
	if err := st.c.write(); err != nil {
		return err
	}
	st.begin()
	return nil
}

// end appends the LAST header with rc; the caller's serveOne writes it.
func (st *streamer) end(rc byte) {
	st.c.out = appendMsgHeader(st.c.out, info3Last, rc, 0, 0, 0, 0, 0)
	finishProto(st.c.out, st.at, protoMsg)
}

// handleBatch serves BATCH_INDEX (41: reads, writes, deletes, any mix) and
// BATCH_INDEX_WITH_SET (42: reads): one reply per key, carrying its batch
// index, then a LAST header.
func (s *Server) handleBatch(c *conn, top *request, typ byte, data []byte) error {
	st := streamer{c: c}
	st.begin()
	if top.unsupported {
		st.end(rcUnsupported)
		return nil
	}
	if len(data) < 5 {
		return fmt.Errorf("%w: batch field of %d bytes", ErrMalformed, len(data))
	}
	n := binary.BigEndian.Uint32(data)
	rest := data[5:]
	// Every row takes at least 25 bytes: reject impossible counts before
	// looping.
	if uint64(n)*25 > uint64(len(rest)) {
		return fmt.Errorf("%w: batch of %d keys in %d bytes", ErrMalformed, n, len(rest))
	}
	ws := &c.ws
	row := &ws.row
	*row = request{}
	havePrev := false
	for i := uint32(0); i < n; i++ {
		if len(rest) < 25 {
			return fmt.Errorf("%w: batch row %d truncated", ErrMalformed, i)
		}
		index := binary.BigEndian.Uint32(rest)
		copy(row.d[:], rest[4:24])
		row.hasDigest = true
		flags := rest[24]
		rest = rest[25:]
		if flags&batchMsgRepeat != 0 {
			if !havePrev {
				return fmt.Errorf("%w: batch row %d repeats nothing", ErrMalformed, i)
			}
			row.key = nil
		} else {
			var err error
			if rest, err = s.parseBatchRow(ws, row, typ, flags, rest); err != nil {
				return fmt.Errorf("cannot decode batch row %d: %w", i, err)
			}
			havePrev = true
		}
		c.out = s.execute(ws, c.out, row, index)
		if err := st.maybeFlush(); err != nil {
			return err
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d trailing bytes in batch", ErrMalformed, len(rest))
	}
	st.end(rcOK)
	return nil
}

// parseBatchRow decodes the attributes, fields and ops of a full batch row.
func (s *Server) parseBatchRow(ws *workspace, row *request, typ, flags byte, b []byte) ([]byte, error) {
	*row = request{d: row.d, hasDigest: true}
	need := 1
	if flags&batchMsgInfo != 0 {
		need = 3
	}
	if typ == fieldBatchIndexWithSet && flags != 0 {
		return nil, ErrMalformed
	}
	if len(b) < need {
		return nil, ErrMalformed
	}
	row.h.info1 = b[0]
	if need == 3 {
		row.h.info2, row.h.info3 = b[1], b[2]
	}
	b = b[need:]
	if flags&batchMsgGen != 0 {
		if len(b) < 2 {
			return nil, ErrMalformed
		}
		row.h.gen = uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if flags&batchMsgTTL != 0 {
		if len(b) < 4 {
			return nil, ErrMalformed
		}
		row.h.ttl = binary.BigEndian.Uint32(b)
		b = b[4:]
	}
	if len(b) < 4 {
		return nil, ErrMalformed
	}
	nFields := int(binary.BigEndian.Uint16(b))
	nOps := int(binary.BigEndian.Uint16(b[2:]))
	b = b[4:]
	for i := 0; i < nFields; i++ {
		ftyp, data, rest, err := nextField(b)
		if err != nil {
			return nil, err
		}
		b = rest
		switch ftyp {
		case fieldNamespace:
			row.ns = s.byName[string(data)]
			row.nsBad = row.ns == nil
		case fieldSet:
			row.set = data
		case fieldKey:
			row.key = data
		default:
			row.unsupported = true
		}
	}
	ws.rowOps = ws.rowOps[:0]
	for i := 0; i < nOps; i++ {
		op, rest, err := nextOp(b)
		if err != nil {
			return nil, err
		}
		b = rest
		ws.rowOps = append(ws.rowOps, op)
	}
	row.ops = ws.rowOps
	if row.ns == nil && !row.nsBad {
		row.nsBad = true
	}
	return b, nil
}
