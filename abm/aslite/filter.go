package aslite

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Filter expressions on scans. A scan's filter (field 43, msgpack) is
// compiled once per command into a flat slice of nodes in prefix order;
// each record is then tested without allocating. Only a subset is
// accepted (see compileFilter); anything else answers UNSUPPORTED.

// Expression op codes on the wire (the client's expOp values).
const (
	expOpEQ      = 1
	expOpNE      = 2
	expOpGT      = 3
	expOpGE      = 4
	expOpLT      = 5
	expOpLE      = 6
	expOpAND     = 16
	expOpOR      = 17
	expOpNOT     = 18
	expOpBIN     = 81
	expOpBINTYPE = 82

	expTypeINT = 2 // the client's ExpTypeINT: the type a BIN reads as
)

// Bounds on a compiled filter: deeper, larger or more bin names than this
// is answered UNSUPPORTED.
const (
	maxExpDepth = 32  // nested arrays
	maxExpNodes = 256 // nodes (operators, operands) in all
	maxExpBins  = 16  // distinct bin names
)

// expKind is what a compiled node is.
type expKind uint8

const (
	eBool    expKind = iota // boolean literal: v is 0 or 1
	eInt                    // integer literal: v
	eBin                    // integer bin: its value, unknown if absent or not an integer
	eBinType                // bin's particle type, 0 when absent
	eCmp                    // comparison op of the operands at i+1 and i+2 (leaves)
	eAnd                    // operands from i+1 up to end, each a subtree
	eOr
	eNot // operand at i+1
)

// expNode is one compiled node; a subtree is nodes[i:end].
type expNode struct {
	v    int64
	end  uint16
	kind expKind
	op   uint8 // eCmp: expOpEQ..expOpLE
	slot uint8 // eBin, eBinType: index into filter.names
}

// Results of evaluating a boolean node: Aerospike's three-valued logic.
const (
	triFalse   = 0
	triTrue    = 1
	triUnknown = 2
)

// filter is a compiled scan filter and, while a record is tested, the
// values of the bins it reads. names alias the request buffer; it lives
// in the connection's workspace and is reused.
type filter struct {
	nodes  []expNode
	names  [maxExpBins][]byte
	nnames int
	// Per record: the particle type (0 = absent) and, for integers, the
	// value of each named bin.
	ptype [maxExpBins]byte
	ival  [maxExpBins]int64
}

// reset forgets a compiled filter (and the request it aliases).
func (f *filter) reset() {
	f.nodes = f.nodes[:0]
	clear(f.names[:])
	f.nnames = 0
}

// compileFilter compiles the msgpack filter expression b into f. It
// reports false for anything outside the supported subset, malformed or
// truncated msgpack, trailing bytes or an expression past the bounds:
//
//   - EQ, NE, GT, GE, LT, LE of two integer operands;
//   - AND, OR of two or more boolean operands, NOT of one;
//   - BIN of type INT ([81, 2, name]) and BIN_TYPE ([82, name]) with a
//     msgpack str name;
//   - integer literals (integer operands) and true/false (boolean ones).
//
// The whole expression must be boolean.
func compileFilter(b []byte, f *filter) bool { return compileFilterRC(b, f) == rcOK }

// compileFilterRC is compileFilter answering the result code of a scan
// with filter b: rcOK, rcParameter for an AND or OR of a single operand
// (which Aerospike 8.1 refuses as a parameter error, as the differential
// test found) and rcUnsupported for the rest it does not compile.
func compileFilterRC(b []byte, f *filter) byte {
	f.reset()
	c := expCompiler{f: f, b: b}
	typ, ok := c.node(0)
	if !ok || typ != eBool || c.pos != len(c.b) {
		f.reset()
		if c.param {
			return rcParameter
		}
		return rcUnsupported
	}
	return rcOK
}

type expCompiler struct {
	f     *filter
	b     []byte
	pos   int
	param bool // an AND or OR of one operand was seen
}

