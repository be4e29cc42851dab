package chf

import "testing"

func TestRefRoundTrip(t *testing.T) {
	f := func(supi string, id uint64) {
		t.Helper()
		ref := string(AppendRef(nil, supi, string(AppendSessionID(nil, id))))
		gotSupi, gotSess, err := ParseRef(ref)
		if err != nil {
			t.Fatalf("ParseRef(%q): %v", ref, err)
		}
		if gotSupi != supi || gotSess != string(AppendSessionID(nil, id)) {
			t.Fatalf("ParseRef(%q) = %q, %q", ref, gotSupi, gotSess)
		}
	}
	f("imsi-001010000000001", 0)
	f("imsi-001010000000001", 0xdeadbeefcafef00d)
	f("nai-user.name@realm.example", 1)
}

func TestParseRefRejects(t *testing.T) {
	for _, ref := range []string{
		"", ".", "imsi-1", ".0123456789abcdef", "imsi-1.0123456789abcde",
		"imsi-1.0123456789ABCDEF", "imsi-1.0123456789abcdef0", "imsi-1.0123456789abcdeg",
	} {
		if _, _, err := ParseRef(ref); err == nil {
			t.Errorf("ParseRef(%q): want error", ref)
		}
	}
}
