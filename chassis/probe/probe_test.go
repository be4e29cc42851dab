package probe

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestReady(t *testing.T) {
	f := func(draining bool, check func(context.Context) error, wantStatus int, wantBody string) {
		t.Helper()
		status, body := Ready(draining, check)
		if status != wantStatus || body != wantBody {
			t.Fatalf("Ready(%v) = %d %q, want %d %q", draining, status, body, wantStatus, wantBody)
		}
	}
	down := func(context.Context) error { return errors.New("no OCP answers") }
	f(false, nil, http.StatusOK, "ready\n")
	f(false, func(context.Context) error { return nil }, http.StatusOK, "ready\n")
	f(false, down, http.StatusServiceUnavailable, "not ready: no OCP answers\n")
	f(true, nil, http.StatusServiceUnavailable, "shutting down\n")
	f(true, down, http.StatusServiceUnavailable, "shutting down\n")
}

// A check is bounded by ReadyTimeout.
func TestReadyBounded(t *testing.T) {
	var left time.Duration
	Ready(false, func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			t.Fatal("the check has no deadline")
		}
		left = time.Until(d)
		return nil
	})
	if left <= 0 || left > ReadyTimeout {
		t.Fatalf("the check had %v left, want (0, %v]", left, ReadyTimeout)
	}
}
