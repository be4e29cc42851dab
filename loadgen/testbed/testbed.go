// Package testbed starts and stops the local CHF that `loadgen local`
// measures: it finds (or builds) the chf binary and runs its services as
// separate processes through package local (aslite, abm with provisioned
// accounts, ocp, cgw), then names each process as a CPU component.
//
// It does not measure anything itself; package run does.
package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/local"
)

// ErrNoCHF is returned when no usable chf binary can be found or built.
var ErrNoCHF = errors.New("testbed: no chf binary")

// Options configure the local CHF.
type Options struct {
	// CHF is the chf binary; empty searches next to this executable, then
	// ./bin/chf, then PATH, and finally builds ./cmd/chf with `go build`.
	CHF      string
	Accounts int
	Balance  int64
	First    string
	// Logs receives the services' log lines (default io.Discard).
	Logs io.Writer
	Log  *slog.Logger
	// CGWArgs, OCPArgs, ABMArgs and AsliteArgs add flags to those services.
	CGWArgs, OCPArgs, ABMArgs, AsliteArgs []string
	// Diameter starts the CGW's Diameter Gy front on a free loopback port.
	Diameter bool
	// Replicas, AsliteDataDir and AsliteCommit are local.Config's.
	Replicas      map[string]int
	AsliteDataDir string
	AsliteCommit  string
	// Plans re-provision parts of the range (local.Config.Plans).
	Plans []local.Plan
	// TLSDir runs every service over TLS with mTLS (local.Config.TLSDir).
	TLSDir string
	// Store selects the store (local.Config.Store): aslite by default,
	// the real server (asd) or an existing Aerospike.
	Store local.StoreConfig
	// CDRDir is the OCPs' --cdr-dir (local.Config.CDRDir: a subdirectory
	// per OCP when there are several); empty = no CDRs.
	CDRDir string
	// RuntimeProfile is every service's --runtime-profile
	// (local.Config.RuntimeProfile; the zero value: production).
	RuntimeProfile sched.Profile
}

// Testbed is a running local CHF.
type Testbed struct {
	// Target is the CGW's host:port (Nchf over h2c and HTTP/1.1, balances);
	// Targets lists every CGW instance's (Target first).
	Target  string
	Targets []string
	// Diameter is the host:port of the CGW's Diameter Gy front, when
	// Options.Diameter asked for it; Diameters lists every CGW instance's.
	Diameter  string
	Diameters []string
	// Pids maps each service to its process id.
	Pids map[string]int
	// CHF is the binary used.
	CHF string
	// Metrics maps each cgw, ocp and abm instance (named as in Pids) to
	// its /metrics URL; nil when the services run over TLS (Options.TLSDir:
	// their endpoints then ask for a client certificate).
	Metrics map[string]string
	chf     *local.CHF
	cleanup func()
}

// CPU returns one CPU source per service process.
func (t *Testbed) CPU() []cpu.Source {
	names := make([]string, 0, len(t.Pids))
	for n := range t.Pids {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]cpu.Source, 0, len(names))
	for _, n := range names {
		out = append(out, cpu.NewProc(n, t.Pids[n]))
	}
	return out
}

// Done is closed when a service exits on its own.
func (t *Testbed) Done() <-chan struct{} { return t.chf.Done() }

// Err says why Done was closed.
func (t *Testbed) Err() error { return t.chf.Err() }

// Stop stops every service and removes a binary built for the run.
func (t *Testbed) Stop() error {
	err := t.chf.Stop()
	if t.cleanup != nil {
		t.cleanup()
	}
	return err
}

