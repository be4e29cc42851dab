package decimal

import "testing"

func TestParseUint(t *testing.T) {
	f := func(in string, max int, want uint64, wantOK bool) {
		t.Helper()
		got, ok := ParseUint([]byte(in), max)
		if got != want || ok != wantOK {
			t.Fatalf("ParseUint(%q, %d) = %d, %v; want %d, %v", in, max, got, ok, want, wantOK)
		}
	}
	f("0", 9, 0, true)
	f("1500", 9, 1500, true)
	f("999999999", 9, 999999999, true)
	f("1000000000", 9, 0, false) // ten digits
	f("999999999999999999", 18, 999999999999999999, true)
	f("", 9, 0, false)
	f("-1", 9, 0, false)
	f("+1", 9, 0, false)
	f("1 ", 9, 0, false)
	f("1.5", 9, 0, false)
	if n := testing.AllocsPerRun(100, func() { ParseUint([]byte("123456"), 9) }); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}
