// Package flight keeps the last seconds of the Go execution trace in
// memory (runtime/trace's flight recorder) and writes them to a file when
// the service sees a slow call, or on SIGUSR1: what every goroutine, P,
// system call and GC phase of the process did around a tail-latency
// stall, for `go tool trace`. Off unless --flight-recorder names a
// directory.
//
// A service reports the duration of what it waits on with Observe (the
// CGW its requests, every chassis/rpc client its calls, the ABM its
// Aerospike commands). A call at least --flight-threshold long writes a
// snapshot of the last Window of the trace, in the background; after one
// the recorder waits Window before the next, so a stall that slows many
// calls writes one file, and it stops after --flight-files snapshots.
package flight

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults and bounds of the flags.
const (
	DefaultThreshold = 50 * time.Millisecond
	DefaultFiles     = 10
	MaxFiles         = 1000
	// Window is how much trace a snapshot holds (the recorder's MinAge),
	// and the least time between two snapshots.
	Window = 5 * time.Second
	// maxBytes bounds the trace the recorder keeps (its MaxBytes): at
	// 20,000 TPS a CGW traces about 1 MB a second.
	maxBytes = 64 << 20
)

// Config is the recorder's part of a service's configuration.
type Config struct {
	Dir       string        // where snapshots go; empty = off
	Threshold time.Duration // a call at least this long writes a snapshot
	Files     int           // most snapshots the process writes
}

// RegisterFlags registers --flight-recorder, --flight-threshold and
// --flight-files; zero fields get the defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Files == 0 {
		c.Files = DefaultFiles
	}
	fs.StringVar(&c.Dir, "flight-recorder", c.Dir,
		"keep the last 5 s of the Go execution trace in memory and write it into this directory (<service>-<time>-<pid>.trace, for go tool trace) when a call takes --flight-threshold or more, or on SIGUSR1; empty = off (tracing costs a few % of CPU)")
	fs.DurationVar(&c.Threshold, "flight-threshold", c.Threshold,
		"with --flight-recorder: a request, peer call or store command at least this long writes a snapshot (at most one per 5 s)")
	fs.IntVar(&c.Files, "flight-files", c.Files,
		fmt.Sprintf("with --flight-recorder: most snapshots this process writes (1..%d); then the recorder stops", MaxFiles))
}

// Validate checks the flags (not the directory: Start creates it).
func (c Config) Validate() error {
	if c.Threshold <= 0 {
		return fmt.Errorf("cannot use --flight-threshold %v: want a positive duration", c.Threshold)
	}
	if c.Files < 1 || c.Files > MaxFiles {
		return fmt.Errorf("cannot use --flight-files %d: want 1..%d", c.Files, MaxFiles)
	}
	return nil
}

// Recorder is a running flight recorder.
type Recorder struct {
	fr        *trace.FlightRecorder
	threshold time.Duration
	dir       string
	service   string
	files     int
	log       *slog.Logger
	kick      chan time.Duration // the slow call that asks for a snapshot; 0 = SIGUSR1
	sig       chan os.Signal
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
	written   atomic.Int32
}

// active is the process's recorder, which Observe reports to.
var active atomic.Pointer[Recorder]

// pause is the least time between two snapshots (Window; tests shorten it).
var pause = Window

// Observe reports a call that took d. It costs an atomic load and a
// comparison unless d reaches the threshold of a running recorder, which
// then writes a snapshot in the background.
func Observe(d time.Duration) {
	r := active.Load()
	if r == nil || d < r.threshold {
		return
	}
	select {
	case r.kick <- d:
	default: // one is pending already
	}
}

// Start creates cfg.Dir and starts recording the process's execution
// trace; service names the snapshot files. It fails while another flight
// recorder runs in the process (Go allows one).
func Start(cfg Config, service string, log *slog.Logger) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("flight recorder: no directory (--flight-recorder)")
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create --flight-recorder %s: %w", cfg.Dir, err)
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: Window, MaxBytes: maxBytes})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the flight recorder: %w", err)
	}
	r := &Recorder{fr: fr, threshold: cfg.Threshold, dir: cfg.Dir, service: service, files: cfg.Files, log: log,
		kick: make(chan time.Duration, 1), sig: make(chan os.Signal, 1), stop: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(r.sig, syscall.SIGUSR1)
	go r.loop()
	active.Store(r)
	log.Info("flight recorder", "dir", cfg.Dir, "threshold", cfg.Threshold, "files", cfg.Files, "window", Window)
	return r, nil
}

// IgnoreSignal makes SIGUSR1 log that no recorder runs, for a process
// started without one: the signal's default action would kill it.
func IgnoreSignal(log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		for range c {
			log.Warn("SIGUSR1 ignored: no flight recorder runs (--flight-recorder)")
		}
	}()
}

// Written returns the number of snapshots written so far.
func (r *Recorder) Written() int { return int(r.written.Load()) }

// Stop stops recording; a snapshot being written is finished first.
func (r *Recorder) Stop() {
	r.once.Do(func() {
		r.detach()
		close(r.stop)
		<-r.done
		r.fr.Stop() // nothing when the loop stopped it at the limit
	})
}

// detach stops Observe and SIGUSR1 from reaching r.
func (r *Recorder) detach() {
	active.CompareAndSwap(r, nil)
	signal.Stop(r.sig)
}

func (r *Recorder) loop() {
	defer close(r.done)
	for {
		var slow time.Duration
		select {
		case <-r.stop:
			return
		case slow = <-r.kick:
		case <-r.sig:
		}
		r.snapshot(slow)
		if r.Written() >= r.files {
			r.log.Info("flight recorder: snapshot limit reached, recording stopped", "files", r.files)
			r.detach()
			r.fr.Stop()
			return
		}
		// The next snapshot would repeat most of this one; a slow call
		// meanwhile stays pending and is taken after the pause, its
		// stall still inside the window then.
		t := time.NewTimer(pause)
		select {
		case <-r.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// snapshot writes the recorder's window into a new file of r.dir.
func (r *Recorder) snapshot(slow time.Duration) {
	name := filepath.Join(r.dir, fmt.Sprintf("%s-%s-%d.trace", r.service, time.Now().UTC().Format("20060102T150405.000Z"), os.Getpid()))
	tmp := name + ".part" // renamed when complete: a reader never sees half a trace
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		r.log.Warn("flight recorder: cannot create a snapshot", "err", err)
		return
	}
	w := bufio.NewWriterSize(f, 1<<20)
	n, err := r.fr.WriteTo(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		r.log.Warn("flight recorder: cannot write a snapshot", "file", name, "err", err)
		os.Remove(tmp)
		return
	}
	r.written.Add(1)
	why := "SIGUSR1"
	if slow > 0 {
		why = "a call took " + slow.Round(time.Microsecond).String()
	}
	r.log.Warn("flight recorder: wrote the last seconds of the execution trace", "file", name, "bytes", n, "why", why)
}
