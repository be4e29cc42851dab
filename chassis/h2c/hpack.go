package h2c

import (
	"errors"
	"strings"

	"golang.org/x/net/http2/hpack"
)

// hpackDecoder decodes HPACK header blocks (RFC 7541) as
// golang.org/x/net/http2/hpack.Decoder does (the same tables, limits and
// errors, checked by TestHpackDecoderMatchesXNet and
// FuzzHpackDecoderMatchesXNet), without allocating in the steady state: it
// emits each field with strings that point into its own buffers, valid
// only during the call (the emit functions copy what they keep), and it
// decodes a block once it is complete rather than field by field as its
// fragments arrive.
type hpackDecoder struct {
	emit func(hpack.HeaderField)
	// maxStr bounds a string's length, encoded and decoded (0: no bound);
	// maxBlock the fragments of one block held.
	maxStr, maxBlock int
	// ents is the dynamic table, oldest first; free holds evicted
	// entries whose buffers the next insertions reuse.
	ents, free []hpackEntry
	// size is the table's size in RFC 7541 terms (each entry its name's
	// and value's lengths plus 32); max its maximum, allowed the most a
	// size update may set.
	size, max, allowed uint32
	block              []byte // fragments of the block so far
	name, value        []byte // Huffman-decoded strings
}

type hpackEntry struct{ name, value []byte }

func (e *hpackEntry) size() uint32 { return uint32(len(e.name) + len(e.value) + 32) }

// Errors, as x/net's decoder words them.
var (
	errHpackTruncated = errors.New("hpack: truncated headers")
	errHpackEncoding  = errors.New("hpack: invalid encoding")
	errHpackIndex     = errors.New("hpack: invalid indexed representation index")
	errHpackSizeLate  = errors.New("hpack: dynamic table size update MUST occur at the beginning of a header block")
	errHpackSizeBig   = errors.New("hpack: dynamic table size update too large")
	errHpackVarint    = errors.New("hpack: varint integer overflow")
	errHpackBlock     = errors.New("hpack: header block too large")
)

// newHpackDecoder returns a decoder with a dynamic table of tableSize
// bytes (the SETTINGS_HEADER_TABLE_SIZE this side announced).
func newHpackDecoder(tableSize uint32, maxStr, maxBlock int, emit func(hpack.HeaderField)) *hpackDecoder {
	return &hpackDecoder{emit: emit, maxStr: maxStr, maxBlock: maxBlock, max: tableSize, allowed: tableSize}
}

// fragment takes the next fragment of a header block; at the block's end
// it decodes the block and emits its fields. On an error the connection
// is unusable (a COMPRESSION_ERROR).
func (d *hpackDecoder) fragment(frag []byte, end bool) error {
	if !end || len(d.block) > 0 {
		if len(d.block)+len(frag) > d.maxBlock {
			d.block = d.block[:0]
			return errHpackBlock
		}
		d.block = append(d.block, frag...)
		if !end {
			return nil
		}
		frag = d.block
	}
	err := d.decode(frag)
	if cap(d.block) > 64<<10 {
		d.block = nil
	}
	d.block = d.block[:0]
	return err
}

