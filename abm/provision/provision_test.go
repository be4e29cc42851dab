package provision

import "testing"

func TestSUPI(t *testing.T) {
	f := func(first string, i int, want string, wantErr bool) {
		t.Helper()
		got, err := SUPI(first, i)
		if (err != nil) != wantErr || got != want {
			t.Fatalf("SUPI(%q, %d) = %q, %v; want %q (error %v)", first, i, got, err, want, wantErr)
		}
	}
	f("imsi-001010000000001", 0, "imsi-001010000000001", false)
	f("imsi-001010000000001", 99999, "imsi-001010000100000", false)
	f("imsi-999", 1, "", true)
	f("msisdn-1", 0, "", true)
	f("imsi-", 0, "", true)
	f("imsi-12a", 0, "", true)
}
