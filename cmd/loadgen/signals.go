package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/chf-testbed/testbed/loadgen/freeze"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// Exit codes of a command stopped by a signal (128 + the signal number,
// as shells report it).
const (
	exitSIGINT  = 130
	exitSIGTERM = 143
)

// interrupted is the error of a command that a signal stopped; the
// report is written all the same.
type interrupted struct {
	sig os.Signal
	err error // what the command returned besides, if anything
}

func (e interrupted) Error() string {
	if e.err != nil {
		return fmt.Sprintf("interrupted by %s (%v)", signalName(e.sig), e.err)
	}
	return "interrupted by " + signalName(e.sig)
}

func (e interrupted) Unwrap() error { return e.err }

func (e interrupted) code() int {
	if e.sig == syscall.SIGTERM {
		return exitSIGTERM
	}
	return exitSIGINT
}

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case os.Interrupt:
		return "SIGINT"
	}
	return s.String()
}

// stopper turns SIGINT and SIGTERM into the cancellation of a run: the
// first signal cancels Context (the run stops, abandons what is in
// flight and reports what it measured); a second one exits at once.
type stopper struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan os.Signal
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	sig    os.Signal
	// tearDown: a second signal does not exit, because what the command
	// made outside this process (namespaces, a cluster) must be removed
	// first; the tear-down's own deadlines bound the wait.
	tearDown bool
}

// onSignals starts watching SIGINT and SIGTERM; Stop ends it.
func onSignals() *stopper { return watchSignals(false) }

// onSignalsTearDown is onSignals for a command that must tear down what it
// made outside the process: a second signal is acknowledged, not obeyed.
func onSignalsTearDown() *stopper { return watchSignals(true) }

func watchSignals(tearDown bool) *stopper {
	s := &stopper{ch: make(chan os.Signal, 2), done: make(chan struct{}), tearDown: tearDown}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM)
	s.wg.Add(1)
	go s.watch()
	return s
}

func (s *stopper) watch() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case sig := <-s.ch:
			s.mu.Lock()
			first := s.sig == nil
			if first {
				s.sig = sig
			}
			s.mu.Unlock()
			code := interrupted{sig: sig}.code()
			if !first && s.tearDown {
				fmt.Fprintf(os.Stderr, "\nloadgen: second signal (%s): still tearing down what the run made (each step has its deadline)\n", signalName(sig))
				continue
			}
			if !first {
				fmt.Fprintf(os.Stderr, "\nloadgen: second signal (%s): exiting now, without a report\n", signalName(sig))
				os.Exit(code)
			}
			fmt.Fprintf(os.Stderr, "\nloadgen: %s: stopping the run (in-flight requests are abandoned); the report follows. Signal again to exit at once.\n", signalName(sig))
			s.cancel()
		}
	}
}

// Context is cancelled by the first signal.
func (s *stopper) Context() context.Context { return s.ctx }

// Signal returns the signal received, nil if none.
func (s *stopper) Signal() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sig
}

// mark records the interruption in res.
func (s *stopper) mark(res *report.Result) {
	if sig := s.Signal(); sig != nil && res != nil {
		res.Interrupted = true
		res.InterruptedBy = signalName(sig)
	}
}

// wrap returns err as the command's error: an interrupted error (exit
// 130/143) when a signal stopped the command.
func (s *stopper) wrap(err error) error {
	if sig := s.Signal(); sig != nil {
		if err == context.Canceled { // the signal's own doing: nothing to add
			err = nil
		}
		return interrupted{sig: sig, err: err}
	}
	return err
}

// Stop stops watching signals (the default handling returns).
func (s *stopper) Stop() {
	signal.Stop(s.ch)
	close(s.done)
	s.wg.Wait()
	s.cancel()
}

// serveFreezeProbe is `loadgen freeze-probe`, the host-freeze probe a run
// starts as its child (package freeze): it ends when its input closes, on
// SIGINT or SIGTERM, or with its parent.
func serveFreezeProbe() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := freeze.Serve(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", freeze.Command, err)
		return exitError
	}
	return 0
}