func (d *hpackDecoder) decode(p []byte) error {
	for first := true; len(p) > 0; first = false {
		var err error
		switch b := p[0]; {
		case b&0x80 != 0:
			p, err = d.indexed(p)
		case b&0xc0 == 0x40:
			p, err = d.literal(p, 6, true, false)
		case b&0xf0 == 0:
			p, err = d.literal(p, 4, false, false)
		case b&0xf0 == 0x10:
			p, err = d.literal(p, 4, false, true)
		case b&0xe0 == 0x20:
			if !first && d.size > 0 {
				return errHpackSizeLate
			}
			var n uint64
			if n, p, err = varint(5, p); err == nil {
				if n > uint64(d.allowed) {
					return errHpackSizeBig
				}
				d.max = uint32(n)
				d.evict()
			}
		default:
			return errHpackEncoding
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *hpackDecoder) indexed(p []byte) ([]byte, error) {
	i, p, err := varint(7, p)
	if err != nil {
		return p, err
	}
	name, value, ok := d.at(i)
	if !ok {
		return p, errHpackIndex
	}
	return p, d.call(name, value, false)
}

// literal decodes a literal field whose name index has an n-bit prefix.
func (d *hpackDecoder) literal(p []byte, n byte, index, sensitive bool) ([]byte, error) {
	i, p, err := varint(n, p)
	if err != nil {
		return p, err
	}
	var name string
	var rawName []byte
	var huffName bool
	if i > 0 {
		var ok bool
		if name, _, ok = d.at(i); !ok {
			return p, errHpackIndex
		}
	} else if rawName, huffName, p, err = d.str(p); err != nil {
		return p, err
	}
	rawValue, huffValue, p, err := d.str(p)
	if err != nil {
		return p, err
	}
	if i == 0 {
		if d.name, err = d.decodeStr(d.name[:0], rawName, huffName); err != nil {
			return p, err
		}
		name = bstr(d.name)
	}
	if d.value, err = d.decodeStr(d.value[:0], rawValue, huffValue); err != nil {
		return p, err
	}
	value := bstr(d.value)
	if index {
		d.add(name, value)
	}
	return p, d.call(name, value, sensitive)
}

func (d *hpackDecoder) call(name, value string, sensitive bool) error {
	if d.maxStr != 0 && (len(name) > d.maxStr || len(value) > d.maxStr) {
		return hpack.ErrStringLength
	}
	d.emit(hpack.HeaderField{Name: name, Value: value, Sensitive: sensitive})
	return nil
}

// str reads a string literal: its bytes as sent and whether they are
// Huffman-coded.
func (d *hpackDecoder) str(p []byte) ([]byte, bool, []byte, error) {
	if len(p) == 0 {
		return nil, false, p, errHpackTruncated
	}
	huff := p[0]&0x80 != 0
	n, p, err := varint(7, p)
	if err != nil {
		return nil, false, p, err
	}
	if d.maxStr != 0 && n > uint64(d.maxStr) {
		return nil, false, p, hpack.ErrStringLength
	}
	if uint64(len(p)) < n {
		return nil, false, p, errHpackTruncated
	}
	return p[:n], huff, p[n:], nil
}

func (d *hpackDecoder) decodeStr(dst, s []byte, huff bool) ([]byte, error) {
	if !huff {
		return append(dst, s...), nil
	}
	return huffmanDecode(dst, d.maxStr, s)
}

// at returns the name and value of table index i (1-based: the static
// table, then the dynamic table newest first).
func (d *hpackDecoder) at(i uint64) (string, string, bool) {
	switch {
	case i == 0:
		return "", "", false
	case i <= uint64(len(hpackStatic)):
		f := &hpackStatic[i-1]
		return f.Name, f.Value, true
	case i-uint64(len(hpackStatic)) > uint64(len(d.ents)):
		return "", "", false
	}
	e := &d.ents[len(d.ents)-int(i-uint64(len(hpackStatic)))]
	return bstr(e.name), bstr(e.value), true
}

func (d *hpackDecoder) add(name, value string) {
	var e hpackEntry
	if n := len(d.free); n > 0 {
		e, d.free = d.free[n-1], d.free[:n-1]
	}
	e.name = append(e.name[:0], name...)
	e.value = append(e.value[:0], value...)
	d.ents = append(d.ents, e)
	d.size += e.size()
	d.evict()
}

// evict drops the oldest entries until the table fits its maximum.
func (d *hpackDecoder) evict() {
	n := 0
	for d.size > d.max && n < len(d.ents) {
		d.size -= d.ents[n].size()
		n++
	}
	if n == 0 {
		return
	}
	d.free = append(d.free, d.ents[:n]...)
	k := copy(d.ents, d.ents[n:])
	clear(d.ents[k:])
	d.ents = d.ents[:k]
}

// varint reads an integer with an n-bit prefix (RFC 7541 5.1).
func varint(n byte, p []byte) (uint64, []byte, error) {
	if len(p) == 0 {
		return 0, p, errHpackTruncated
	}
	i := uint64(p[0]) & (1<<n - 1)
	if i < 1<<n-1 {
		return i, p[1:], nil
	}
	q := p[1:]
	var m uint64
	for len(q) > 0 {
		b := q[0]
		q = q[1:]
		i += uint64(b&127) << m
		if b&128 == 0 {
			return i, q, nil
		}
		if m += 7; m >= 63 {
			return 0, p, errHpackVarint
		}
	}
	return 0, p, errHpackTruncated
}

// appendHpackInt appends v as an integer with an n-bit prefix (RFC 7541
// 5.1), the first byte's other bits set to first: varint's inverse.
func appendHpackInt(b []byte, first byte, n uint, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	for v -= max; v >= 128; v >>= 7 {
		b = append(b, byte(v&0x7f)|0x80)
	}
	return append(b, byte(v))
}

// hpackStatic is RFC 7541's static table, read from x/net's decoder.
var hpackStatic = func() []hpack.HeaderField {
	var fs []hpack.HeaderField
	d := hpack.NewDecoder(4096, func(f hpack.HeaderField) { fs = append(fs, f) })
	for i := 1; i <= 61; i++ {
		if _, err := d.Write([]byte{0x80 | byte(i)}); err != nil {
			panic(err)
		}
	}
	return fs
}()

// staticNameIndex returns the first index of name in the static table
// for the names link.encodeLocked sends never-indexed, else 0. A switch
// rather than a map built from hpackStatic, which hashes the name on every
// field: the three names of a CGW answer took 39 ns through a map against
// 2 through this switch (a throwaway benchmark); TestStaticNameIndex
// checks it against hpackStatic.
func staticNameIndex(name string) uint64 {
	switch name {
	case ":authority":
		return 1
	case ":path":
		return 4
	case "authorization":
		return 23
	case "content-length":
		return 28
	case "content-type":
		return 31
	case "date":
		return 33
	case "location":
		return 46
	case "retry-after":
		return 53
	case "user-agent":
		return 58
	case "www-authenticate":
		return 61
	}
	return 0
}

// huffmanNode is a node of the Huffman decoding tree (RFC 7541
// Appendix B), read 8 bits at a time as x/net's decoder does; huffmanDecode
// walks it for codes longer than huffmanShortBits.
type huffmanNode struct {
	children *[256]*huffmanNode // nil for a leaf
	codeLen  uint8              // a leaf's bits in its last byte
	sym      byte
}

// huffmanShortBits is how many bits huffmanShort is indexed by: every
// code of a printable ASCII character but a few is this long or shorter.
const huffmanShortBits = 10

var (
	huffmanRoot *huffmanNode
	// huffmanShort maps the next huffmanShortBits bits to the symbol
	// whose code starts them (low byte) and the code's length (high byte;
	// 0 when the code is longer).
	huffmanShort [1 << huffmanShortBits]uint16
)

// The tables are built from x/net's encoder: eight copies of a byte take
// exactly its code length in bytes, the code's bits eight times over.
func init() {
	huffmanRoot = &huffmanNode{children: new([256]*huffmanNode)}
	leaves := new([256]huffmanNode)
	for sym := range 256 {
		enc := hpack.AppendHuffmanString(nil, strings.Repeat(string([]byte{byte(sym)}), 8))
		codeLen := uint8(len(enc))
		var code uint32
		for k := range uint(codeLen) {
			code = code<<1 | uint32(enc[k/8]>>(7-k%8)&1)
		}
		if codeLen <= huffmanShortBits {
			first := code << (huffmanShortBits - codeLen)
			for i := range uint32(1) << (huffmanShortBits - codeLen) {
				huffmanShort[first+i] = uint16(codeLen)<<8 | uint16(sym)
			}
		}
		cur := huffmanRoot
		for codeLen > 8 {
			codeLen -= 8
			i := uint8(code >> codeLen)
			if cur.children[i] == nil {
				cur.children[i] = &huffmanNode{children: new([256]*huffmanNode)}
			}
			cur = cur.children[i]
		}
		shift := 8 - codeLen
		start, n := int(uint8(code<<shift)), 1<<shift
		leaves[sym] = huffmanNode{sym: byte(sym), codeLen: codeLen}
		for i := start; i < start+n; i++ {
			cur.children[i] = &leaves[sym]
		}
	}
}

// huffmanDecode appends the decoding of Huffman-coded v to dst, refusing
// more than maxLen bytes (0: no bound), a code it does not know (EOS), and
// padding longer than 7 bits or not all ones.
func huffmanDecode(dst []byte, maxLen int, v []byte) ([]byte, error) {
	start := len(dst)
	// acc holds the next nbits bits of v, left-aligned, zeros after.
	var acc uint64
	var nbits uint
	i := 0
	for {
		for nbits <= 56 && i < len(v) {
			acc |= uint64(v[i]) << (56 - nbits)
			nbits += 8
			i++
		}
		if nbits == 0 {
			return dst, nil
		}
		e := huffmanShort[acc>>(64-huffmanShortBits)]
		sym, l := byte(e), uint(e>>8)
		if l == 0 || l > nbits {
			var ok bool
			if sym, l, ok = huffmanLong(acc, nbits); !ok {
				return dst, hpack.ErrInvalidHuffman
			}
			if l == 0 {
				// Not a whole code left (more input would have been read:
				// no code is longer than 30 bits): the rest is padding, a
				// prefix of EOS's all ones, shorter than a byte.
				if nbits > 7 || acc>>(64-nbits) != 1<<nbits-1 {
					return dst, hpack.ErrInvalidHuffman
				}
				return dst, nil
			}
		}
		if maxLen != 0 && len(dst)-start == maxLen {
			return dst, hpack.ErrStringLength
		}
		dst = append(dst, sym)
		acc <<= l
		nbits -= l
	}
}

// huffmanLong decodes the code at the top of acc, which holds nbits bits,
// through the tree: its symbol and length, length 0 when acc holds less
// than a whole code, false for bits that start no code.
func huffmanLong(acc uint64, nbits uint) (byte, uint, bool) {
	n := huffmanRoot
	for used := uint(0); used < nbits; used += 8 {
		n = n.children[byte(acc<<used>>56)]
		switch {
		case n == nil:
			return 0, 0, false
		case n.children == nil:
			if used+uint(n.codeLen) > nbits {
				return 0, 0, true
			}
			return n.sym, used + uint(n.codeLen), true
		}
	}
	return 0, 0, true
}
