package checked

import (
	"math"
	"math/big"
	"testing"
)

func TestAddU64(t *testing.T) {
	for _, c := range []struct {
		x, y, want uint64
		ok         bool
	}{
		{0, 0, 0, true},
		{1, 2, 3, true},
		{math.MaxUint64, 0, math.MaxUint64, true},
		{math.MaxUint64 - 1, 1, math.MaxUint64, true},
		{math.MaxUint64, 1, 0, false},
		{1 << 63, 1 << 63, 0, false},
	} {
		if got, ok := AddU64(c.x, c.y); got != c.want || ok != c.ok {
			t.Errorf("AddU64(%d, %d) = %d, %v; want %d, %v", c.x, c.y, got, ok, c.want, c.ok)
		}
	}
}

func TestAddU32(t *testing.T) {
	for _, c := range []struct {
		x, y, want uint32
		ok         bool
	}{
		{1, 2, 3, true},
		{math.MaxUint32 - 5, 5, math.MaxUint32, true},
		{math.MaxUint32, 1, 0, false},
	} {
		if got, ok := AddU32(c.x, c.y); got != c.want || ok != c.ok {
			t.Errorf("AddU32(%d, %d) = %d, %v; want %d, %v", c.x, c.y, got, ok, c.want, c.ok)
		}
	}
}

func TestAddSubI64(t *testing.T) {
	for _, c := range []struct {
		x, y   int64
		sum    int64
		sumOK  bool
		diff   int64
		diffOK bool
	}{
		{1, 2, 3, true, -1, true},
		{math.MaxInt64, 0, math.MaxInt64, true, math.MaxInt64, true},
		{math.MaxInt64, 1, 0, false, math.MaxInt64 - 1, true},
		{math.MinInt64, -1, 0, false, math.MinInt64 + 1, true},
		{math.MinInt64, 1, math.MinInt64 + 1, true, 0, false},
		{0, math.MinInt64, math.MinInt64, true, 0, false},
		{-1, math.MinInt64, 0, false, math.MaxInt64, true},
		{math.MaxInt64, math.MinInt64, -1, true, 0, false},
	} {
		if got, ok := AddI64(c.x, c.y); got != c.sum || ok != c.sumOK {
			t.Errorf("AddI64(%d, %d) = %d, %v; want %d, %v", c.x, c.y, got, ok, c.sum, c.sumOK)
		}
		if got, ok := SubI64(c.x, c.y); got != c.diff || ok != c.diffOK {
			t.Errorf("SubI64(%d, %d) = %d, %v; want %d, %v", c.x, c.y, got, ok, c.diff, c.diffOK)
		}
		if got, ok := AddSeconds(c.x, c.y); got != c.sum || ok != c.sumOK {
			t.Errorf("AddSeconds(%d, %d) = %d, %v; want %d, %v", c.x, c.y, got, ok, c.sum, c.sumOK)
		}
	}
}

func TestMulU64(t *testing.T) {
	for _, c := range []struct {
		x, y, want uint64
		ok         bool
	}{
		{0, math.MaxUint64, 0, true},
		{3, 7, 21, true},
		{1 << 32, 1 << 31, 1 << 63, true},
		{1 << 32, 1 << 32, 0, false},
		{math.MaxUint64, 2, 0, false},
	} {
		if got, ok := MulU64(c.x, c.y); got != c.want || ok != c.ok {
			t.Errorf("MulU64(%d, %d) = %d, %v; want %d, %v", c.x, c.y, got, ok, c.want, c.ok)
		}
	}
}

func TestMulI64(t *testing.T) {
	for _, c := range []struct {
		x, y, want int64
		ok         bool
	}{
		{0, math.MinInt64, 0, true},
		{-3, 7, -21, true},
		{-1, math.MaxInt64, -math.MaxInt64, true},
		{-1, math.MinInt64, 0, false},
		{math.MinInt64, -1, 0, false},
		{math.MinInt64, 1, math.MinInt64, true},
		{1 << 32, 1 << 31, 0, false},
		{-(1 << 32), 1 << 31, math.MinInt64, true},
		{math.MaxInt64, 2, 0, false},
	} {
		if got, ok := MulI64(c.x, c.y); got != c.want || ok != c.ok {
			t.Errorf("MulI64(%d, %d) = %d, %v; want %d, %v", c.x, c.y, got, ok, c.want, c.ok)
		}
	}
}

func TestMulDivUp(t *testing.T) {
	for _, c := range []struct {
		x, y, d, want uint64
		ok            bool
	}{
		{0, 5, 1, 0, true},
		{10, 3, 4, 8, true}, // 30/4 = 7.5 → 8
		{1_000_000, 1, 1_000_000, 1, true},
		{1_000_001, 1, 1_000_000, 2, true},
		{math.MaxUint64, math.MaxUint64, math.MaxUint64, math.MaxUint64, true},
		{math.MaxUint64, 2, 1, 0, false},
		{math.MaxUint64, 3, 2, 0, false}, // fits 128 bits, not the quotient
		{math.MaxUint64, 1, 0, 0, false}, // no divisor
		{1<<63 + 1, 2, 2, 1<<63 + 1, true},
	} {
		if got, ok := MulDivUp(c.x, c.y, c.d); got != c.want || ok != c.ok {
			t.Errorf("MulDivUp(%d, %d, %d) = %d, %v; want %d, %v", c.x, c.y, c.d, got, ok, c.want, c.ok)
		}
	}
}

