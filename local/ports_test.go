package local

import (
	"net"
	"strings"
	"testing"
)

// TestResolvePortNeverRepeats: the free ports handed to the services of
// this process are all different (the kernel may give a just-closed port
// out again at once), each is bindable when handed out, and a given port
// or a malformed address is left alone or refused.
func TestResolvePortNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for i := range 300 {
		a, err := resolvePort("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("resolve %d gave %s again", i, a)
		}
		seen[a] = true
		if i%50 == 0 {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				t.Fatalf("port %s handed out is not free: %v", a, err)
			}
			ln.Close()
		}
	}
	if a, err := resolvePort(""); err != nil || !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
		t.Errorf("resolvePort(\"\") = %q, %v; want a new loopback port", a, err)
	}
	if a, err := resolvePort("127.0.0.1:18080"); err != nil || a != "127.0.0.1:18080" {
		t.Errorf("a given port came back as %q, %v", a, err)
	}
	if _, err := resolvePort("localhost"); err == nil || !strings.Contains(err.Error(), `"localhost"`) {
		t.Errorf("a malformed address gave %v, want an error naming it", err)
	}
}
