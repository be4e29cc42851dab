package sighup

import (
	"syscall"
	"testing"
	"time"
)

// A SIGHUP to the process runs the reload; after stop none runs.
func TestOnSIGHUP(t *testing.T) {
	got := make(chan struct{}, 4)
	stop := OnSIGHUP(func() error { got <- struct{}{}; return nil })
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no reload within 5s of SIGHUP")
	}
	stop()
	select {
	case <-got:
		t.Fatal("a reload ran after stop")
	default:
	}
}
