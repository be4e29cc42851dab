package ocp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/chassis/sighup"
	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/tariff"
)

// TariffCheck is how often WatchTariff looks at the tariff file's
// modification time and size.
const TariffCheck = time.Second

var tariffReloads = telemetry.NewCounterVec("chf_ocp_tariff_reloads_total",
	"Reloads of the --tariff file (on a change of its inode, mtime or size, or SIGHUP), by result: changed (a new epoch is rated), unchanged (same rates), invalid (the old tariff is kept; the log says why).",
	"result")

// TariffWatcher reloads a Processor's tariff file when it changes (its
// modification time or size, looked at every TariffCheck) and on SIGHUP.
// A file that does not load (unreadable, invalid) leaves the old tariff in
// force and is logged with the reason; a valid one replaces it for every
// later request. The new tariff's epoch reaches the ABM on the next rated
// request, and the ABM's sweep re-authorises the sessions granted under
// the old one (abm/README.md, Notifications).
type TariffWatcher struct {
	proc *Processor
	path string
	log  *slog.Logger

	mu   sync.Mutex  // one reload at a time
	last os.FileInfo // the file as last loaded or checked (nil: none)
}

// NewTariffWatcher returns a watcher of path for p, whose tariff was
// loaded from path.
func NewTariffWatcher(p *Processor, path string, log *slog.Logger) *TariffWatcher {
	w := &TariffWatcher{proc: p, path: path, log: log}
	if fi, err := os.Stat(path); err == nil {
		w.last = fi
	}
	return w
}

// Run checks the file every TariffCheck and reloads it on SIGHUP until
// ctx ends.
func (w *TariffWatcher) Run(ctx context.Context) {
	stop := sighup.OnSIGHUP(func() error { return w.Reload("SIGHUP") })
	defer stop()
	t := time.NewTicker(TariffCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Check()
		}
	}
}

// Check reloads the file if it was replaced (another inode, as an atomic
// rename or a ConfigMap update makes it) or its modification time or size
// changed since the last load or check. An edit in place that keeps the
// size within the file system's timestamp granularity is not seen: SIGHUP
// reloads it.
func (w *TariffWatcher) Check() {
	fi, err := os.Stat(w.path)
	if err != nil {
		return // a file being replaced; Reload reports what stays missing
	}
	w.mu.Lock()
	same := w.last != nil && os.SameFile(w.last, fi) && fi.ModTime().Equal(w.last.ModTime()) && fi.Size() == w.last.Size()
	w.mu.Unlock()
	if !same {
		_ = w.Reload("file changed")
	}
}

// Reload loads the file now (why says what asked, for the log). On error
// the old tariff stays in force.
func (w *TariffWatcher) Reload(why string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if fi, err := os.Stat(w.path); err == nil {
		w.last = fi
	}
	t, err := tariff.Load(w.path)
	if err != nil {
		tariffReloads.WithLabelValues("invalid").Inc()
		w.log.Error("cannot reload tariff: keeping the old one", "why", why, "err", err, "epoch", w.proc.Tariff().Epoch())
		return fmt.Errorf("cannot reload tariff: %w", err)
	}
	old := w.proc.Tariff()
	if t.Epoch() == old.Epoch() {
		tariffReloads.WithLabelValues("unchanged").Inc()
		w.log.Info("tariff reloaded: unchanged", "why", why, "epoch", t.Epoch())
		return nil
	}
	w.proc.SetTariff(t)
	tariffReloads.WithLabelValues("changed").Inc()
	w.log.Info("tariff reloaded", "why", why, "old_epoch", old.Epoch(), "epoch", t.Epoch(), "changed_rating_groups", t.Changed(old))
	return nil
}
