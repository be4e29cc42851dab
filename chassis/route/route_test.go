package route

import "testing"

func TestDefault(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := Default([]byte(in)); got != want {
			t.Errorf("Default(%q) = %q, want %q", in, got, want)
		}
	}
	f("/", "/")
	f("/ocp/v1/charge", "/ocp/v1/charge")
	f("/nchf-convergedcharging/v3/chargingdata/imsi-001010000000001.0123456789abcdef/update", "/nchf-convergedcharging/v3/chargingdata/{id}/update")
	f("/chf/v1/accounts/imsi-001010000000001", "/chf/v1/accounts/{id}")
	f("//a//b/", "/a/b")
}
