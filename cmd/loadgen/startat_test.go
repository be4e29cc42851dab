package main

import (
	"errors"
	"testing"
	"time"
)

func TestParseStartAt(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := func(in string, want time.Time, bad bool) {
		t.Helper()
		got, err := parseStartAt(in, now)
		var ue usageError
		switch {
		case bad && !errors.As(err, &ue):
			t.Errorf("--start-at %q: err %v, want a usage error", in, err)
		case !bad && (err != nil || !got.Equal(want)):
			t.Errorf("--start-at %q: %v %v, want %v", in, got, err, want)
		}
	}
	f("", time.Time{}, false)
	f("2026-12-01T10:01:00Z", now.Add(time.Minute), false)
	f("2026-12-01T11:01:00+01:00", now.Add(time.Minute), false)
	f("2026-12-01T09:59:59Z", now.Add(-time.Second), false) // within the tolerance
	f("2026-12-01T09:59:00Z", time.Time{}, true)            // a minute late
	f("2026-12-01T12:00:00Z", time.Time{}, true)            // beyond the longest wait
	f("10:00", time.Time{}, true)
}
