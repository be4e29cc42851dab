package driver

import "testing"

func TestParseTargets(t *testing.T) {
	got, err := ParseTargets("http://10.0.0.1:8080, 10.0.0.2:8081,")
	if err != nil || len(got) != 2 || got[0] != "10.0.0.1:8080" || got[1] != "10.0.0.2:8081" {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := ParseTargets("https://10.0.0.1:8443,https://b:1"); err != nil || len(got) != 2 || got[1] != "b:1" || !IsTLSTarget("https://10.0.0.1:8443") || IsTLSTarget("http://a:1") {
		t.Fatalf("https targets: %v, %v", got, err)
	}
	for _, bad := range []string{"", "https://x:1,http://y:2", "http://y:2,https://x:1", "ftp://x:1", "http://x", "http://[::1"} {
		if _, err := ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q) accepted", bad)
		}
	}
}
