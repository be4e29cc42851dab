// Package sighup runs a reload function on every SIGHUP, the one loop
// behind the file-backed configuration of the chassis (TLS files, OAuth2
// keys).
package sighup

import (
	"os"
	"os/signal"
	"syscall"
)

// OnSIGHUP calls reload whenever the process gets SIGHUP, until stop is
// called; stop returns once no reload runs any more. reload's error is
// dropped: a failed reload keeps the old configuration and reports itself.
func OnSIGHUP(reload func() error) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-ch:
				_ = reload()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		<-exited
	}
}
