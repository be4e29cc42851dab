// Package checked is overflow-checked integer arithmetic for the charging
// domain: money (int64 minor units), units (uint64 octets, seconds,
// events) and times (int64 Unix seconds). Every function returns the
// exact result and true, or 0 and false when the exact result does not fit
// the type; none allocates, panics or wraps around, and each is small
// enough for the compiler to inline.
//
// The services refuse a request whose sum or product overflows (Nchf 400
// naming the field, Gy 5004 with the AVP) rather than wrap or saturate:
// see chf.ResultOverflow.
package checked

import "math/bits"

// AddU64 returns x + y and whether it fits a uint64.
func AddU64(x, y uint64) (uint64, bool) {
	s, carry := bits.Add64(x, y, 0)
	if carry != 0 {
		return 0, false
	}
	return s, true
}

// AddU32 returns x + y and whether it fits a uint32.
func AddU32(x, y uint32) (uint32, bool) {
	s, carry := bits.Add32(x, y, 0)
	if carry != 0 {
		return 0, false
	}
	return s, true
}

// AddI64 returns x + y and whether it fits an int64.
func AddI64(x, y int64) (int64, bool) {
	s := x + y
	// Overflow iff x and y have the same sign and s has the other one.
	if (x^s)&(y^s) < 0 {
		return 0, false
	}
	return s, true
}

// SubI64 returns x - y and whether it fits an int64.
func SubI64(x, y int64) (int64, bool) {
	d := x - y
	// Overflow iff x and y have different signs and d has y's.
	if (x^y)&(x^d) < 0 {
		return 0, false
	}
	return d, true
}

// MulU64 returns x * y and whether it fits a uint64.
func MulU64(x, y uint64) (uint64, bool) {
	hi, lo := bits.Mul64(x, y)
	if hi != 0 {
		return 0, false
	}
	return lo, true
}

// MulI64 returns x * y and whether it fits an int64.
func MulI64(x, y int64) (int64, bool) {
	if x == 0 || y == 0 {
		return 0, true
	}
	p := x * y
	// p/y == x catches every overflow but -1 * MinInt64, whose quotient
	// wraps back to MinInt64.
	if p/y != x || x == -1 && y == -1<<63 || y == -1 && x == -1<<63 {
		return 0, false
	}
	return p, true
}

// MulDivUp returns ceil(x * y / d), computed on the full 128-bit product,
// and whether it fits a uint64 (false for d == 0): the price of x units at
// y minor units per d units, rounded up to the next minor unit.
func MulDivUp(x, y, d uint64) (uint64, bool) {
	hi, lo := bits.Mul64(x, y)
	if hi >= d { // also d == 0
		return 0, false
	}
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		if q++; q == 0 {
			return 0, false
		}
	}
	return q, true
}

// AddSeconds returns the Unix time t plus a duration of d seconds and
// whether it fits an int64: the expiry of a validity or holding time.
func AddSeconds(t, d int64) (int64, bool) { return AddI64(t, d) }
