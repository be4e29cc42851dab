package ocp_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/ocp"
	"github.com/chf-testbed/testbed/tariff"
)

// TestTariffWatcher: a changed file is reloaded (new epoch, changed
// rating groups named), an invalid one keeps the old tariff, the same
// rates keep the epoch, SIGHUP reloads, and the epoch reaches the ABM on
// every request.
func TestTariffWatcher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tariff.yaml")
	write := func(body string) {
		t.Helper()
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(tariff.DefaultFile)
	first, err := tariff.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if first.Epoch() != tariff.Default().Epoch() || first.Epoch() == 0 {
		t.Fatalf("epoch %d, default %d", first.Epoch(), tariff.Default().Epoch())
	}
	e := newEnv(t, abm.Config{})
	p := ocp.NewProcessor(first, e.abm)
	w := ocp.NewTariffWatcher(p, path, slog.New(slog.DiscardHandler))
	w.Check()
	if p.Tariff() != first {
		t.Fatal("an unchanged file was reloaded")
	}
	// Voice at 2 per second: another epoch, RG 20 changed.
	voice2 := strings.Replace(tariff.DefaultFile, "price: 1                # per second", "price: 2                # per second", 1)
	write(voice2)
	w.Check()
	if p.Tariff() == first || p.Tariff().Rate(20).Price != 2 || p.Tariff().Epoch() == first.Epoch() {
		t.Fatalf("not reloaded: price %d", p.Tariff().Rate(20).Price)
	}
	if ch := p.Tariff().Changed(first); len(ch) != 1 || ch[0] != 20 {
		t.Fatalf("changed %v", ch)
	}
	second := p.Tariff()
	// Invalid: kept.
	write("ratingGroups:\n  - {ratingGroup: 10, service: data, price: -1, defaultGrant: 1}\n")
	w.Check()
	if p.Tariff() != second {
		t.Fatal("an invalid file replaced the tariff")
	}
	// The same rates (a comment added): the epoch is kept.
	write(voice2 + "# reformatted\n")
	if err := w.Reload("test"); err != nil || p.Tariff().Epoch() != second.Epoch() {
		t.Fatalf("same rates: %v, epoch %d want %d", err, p.Tariff().Epoch(), second.Epoch())
	}
	// SIGHUP reloads while Run runs.
	write(tariff.DefaultFile)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond) // Run's signal handler installed
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); p.Tariff().Epoch() != first.Epoch(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the tariff")
		}
	}
	// The epoch travels with each request to the ABM.
	e.provision(supi, 1000)
	e.p = p
	e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "s1", Seq: 1, Lines: []chf.UsageLine{data(0, true)}})
	if got := e.abm.Stats().TariffEpoch; got != first.Epoch() {
		t.Fatalf("ABM saw epoch %d, want %d", got, first.Epoch())
	}
}
