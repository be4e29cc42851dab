package chf

import "testing"

func TestSUPI(t *testing.T) {
	p, err := ParseSUPI("imsi-001010000000001")
	if err != nil || p.Prefix != "imsi-" || p.Number != 1010000000001 || p.Width != 15 {
		t.Fatalf("ParseSUPI = %+v, %v", p, err)
	}
	if got := p.String(41); got != "imsi-001010000000042" {
		t.Errorf("String(41) = %q", got)
	}
	if got := string(p.Append([]byte("x"), 0)); got != "ximsi-001010000000001" {
		t.Errorf("Append = %q", got)
	}
	n, _ := ParseSUPI("imsi-98")
	if !n.Fits(1) || n.Fits(2) || n.Fits(-1) {
		t.Errorf("imsi-98: Fits(1) %v Fits(2) %v Fits(-1) %v, want true false false", n.Fits(1), n.Fits(2), n.Fits(-1))
	}
	for _, bad := range []string{"imsi-", "imsi-12345678901234567890", "", "abc"} {
		if _, err := ParseSUPI(bad); err == nil {
			t.Errorf("ParseSUPI(%q) accepted", bad)
		}
	}
}
