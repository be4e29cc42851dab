package aslite

import (
	"encoding/binary"
	"errors"
)

// Protocol constants of the Aerospike wire protocol, as used by the official
// Go client v7.
const (
	protoVersion       = 2
	protoInfo          = 1
	protoAdmin         = 2
	protoMsg           = 3
	protoMsgCompressed = 4

	msgHeaderSize = 22

	info1Read           = 1 << 0
	info1GetAll         = 1 << 1
	info1Batch          = 1 << 3
	info1NoBinData      = 1 << 5
	info1CompressResult = 1 << 7

	info2Write         = 1 << 0
	info2Delete        = 1 << 1
	info2Generation    = 1 << 2
	info2GenerationGT  = 1 << 3
	info2CreateOnly    = 1 << 5
	info2RespondAllOps = 1 << 7

	info3Last            = 1 << 0
	info3UpdateOnly      = 1 << 3
	info3CreateOrReplace = 1 << 4
	info3ReplaceOnly     = 1 << 5

	fieldNamespace         = 0
	fieldSet               = 1
	fieldKey               = 2
	fieldDigest            = 4
	fieldTranID            = 7
	fieldScanOptions       = 8
	fieldSocketTimeout     = 9
	fieldRecordsPerSecond  = 10
	fieldPIDArray          = 11
	fieldDigestArray       = 12
	fieldMaxRecords        = 13
	fieldBatchIndex        = 41
	fieldBatchIndexWithSet = 42
	fieldFilterExp         = 43

	opRead      = 1
	opWrite     = 2
	opCDTRead   = 3
	opCDTModify = 4
	opIncr      = 5
	opExpRead   = 7
	opExpModify = 8
	opAppend    = 9
	opPrepend   = 10
	opTouch     = 11
	opBitRead   = 12
	opBitModify = 13
	opDelete    = 14
	opHLLRead   = 15
	opHLLModify = 16

	ptNull    = 0
	ptInteger = 1
	ptFloat   = 2
	ptString  = 3
	ptBlob    = 4
	ptBool    = 17
	ptHLL     = 18
	ptMap     = 19
	ptList    = 20
	ptGeoJSON = 23

	batchMsgRepeat = 0x1
	batchMsgInfo   = 0x2
	batchMsgGen    = 0x4
	batchMsgTTL    = 0x8

	ttlNamespaceDefault = 0
	ttlNeverExpire      = 0xFFFFFFFF
	ttlDontUpdate       = 0xFFFFFFFE

	maxBinName  = 15
	nPartitions = 4096

	// citrusleafEpoch is 2010-01-01T00:00:00Z in Unix seconds: record
	// expiry times on the wire count seconds from it.
	citrusleafEpoch = 1262304000
)

// Result codes the server answers with.
const (
	rcOK                 = 0
	rcServerError        = 1
	rcKeyNotFound        = 2
	rcGeneration         = 3
	rcParameter          = 4
	rcKeyExists          = 5
	rcBinType            = 12
	rcRecordTooBig       = 13
	rcUnsupported        = 16
	rcInvalidNamespace   = 20
	rcBinNameTooLong     = 21
	rcForbidden          = 22
	rcSecurityNotEnabled = 52
)

// ErrMalformed is returned by the decoders when a message does not parse;
// the connection that sent it is closed.
var ErrMalformed = errors.New("aslite: malformed message")

// wireOp is one operation of a request: it aliases the request buffer.
type wireOp struct {
	op    byte
	ptype byte
	name  []byte
	val   []byte
}

// msgHeader is the decoded 22-byte AS_MSG header.
type msgHeader struct {
	info1, info2, info3 byte
	gen                 uint32
	ttl                 uint32
	nFields, nOps       int
}

func parseMsgHeader(b []byte) (msgHeader, error) {
	if len(b) < msgHeaderSize || b[0] != msgHeaderSize {
		return msgHeader{}, ErrMalformed
	}
	return msgHeader{
		info1:   b[1],
		info2:   b[2],
		info3:   b[3],
		gen:     binary.BigEndian.Uint32(b[6:]),
		ttl:     binary.BigEndian.Uint32(b[10:]),
		nFields: int(binary.BigEndian.Uint16(b[18:])),
		nOps:    int(binary.BigEndian.Uint16(b[20:])),
	}, nil
}

// nextField decodes one field at the start of b: its type, data and the
// rest of b.
func nextField(b []byte) (typ byte, data, rest []byte, err error) {
	if len(b) < 5 {
		return 0, nil, nil, ErrMalformed
	}
	n := binary.BigEndian.Uint32(b)
	if n < 1 || uint64(n) > uint64(len(b)-4) {
		return 0, nil, nil, ErrMalformed
	}
	return b[4], b[5 : 4+n], b[4+n:], nil
}

// nextOp decodes one operation at the start of b.
func nextOp(b []byte) (op wireOp, rest []byte, err error) {
	if len(b) < 8 {
		return op, nil, ErrMalformed
	}
	n := binary.BigEndian.Uint32(b)
	if n < 4 || uint64(n) > uint64(len(b)-4) {
		return op, nil, ErrMalformed
	}
	nameLen := uint32(b[7])
	if nameLen > n-4 {
		return op, nil, ErrMalformed
	}
	op.op = b[4]
	op.ptype = b[5]
	op.name = b[8 : 8+nameLen]
	op.val = b[8+nameLen : 4+n]
	return op, b[4+n:], nil
}

// appendMsgHeader appends a 22-byte reply header.
func appendMsgHeader(dst []byte, info3, rc byte, gen, void, index uint32, nFields, nOps int) []byte {
	return append(dst, msgHeaderSize, 0, 0, info3, 0, rc,
		byte(gen>>24), byte(gen>>16), byte(gen>>8), byte(gen),
		byte(void>>24), byte(void>>16), byte(void>>8), byte(void),
		byte(index>>24), byte(index>>16), byte(index>>8), byte(index),
		byte(nFields>>8), byte(nFields), byte(nOps>>8), byte(nOps))
}

// appendOp appends a reply operation (a bin) in wire format.
func appendOp(dst []byte, ptype byte, name, val []byte) []byte {
	n := uint32(4 + len(name) + len(val))
	dst = append(dst, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), opRead, ptype, 0, byte(len(name)))
	dst = append(dst, name...)
	return append(dst, val...)
}

// appendField appends a field in wire format.
func appendField(dst []byte, typ byte, data []byte) []byte {
	n := uint32(len(data) + 1)
	dst = append(dst, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), typ)
	return append(dst, data...)
}

// beginProto reserves an 8-byte proto header at the end of dst and returns
// its offset; finishProto fills it in once the body is complete.
func beginProto(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0), len(dst)
}

func finishProto(dst []byte, at int, typ byte) {
	size := uint64(len(dst) - at - 8)
	binary.BigEndian.PutUint64(dst[at:], size|uint64(protoVersion)<<56|uint64(typ)<<48)
}

// validParticle reports whether a client may store a value of this
// particle type and size in a bin.
func validParticle(ptype byte, val []byte) bool {
	switch ptype {
	case ptInteger, ptFloat:
		return len(val) == 8
	case ptBool:
		return len(val) == 1
	case ptString, ptBlob, ptMap, ptList, ptGeoJSON:
		return true
	}
	return false
}