func TestAllocs(t *testing.T) {
	var sink uint64
	n := testing.AllocsPerRun(100, func() {
		a, _ := AddU64(sink, 1)
		b, _ := MulDivUp(a, 3, 7)
		c, _ := MulI64(int64(b), -2)
		sink = uint64(c)
	})
	if n != 0 {
		t.Errorf("allocations per run = %v, want 0", n)
	}
}

var (
	minI64 = big.NewInt(math.MinInt64)
	maxI64 = big.NewInt(math.MaxInt64)
	maxU64 = new(big.Int).SetUint64(math.MaxUint64)
	maxU32 = new(big.Int).SetUint64(math.MaxUint32)
)

// wantU is what a function on unsigned values must answer for the exact
// result z: z and true when it fits [0, max], else 0 and false.
func wantU(z, max *big.Int) (uint64, bool) {
	if z.Sign() < 0 || z.Cmp(max) > 0 {
		return 0, false
	}
	return z.Uint64(), true
}

func wantI(z *big.Int) (int64, bool) {
	if z.Cmp(minI64) < 0 || z.Cmp(maxI64) > 0 {
		return 0, false
	}
	return z.Int64(), true
}

func FuzzAdd(f *testing.F) {
	f.Add(uint64(0), uint64(0))
	f.Add(uint64(math.MaxUint64), uint64(1))
	f.Add(uint64(1<<63), uint64(1<<63-1))
	f.Add(uint64(math.MaxUint32), uint64(math.MaxUint32))
	f.Fuzz(func(t *testing.T, x, y uint64) {
		bx, by := new(big.Int).SetUint64(x), new(big.Int).SetUint64(y)
		sum := new(big.Int).Add(bx, by)
		w, wok := wantU(sum, maxU64)
		if got, ok := AddU64(x, y); got != w || ok != wok {
			t.Errorf("AddU64(%d, %d) = %d, %v; want %d, %v", x, y, got, ok, w, wok)
		}
		x32, y32 := uint32(x), uint32(y)
		sum32 := new(big.Int).Add(new(big.Int).SetUint64(uint64(x32)), new(big.Int).SetUint64(uint64(y32)))
		w, wok = wantU(sum32, maxU32)
		if got, ok := AddU32(x32, y32); uint64(got) != w || ok != wok {
			t.Errorf("AddU32(%d, %d) = %d, %v; want %d, %v", x32, y32, got, ok, w, wok)
		}
		ix, iy := int64(x), int64(y)
		bix, biy := big.NewInt(ix), big.NewInt(iy)
		wi, wiok := wantI(new(big.Int).Add(bix, biy))
		if got, ok := AddI64(ix, iy); got != wi || ok != wiok {
			t.Errorf("AddI64(%d, %d) = %d, %v; want %d, %v", ix, iy, got, ok, wi, wiok)
		}
		if got, ok := AddSeconds(ix, iy); got != wi || ok != wiok {
			t.Errorf("AddSeconds(%d, %d) = %d, %v; want %d, %v", ix, iy, got, ok, wi, wiok)
		}
		wi, wiok = wantI(new(big.Int).Sub(bix, biy))
		if got, ok := SubI64(ix, iy); got != wi || ok != wiok {
			t.Errorf("SubI64(%d, %d) = %d, %v; want %d, %v", ix, iy, got, ok, wi, wiok)
		}
	})
}

func FuzzMul(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint64(1))
	f.Add(uint64(math.MaxUint64), uint64(2), uint64(3))
	f.Add(uint64(1<<63), uint64(math.MaxUint64), uint64(1))
	f.Add(uint64(1<<32), uint64(1<<32), uint64(0))
	f.Fuzz(func(t *testing.T, x, y, d uint64) {
		bx, by := new(big.Int).SetUint64(x), new(big.Int).SetUint64(y)
		p := new(big.Int).Mul(bx, by)
		w, wok := wantU(p, maxU64)
		if got, ok := MulU64(x, y); got != w || ok != wok {
			t.Errorf("MulU64(%d, %d) = %d, %v; want %d, %v", x, y, got, ok, w, wok)
		}
		ix, iy := int64(x), int64(y)
		wi, wiok := wantI(new(big.Int).Mul(big.NewInt(ix), big.NewInt(iy)))
		if got, ok := MulI64(ix, iy); got != wi || ok != wiok {
			t.Errorf("MulI64(%d, %d) = %d, %v; want %d, %v", ix, iy, got, ok, wi, wiok)
		}
		var wq uint64
		qok := false
		if d != 0 {
			// ceil(p/d) = floor((p + d - 1) / d)
			bd := new(big.Int).SetUint64(d)
			q := new(big.Int).Add(p, bd)
			q.Sub(q, big.NewInt(1)).Quo(q, bd)
			wq, qok = wantU(q, maxU64)
		}
		if got, ok := MulDivUp(x, y, d); got != wq || ok != qok {
			t.Errorf("MulDivUp(%d, %d, %d) = %d, %v; want %d, %v", x, y, d, got, ok, wq, qok)
		}
	})
}
