package chassis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestLogThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	lt := NewLogThrottle(time.Second)
	lt.now = func() time.Time { return now }
	type step struct {
		advance time.Duration
		kind    string
		wantOK  bool
		wantN   uint64
	}
	steps := []step{
		{0, "a", true, 1},
		{0, "a", false, 0},
		{100 * time.Millisecond, "a", false, 0},
		{0, "b", true, 1},
		{time.Second, "a", true, 3},
		{0, "a", false, 0},
		{0, "b", true, 1},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		n, ok := lt.Allow(s.kind)
		if ok != s.wantOK || n != s.wantN {
			t.Errorf("step %d: Allow(%q) = %d, %v; want %d, %v", i, s.kind, n, ok, s.wantN, s.wantOK)
		}
	}
}

func TestLogThrottleNoAlloc(t *testing.T) {
	lt := NewLogThrottle(time.Hour)
	lt.Allow("k")
	if a := testing.AllocsPerRun(100, func() { lt.Allow("k") }); a != 0 {
		t.Fatalf("Allow allocates %v times per call", a)
	}
}

func TestErrorKindAndOverload(t *testing.T) {
	tests := []struct {
		err      error
		kind     string
		overload bool
	}{
		{fmt.Errorf("cannot call ocp: %w", fasthttp.ErrNoFreeConns), "pool exhausted", true},
		{fmt.Errorf("cannot call ocp: %w", fasthttp.ErrTimeout), "timeout", false},
		{&StatusError{Code: 503}, "status Service Unavailable", true},
		{&StatusError{Code: 502}, "status Bad Gateway", false},
		{context.Canceled, "other", false},
		{errors.New("x"), "other", false},
	}
	for _, tt := range tests {
		if got := ErrorKind(tt.err); got != tt.kind {
			t.Errorf("ErrorKind(%v) = %q, want %q", tt.err, got, tt.kind)
		}
		if got := IsOverload(tt.err); got != tt.overload {
			t.Errorf("IsOverload(%v) = %v, want %v", tt.err, got, tt.overload)
		}
	}
}
