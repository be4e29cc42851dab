package service

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestStartPprof(t *testing.T) {
	addr, stop, err := StartPprof("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		t.Fatalf("GET /debug/pprof/cmdline = %d %q", resp.StatusCode, b)
	}
	if _, _, err := StartPprof(addr, nil); err == nil || !strings.Contains(err.Error(), "cannot listen") {
		t.Fatalf("second StartPprof on %s: err = %v, want cannot listen", addr, err)
	}
}
