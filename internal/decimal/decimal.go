// Package decimal parses the unsigned decimal numbers of protocol header
// values (a deadline in microseconds, a 3gpp-Sbi-Max-Rsp-Time in
// milliseconds) without allocating.
package decimal

// ParseUint parses b, a non-empty run of at most maxDigits ASCII digits
// (no sign, no spaces); false otherwise. maxDigits must be at most 19,
// so that the value cannot overflow.
func ParseUint(b []byte, maxDigits int) (uint64, bool) {
	if len(b) == 0 || len(b) > maxDigits {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
