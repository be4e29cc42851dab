package chf

import (
	"fmt"
	"strconv"
	"strings"
)

// SUPI is a subscriber identity as the testbed numbers subscribers: a
// prefix ("imsi-") and a zero-padded number. A range of subscribers
// counts up from a first one keeping the width: provisioning creates the
// accounts, the load generator addresses them.
type SUPI struct {
	Prefix string // "imsi-"
	Number uint64
	Width  int // digits, zero-padded
}

// ParseSUPI splits "imsi-001010000000001" into its prefix and number.
func ParseSUPI(s string) (SUPI, error) {
	i := strings.LastIndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	digits := s[i+1:]
	if digits == "" || len(digits) > 19 {
		return SUPI{}, fmt.Errorf("SUPI %q must end in 1..19 digits", s)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return SUPI{}, fmt.Errorf("cannot parse SUPI %q: %w", s, err)
	}
	return SUPI{Prefix: s[:i+1], Number: n, Width: len(digits)}, nil
}

// Append appends the SUPI offset by i to dst.
func (p SUPI) Append(dst []byte, i int) []byte {
	dst = append(dst, p.Prefix...)
	var tmp [20]byte
	b := strconv.AppendUint(tmp[:0], p.Number+uint64(i), 10)
	for n := len(b); n < p.Width; n++ {
		dst = append(dst, '0')
	}
	return append(dst, b...)
}

// String returns the SUPI offset by i.
func (p SUPI) String(i int) string { return string(p.Append(nil, i)) }

// Fits reports whether the SUPI offset by i keeps the width (does not
// overflow into another digit) and does not wrap around.
func (p SUPI) Fits(i int) bool {
	n := p.Number + uint64(i)
	return i >= 0 && n >= p.Number && len(strconv.FormatUint(n, 10)) <= p.Width
}