// Start finds the chf binary and starts the services; it returns once the
// CGW is ready.
func Start(ctx context.Context, o Options) (*Testbed, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	exe, cleanup, err := FindCHF(ctx, o.CHF, o.Log)
	if err != nil {
		return nil, err
	}
	args := map[string][]string{"cgw": o.CGWArgs, "ocp": o.OCPArgs, "abm": o.ABMArgs, "aslite": o.AsliteArgs}
	cfg := local.Config{
		Exe: exe, Nchf: "127.0.0.1:0", Accounts: o.Accounts, Balance: o.Balance, First: o.First,
		Logs: o.Logs, Logger: o.Log, Args: args, TLSDir: o.TLSDir,
		Replicas: o.Replicas, AsliteDataDir: o.AsliteDataDir, AsliteCommit: o.AsliteCommit, Plans: o.Plans,
		CDRDir: o.CDRDir, Store: o.Store, RuntimeProfile: o.RuntimeProfile,
	}
	if o.Diameter {
		cfg.Diameter = "127.0.0.1:0"
	}
	c, err := local.Start(ctx, cfg)
	if err != nil {
		if cleanup != nil {
			cleanup()
		}
		return nil, fmt.Errorf("cannot start the local CHF: %w", err)
	}
	t := &Testbed{
		Target: c.Addrs["cgw"], Targets: c.Instances["cgw"], Diameter: c.Addrs["diameter"], Diameters: c.Instances["diameter"],
		Pids: c.Pids(), CHF: exe, chf: c, cleanup: cleanup,
	}
	if o.TLSDir == "" {
		t.Metrics = map[string]string{}
		for name, addr := range c.InstanceAddrs("cgw", "ocp", "abm") {
			t.Metrics[name] = "http://" + addr + "/metrics"
		}
	}
	return t, nil
}

// Store says which store the CHF uses.
func (t *Testbed) Store() local.StoreInfo { return t.chf.Store() }

// MigrationsRemaining is the partitions a started asd cluster still has
// to migrate (run.MigrationSampler).
func (t *Testbed) MigrationsRemaining(ctx context.Context) (int64, error) {
	return t.chf.MigrationsRemaining(ctx)
}

// Kill kills the first instance of service with SIGKILL (run.Injector);
// "asd" is asd node 0, "asd1" node 1, and so on.
func (t *Testbed) Kill(service string) (string, error) {
	name, err := t.first(service)
	if err != nil {
		return "", err
	}
	return name, t.chf.Kill(name)
}

// Restart starts a killed instance again and waits until it is ready.
func (t *Testbed) Restart(ctx context.Context, instance string) error {
	return t.chf.Restart(ctx, instance)
}

// Pause stops the first instance of service with SIGSTOP.
func (t *Testbed) Pause(service string) (string, error) {
	name, err := t.first(service)
	if err != nil {
		return "", err
	}
	return name, t.chf.Pause(name)
}

// Resume continues a paused instance.
func (t *Testbed) Resume(instance string) error { return t.chf.Resume(instance) }

func (t *Testbed) first(service string) (string, error) {
	if name, _, ok := t.chf.StoreNode(service); ok {
		return name, nil
	}
	names := t.chf.Names(service)
	if len(names) == 0 {
		return "", fmt.Errorf("%w: no instance of %s", local.ErrNoInstance, service)
	}
	return names[0], nil
}

// FindCHF returns a chf binary that has the service subcommands. When it
// had to build one, cleanup removes it.
func FindCHF(ctx context.Context, explicit string, log *slog.Logger) (path string, cleanup func(), err error) {
	if explicit != "" {
		if !usable(ctx, explicit) {
			return "", nil, fmt.Errorf("%w: %s is not a chf binary with the aslite, abm, ocp and cgw subcommands", ErrNoCHF, explicit)
		}
		return explicit, nil, nil
	}
	var candidates []string
	if self, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(self), "chf"))
	}
	candidates = append(candidates, filepath.Join("bin", "chf"))
	if p, err := exec.LookPath("chf"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if usable(ctx, c) {
			abs, err := filepath.Abs(c)
			if err != nil {
				return "", nil, fmt.Errorf("cannot resolve %s: %w", c, err)
			}
			return abs, nil, nil
		}
	}
	dir, err := os.MkdirTemp("", "loadgen-chf-")
	if err != nil {
		return "", nil, fmt.Errorf("cannot create a build directory: %w", err)
	}
	out := filepath.Join(dir, "chf")
	log.Info("no chf binary found; building ./cmd/chf", "into", out)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/chf")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("%w: not next to loadgen, in ./bin or PATH, and `go build ./cmd/chf` failed (run from the repository root): %v: %s",
			ErrNoCHF, err, strings.TrimSpace(stderr.String()))
	}
	return out, func() { os.RemoveAll(dir) }, nil
}

// usable reports whether path is a chf binary listing the services.
func usable(ctx context.Context, path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() {
		return false
	}
	out, _ := exec.CommandContext(ctx, path, "--help").CombinedOutput()
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		// command lines look like "  name   summary"
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(line, "  ") {
			listed[f[0]] = true
		}
	}
	for _, sub := range []string{"aslite", "abm", "ocp", "cgw"} {
		if !listed[sub] {
			return false
		}
	}
	return true
}