// node compiles one expression at c.pos and reports its type: eBool for
// a boolean, eInt for an integer.
func (c *expCompiler) node(depth int) (expKind, bool) {
	f := c.f
	if len(f.nodes) >= maxExpNodes || c.pos >= len(c.b) {
		return 0, false
	}
	at := len(f.nodes)
	f.nodes = append(f.nodes, expNode{})
	done := func(n expNode) {
		n.end = uint16(len(f.nodes))
		f.nodes[at] = n
	}
	switch t := c.b[c.pos]; {
	case t == 0xc2 || t == 0xc3:
		c.pos++
		done(expNode{kind: eBool, v: int64(t - 0xc2)})
		return eBool, true
	case t <= 0x7f || t >= 0xe0 || t >= 0xcc && t <= 0xd3:
		v, ok := c.int()
		if !ok {
			return 0, false
		}
		done(expNode{kind: eInt, v: v})
		return eInt, true
	}
	n, ok := c.arrayHeader()
	if !ok || n < 1 || depth >= maxExpDepth {
		return 0, false
	}
	op, ok := c.int()
	if !ok {
		return 0, false
	}
	switch op {
	case expOpEQ, expOpNE, expOpGT, expOpGE, expOpLT, expOpLE:
		if n != 3 {
			return 0, false
		}
		for range 2 {
			if typ, ok := c.node(depth + 1); !ok || typ != eInt {
				return 0, false
			}
		}
		done(expNode{kind: eCmp, op: uint8(op)})
		return eBool, true
	case expOpAND, expOpOR, expOpNOT:
		if n < 2 || op == expOpNOT && n != 2 || n-1 > maxExpNodes {
			return 0, false
		}
		if op != expOpNOT && n == 2 {
			c.param = true
			return 0, false
		}
		for range n - 1 {
			if typ, ok := c.node(depth + 1); !ok || typ != eBool {
				return 0, false
			}
		}
		kind := eAnd
		switch op {
		case expOpOR:
			kind = eOr
		case expOpNOT:
			kind = eNot
		}
		done(expNode{kind: kind})
		return eBool, true
	case expOpBIN:
		if n != 3 {
			return 0, false
		}
		if typ, ok := c.int(); !ok || typ != expTypeINT {
			return 0, false
		}
		slot, ok := c.binName()
		if !ok {
			return 0, false
		}
		done(expNode{kind: eBin, slot: slot})
		return eInt, true
	case expOpBINTYPE:
		if n != 2 {
			return 0, false
		}
		slot, ok := c.binName()
		if !ok {
			return 0, false
		}
		done(expNode{kind: eBinType, slot: slot})
		return eInt, true
	}
	return 0, false
}

// arrayHeader decodes a msgpack array header.
func (c *expCompiler) arrayHeader() (int, bool) {
	b := c.b[c.pos:]
	var n uint64
	switch t := b[0]; {
	case t >= 0x90 && t <= 0x9f:
		n, c.pos = uint64(t&0x0f), c.pos+1
	case t == 0xdc && len(b) >= 3:
		n, c.pos = uint64(binary.BigEndian.Uint16(b[1:])), c.pos+3
	case t == 0xdd && len(b) >= 5:
		n, c.pos = uint64(binary.BigEndian.Uint32(b[1:])), c.pos+5
	default:
		return 0, false
	}
	// Each element takes a byte at least.
	if n > uint64(len(c.b)-c.pos) {
		return 0, false
	}
	return int(n), true
}

// int decodes a msgpack integer that fits an int64.
func (c *expCompiler) int() (int64, bool) {
	if c.pos >= len(c.b) {
		return 0, false
	}
	b := c.b[c.pos:]
	t := b[0]
	switch {
	case t <= 0x7f:
		c.pos++
		return int64(t), true
	case t >= 0xe0:
		c.pos++
		return int64(int8(t)), true
	}
	size := 0
	switch t {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xce, 0xd2:
		size = 4
	case 0xcf, 0xd3:
		size = 8
	default:
		return 0, false
	}
	if len(b) < 1+size {
		return 0, false
	}
	c.pos += 1 + size
	b = b[1:]
	switch t {
	case 0xcc:
		return int64(b[0]), true
	case 0xcd:
		return int64(binary.BigEndian.Uint16(b)), true
	case 0xce:
		return int64(binary.BigEndian.Uint32(b)), true
	case 0xcf:
		u := binary.BigEndian.Uint64(b)
		return int64(u), u <= math.MaxInt64
	case 0xd0:
		return int64(int8(b[0])), true
	case 0xd1:
		return int64(int16(binary.BigEndian.Uint16(b))), true
	case 0xd2:
		return int64(int32(binary.BigEndian.Uint32(b))), true
	default: // 0xd3
		return int64(binary.BigEndian.Uint64(b)), true
	}
}

