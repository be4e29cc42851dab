package discovery

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func collect(t *testing.T, src Source, d time.Duration) [][]Endpoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got [][]Endpoint
	if err := src.Run(ctx, func(eps []Endpoint) { got = append(got, eps) }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return got
}

func TestStatic(t *testing.T) {
	got := collect(t, Static("b:1", "a:1", "b:1", ""), 20*time.Millisecond)
	if len(got) != 1 || len(got[0]) != 2 || got[0][0].Addr != "a:1" || got[0][1].Addr != "b:1" {
		t.Fatalf("Static delivered %v, want one set [a:1 b:1]", got)
	}
}

func TestDNSLocalhost(t *testing.T) {
	src, err := DNS("localhost:8081", DNSConfig{Interval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, src, 200*time.Millisecond)
	if len(got) != 1 {
		t.Fatalf("DNS delivered %d sets, want 1 (no change, no re-delivery): %v", len(got), got)
	}
	found := false
	for _, e := range got[0] {
		found = found || e.Addr == "127.0.0.1:8081"
	}
	if !found {
		t.Fatalf("localhost resolved to %v", got[0])
	}
	if h := src.(HealthReporter).Health(); h.Failing || h.LastSuccess.IsZero() {
		t.Fatalf("health = %+v", h)
	}
}

func TestDNSFailureKeepsSet(t *testing.T) {
	src, err := DNS("no-such-host.invalid:8081", DNSConfig{Interval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, src, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("failing DNS delivered %v", got)
	}
	if h := src.(HealthReporter).Health(); !h.Failing || h.Err == nil || !strings.Contains(h.Err.Error(), "no-such-host") {
		t.Fatalf("health = %+v", h)
	}
}

func TestDNSBadTarget(t *testing.T) {
	for _, target := range []string{"ocp", "ocp:http", ":8081"} {
		if _, err := DNS(target, DNSConfig{}); err == nil {
			t.Errorf("DNS(%q) accepted", target)
		}
	}
	if _, err := DNS("_http._tcp.ocp.chf.svc", DNSConfig{}); err != nil {
		t.Errorf("SRV target rejected: %v", err)
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		mode, peer string
		ok         bool
	}{
		{"static", "127.0.0.1:1,127.0.0.1:2", true},
		{"", "127.0.0.1:1", true},
		{"static", "nohostport", false},
		{"static", "", false},
		{"dns", "ocp.chf.svc:8081", true},
		{"dns", "ocp.chf.svc", false},
		{"carrier-pigeon", "x:1", false},
		// Not linked into this test binary: the kubernetes package
		// registers it.
		{"kubernetes", "ocp:8081", false},
	} {
		_, err := New(tc.mode, tc.peer, Options{})
		if (err == nil) != tc.ok {
			t.Errorf("New(%q, %q) err = %v, want ok=%v", tc.mode, tc.peer, err, tc.ok)
		}
	}
	if _, err := New("kubernetes", "ocp:8081", Options{}); !errors.Is(err, ErrUnknownMode) || !strings.Contains(err.Error(), "dns, static") {
		t.Errorf("unregistered mode: err = %v, want ErrUnknownMode listing the modes", err)
	}
}
