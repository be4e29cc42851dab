package main

import (
	"testing"
	"time"
)

func TestProgressBar(t *testing.T) {
	f := func(done, total int, el time.Duration, want string) {
		t.Helper()
		if got := progressBar(done, total, el); got != want {
			t.Fatalf("progressBar(%d, %d, %s) = %q, want %q", done, total, el, got, want)
		}
	}
	f(0, 100, 0, "[..............................]   0% 0/100 accounts, 0/s, ? left")
	f(5_000_000, 20_000_000, 10*time.Second, "[#######.......................]  25% 5000000/20000000 accounts, 500000/s, 30s left")
	f(100, 100, time.Second, "[##############################] 100% 100/100 accounts, 100/s, 0s left")
}
