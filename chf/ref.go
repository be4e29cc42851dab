package chf

import (
	"errors"
	"strings"
)

// ErrBadRef is returned by ParseRef for a ChargingDataRef that does not
// have the form <supi>.<16 lowercase hex digits>.
var ErrBadRef = errors.New("chf: malformed ChargingDataRef")

// SessionIDLen is the length of the session part of a ChargingDataRef.
const SessionIDLen = 16

// AppendRef appends the ChargingDataRef of a session to dst:
// supi + "." + session. session is the 16 lowercase hex digit session id
// the CGW drew at create. The account key (SUPI) is inside the reference so
// that any pod can reach the account without a lookup.
func AppendRef(dst []byte, supi, session string) []byte {
	dst = append(dst, supi...)
	dst = append(dst, '.')
	return append(dst, session...)
}

// AppendSessionID appends the 16 lowercase hex digits of id to dst.
func AppendSessionID(dst []byte, id uint64) []byte {
	const hexdigits = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		dst = append(dst, hexdigits[(id>>uint(i))&0xf])
	}
	return dst
}

// ParseRef splits a ChargingDataRef on its LAST '.' into the SUPI and the
// session id. SUPIs may contain dots (nai-...), session ids never do.
// The returned strings share memory with ref.
func ParseRef(ref string) (supi, session string, err error) {
	i := strings.LastIndexByte(ref, '.')
	if i <= 0 || len(ref)-i-1 != SessionIDLen {
		return "", "", ErrBadRef
	}
	supi, session = ref[:i], ref[i+1:]
	for j := 0; j < len(session); j++ {
		c := session[j]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", ErrBadRef
		}
	}
	return supi, session, nil
}
