package cdr

// BER (X.690) building blocks with an append API: every function appends
// to dst and returns the extended slice, so a caller that reuses dst
// encodes without allocating. Lengths are definite and minimal, integers
// minimal two's complement (what DER requires too), so strict decoders
// such as encoding/asn1 accept the output.

const (
	classContext = 0x80
	constructed  = 0x20
)

// appendTag appends the identifier octets of a tag of class cls (0x00
// universal, 0x80 context) with the constructed bit cons and number n.
func appendTag(dst []byte, cls, cons byte, n uint32) []byte {
	if n < 31 {
		return append(dst, cls|cons|byte(n))
	}
	dst = append(dst, cls|cons|0x1f)
	var tmp [5]byte
	i := len(tmp) - 1
	tmp[i] = byte(n & 0x7f)
	for n >>= 7; n > 0; n >>= 7 {
		i--
		tmp[i] = byte(n&0x7f) | 0x80
	}
	return append(dst, tmp[i:]...)
}

// lengthSize is the number of octets the length l takes.
func lengthSize(l int) int {
	if l < 0x80 {
		return 1
	}
	n := 1
	for ; l > 0; l >>= 8 {
		n++
	}
	return n
}

// putLength writes l's length octets into b (len(b) == lengthSize(l)).
func putLength(b []byte, l int) {
	if len(b) == 1 {
		b[0] = byte(l)
		return
	}
	b[0] = 0x80 | byte(len(b)-1)
	for i := len(b) - 1; i > 0; i-- {
		b[i] = byte(l)
		l >>= 8
	}
}

// begin appends a constructed tag and one placeholder length octet and
// returns the offset where the contents start; end fixes the length.
func begin(dst []byte, cls byte, n uint32) ([]byte, int) {
	dst = appendTag(dst, cls, constructed, n)
	dst = append(dst, 0)
	return dst, len(dst)
}

// end writes the length of the contents started at mark (by begin),
// moving them when the length needs more than one octet.
func end(dst []byte, mark int) []byte {
	l := len(dst) - mark
	ls := lengthSize(l)
	if ls > 1 {
		for range ls - 1 {
			dst = append(dst, 0)
		}
		copy(dst[mark+ls-1:], dst[mark:mark+l])
	}
	putLength(dst[mark-1:mark-1+ls], l)
	return dst
}

// appendInt appends a primitive INTEGER (or ENUMERATED, same contents)
// with the given tag.
func appendInt(dst []byte, cls byte, n uint32, v int64) []byte {
	dst = appendTag(dst, cls, 0, n)
	size := 1
	for w := v; w > 127 || w < -128; w >>= 8 {
		size++
	}
	dst = append(dst, byte(size))
	for i := size - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*uint(i))))
	}
	return dst
}

// appendUint is appendInt for unsigned values (a leading zero octet when
// the top bit is set).
func appendUint(dst []byte, cls byte, n uint32, v uint64) []byte {
	dst = appendTag(dst, cls, 0, n)
	size := 1
	for w := v; w > 127; w >>= 8 {
		size++
	}
	dst = append(dst, byte(size))
	for i := size - 1; i >= 0; i-- {
		if i >= 8 {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, byte(v>>(8*uint(i))))
	}
	return dst
}

// appendString appends a primitive string type (OCTET STRING, UTF8String)
// with the given tag.
func appendString(dst []byte, cls byte, n uint32, s string) []byte {
	dst = appendTag(dst, cls, 0, n)
	ls := lengthSize(len(s))
	for range ls {
		dst = append(dst, 0)
	}
	putLength(dst[len(dst)-ls:], len(s))
	return append(dst, s...)
}

// appendBytes is appendString for a byte slice.
func appendBytes(dst []byte, cls byte, n uint32, b []byte) []byte {
	dst = appendTag(dst, cls, 0, n)
	ls := lengthSize(len(b))
	for range ls {
		dst = append(dst, 0)
	}
	putLength(dst[len(dst)-ls:], len(b))
	return append(dst, b...)
}
