package logthrottle

import (
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	lt := New(time.Second)
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

func TestThrottleNoAlloc(t *testing.T) {
	lt := New(time.Hour)
	lt.Allow("k")
	if a := testing.AllocsPerRun(100, func() { lt.Allow("k") }); a != 0 {
		t.Fatalf("Allow allocates %v times per call", a)
	}
}
