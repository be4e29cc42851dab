package cgw

import (
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestH2spec runs the HTTP/2 conformance suite (h2spec: generic, http2
// and hpack, strict mode) against the CGW's Nchf front, HTTP/1.1 sniffing
// included, and requires every case to pass. `make tools` installs the
// pinned h2spec; in CI a missing one is a failure.
func TestH2spec(t *testing.T) {
	bin, err := exec.LookPath("h2spec")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("h2spec not installed (make tools installs it)")
		}
		t.Skip("h2spec not installed (make tools installs it)")
	}
	s := startServer(t, &fakeCharger{}, 0)
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--strict", "--timeout", "3", "-h", host, "-p", port).CombinedOutput()
	m := regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("h2spec: no summary (%v):\n%s", err, out)
	}
	total, _ := strconv.Atoi(string(m[1]))
	passed, _ := strconv.Atoi(string(m[2]))
	if failed := string(m[4]); failed != "0" || err != nil || total < 140 || passed != total {
		t.Fatalf("h2spec: %s (%v):\n%s", m[0], err, out)
	}
	t.Logf("h2spec --strict: %s", m[0])
}