// binName decodes a msgpack str bin name and returns its slot in
// f.names, adding it when new.
func (c *expCompiler) binName() (uint8, bool) {
	if c.pos >= len(c.b) {
		return 0, false
	}
	b := c.b[c.pos:]
	var n, hdr int
	switch t := b[0]; {
	case t >= 0xa0 && t <= 0xbf:
		n, hdr = int(t&0x1f), 1
	case t == 0xd9 && len(b) >= 2:
		n, hdr = int(b[1]), 2
	case t == 0xda && len(b) >= 3:
		n, hdr = int(binary.BigEndian.Uint16(b[1:])), 3
	case t == 0xdb && len(b) >= 5:
		u := binary.BigEndian.Uint32(b[1:])
		if u > maxBinName {
			return 0, false
		}
		n, hdr = int(u), 5
	default:
		return 0, false
	}
	if n > maxBinName || len(b) < hdr+n {
		return 0, false
	}
	name := b[hdr : hdr+n]
	c.pos += hdr + n
	f := c.f
	for i := 0; i < f.nnames; i++ {
		if bytes.Equal(f.names[i], name) {
			return uint8(i), true
		}
	}
	if f.nnames == maxExpBins {
		return 0, false
	}
	f.names[f.nnames] = name
	f.nnames++
	return uint8(f.nnames - 1), true
}

// match reports whether a record whose bins (wire format, as stored) are
// bins passes the filter: only when the expression is true, not when it
// is false or unknown.
func (f *filter) match(bins []byte) bool {
	f.load(bins)
	return f.eval(0) == triTrue
}

// load finds the bins the filter reads in one pass over the record.
func (f *filter) load(b []byte) {
	clear(f.ptype[:f.nnames])
	left := f.nnames
	for len(b) > 0 && left > 0 {
		op, rest, err := nextOp(b)
		if err != nil {
			panic("BUG: aslite: corrupt stored record")
		}
		b = rest
		for i := 0; i < f.nnames; i++ {
			if f.ptype[i] == 0 && bytes.Equal(f.names[i], op.name) {
				f.ptype[i] = op.ptype
				if op.ptype == ptInteger && len(op.val) == 8 {
					f.ival[i] = int64(binary.BigEndian.Uint64(op.val))
				}
				left--
				break
			}
		}
	}
}

// intAt is the value of the integer leaf at i and whether it is known.
func (f *filter) intAt(i int) (int64, bool) {
	n := &f.nodes[i]
	switch n.kind {
	case eInt:
		return n.v, true
	case eBin:
		return f.ival[n.slot], f.ptype[n.slot] == ptInteger
	default: // eBinType
		return int64(f.ptype[n.slot]), true
	}
}

// eval evaluates the boolean subtree at i.
func (f *filter) eval(i int) uint8 {
	n := &f.nodes[i]
	switch n.kind {
	case eBool:
		return uint8(n.v)
	case eCmp:
		a, aok := f.intAt(i + 1)
		b, bok := f.intAt(i + 2)
		if !aok || !bok {
			return triUnknown
		}
		var r bool
		switch n.op {
		case expOpEQ:
			r = a == b
		case expOpNE:
			r = a != b
		case expOpGT:
			r = a > b
		case expOpGE:
			r = a >= b
		case expOpLT:
			r = a < b
		default: // expOpLE
			r = a <= b
		}
		if r {
			return triTrue
		}
		return triFalse
	case eAnd:
		res := uint8(triTrue)
		for j := i + 1; j < int(n.end); j = int(f.nodes[j].end) {
			switch f.eval(j) {
			case triFalse:
				return triFalse
			case triUnknown:
				res = triUnknown
			}
		}
		return res
	case eOr:
		res := uint8(triFalse)
		for j := i + 1; j < int(n.end); j = int(f.nodes[j].end) {
			switch f.eval(j) {
			case triTrue:
				return triTrue
			case triUnknown:
				res = triUnknown
			}
		}
		return res
	default: // eNot
		switch f.eval(i + 1) {
		case triTrue:
			return triFalse
		case triFalse:
			return triTrue
		}
		return triUnknown
	}
}
