// Package local runs a complete CHF on one machine: aslite, abm, ocp and
// cgw as separate processes (the chf binary re-executed with each
// subcommand) on loopback, wired by static addresses, with accounts
// provisioned. `chf local` and the load generator's local runner use it.
//
// Children are started in their own process groups with a parent-death
// signal (Linux Pdeathsig = SIGKILL), so they never outlive the runner even
// if it is killed; Stop sends SIGTERM in reverse start order and SIGKILL
// to stragglers. When a child exits on its own, Done is closed and Err
// names the child and its last log lines.
package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/abm/asd"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/chf"
)

// Config configures a local CHF. Zero values pick the defaults.
type Config struct {
	// Exe is the chf binary to run (default os.Executable()).
	Exe string
	// Nchf is the CGW's host:port (default 127.0.0.1:8080; port 0 = any free).
	Nchf string
	// Diameter, when set, is the host:port of the CGW's Diameter Gy front.
	Diameter string
	// OCP, ABM and Aerospike are the other services' host:ports (default
	// a free loopback port each); Aerospike is aslite's (Store.Kind
	// aslite without Store.External).
	OCP, ABM, Aerospike string
	// Store selects the store: aslite (default), the real server (asd)
	// started here, or an existing Aerospike (Store.External).
	Store StoreConfig
	// Accounts to provision (default 100,000; negative = none) with
	// Balance minor units each (default 100,000,000) from First (default
	// imsi-001010000000001).
	Accounts int
	Balance  int64
	First    string
	// Plans re-provision parts of that range after it (postpaid accounts,
	// bucket plans).
	Plans []Plan
	// Args adds flags per subcommand ("cgw": {"--pprof", "127.0.0.1:6060"}).
	Args map[string][]string
	// CDRDir, when set, is the OCP's --cdr-dir (charging data records);
	// with several OCP instances each writes into a subdirectory named
	// after it (ocp-1, ocp-2, ...).
	CDRDir string
	// Replicas is the number of instances of "cgw", "ocp" and "abm"
	// (default 1 each). The first instance of a service listens on its
	// address above, the others on free loopback ports; each caller gets
	// the whole list through the chassis' static discovery (--ocp a,b).
	Replicas map[string]int
	// AsliteDataDir, when set, makes aslite durable (chf aslite
	// --data-dir): its balances survive a kill and restart. AsliteCommit
	// is its --commit (default sync).
	AsliteDataDir string
	AsliteCommit  string
	// TLSDir, when set, runs every service over TLS with mTLS between
	// them, with the CA and certificate in this directory (made there
	// when it has none: tlsconfig.Dir).
	TLSDir string
	// GOMAXPROCS is each service process's --gomaxprocs. 0 = its share
	// of the CPUs of the runner's affinity mask, max(1, CPUs / processes)
	// (aslite and every instance counted; the loadgen is not): on one box
	// the processes share the cores, as pods share a node, each with its
	// slice of it as its CPU limit, which is what Go would size itself
	// from in a pod. Negative = Go's default (every process one P per
	// CPU).
	GOMAXPROCS int
	// RuntimeProfile is every service process's --runtime-profile (the
	// zero value: sched.Production). Production, the services' default,
	// is not passed, so that a chf binary older than the flag (a gate's
	// baseline) still starts; a --runtime-profile in Args overrides it.
	RuntimeProfile sched.Profile
	// Logs receives the children's log lines, prefixed with their name
	// (default os.Stderr; io.Discard to drop).
	Logs io.Writer
	// ReadyTimeout bounds start-up (default 2 minutes plus a second per
	// ProvisionRate accounts, so 20 million get 8m40s).
	ReadyTimeout time.Duration
	// Logger for the runner's own messages (default slog.Default()).
	Logger *slog.Logger
}

// Default values.
const (
	DefaultNchf     = "127.0.0.1:8080"
	DefaultAccounts = 100_000
	DefaultBalance  = 100_000_000
	DefaultFirst    = "imsi-001010000000001"
)

// ErrChildExited is wrapped by Err when a child stopped on its own.
var ErrChildExited = errors.New("local: a CHF process exited")

// ErrConfig is wrapped by Start for a Config it cannot run.
var ErrConfig = errors.New("local: invalid config")

// ErrNoInstance is returned by Kill, Restart, Pause and Resume for a name
// that is no instance.
var ErrNoInstance = errors.New("local: no such instance")

// CHF is a running local CHF.
type CHF struct {
	// NchfURL is the Nchf_ConvergedCharging apiRoot + base path
	// (http://host:port/nchf-convergedcharging/v3/chargingdata).
	NchfURL string
	// BalanceURL is the balance inquiry base (http://host:port/chf/v1/accounts/).
	BalanceURL string
	// Addrs holds the host:port of each service ("aslite", "abm", "ocp", "cgw", "diameter"):
	// its first instance when it has replicas. With another store than
	// aslite, "aerospike" is the first of the store's seeds.
	Addrs map[string]string
	// Instances holds the host:port of every instance of each service.
	Instances map[string][]string

	cfg      Config
	log      *slog.Logger
	children []*child
	done     chan struct{}
	doneOnce sync.Once
	mu       sync.Mutex
	err      error
	stopping bool
	// The store: asd when started here, the seeds the ABM uses, and
	// what Store reports.
	asd     *asd.Cluster
	asdStop sync.Once
	seeds   []string
	store   StoreInfo
}

type child struct {
	name    string // instance name: the service ("ocp"), or "ocp-2" for a replica
	service string
	addr    string // where it answers readiness
	diam    string // the cgw's Diameter address, if any
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
	tail    *tail
	// expected marks an exit caused by Kill: not a failure of the CHF.
	expected bool
}

// Start starts the services in order (aslite, abm, provisioning, ocp,
// cgw), each once the previous is ready, and returns when the CGW's
// /readyz answers 200. On failure everything started is stopped.
func Start(ctx context.Context, cfg Config) (*CHF, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	c := &CHF{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), Addrs: map[string]string{
		"abm": cfg.ABM, "ocp": cfg.OCP, "cgw": cfg.Nchf,
	}, Instances: map[string][]string{}}
	if cfg.Store.Kind == StoreAslite && cfg.Store.External == "" {
		c.Addrs["aslite"], c.Instances["aslite"] = cfg.Aerospike, []string{cfg.Aerospike}
	}
	if cfg.Diameter != "" {
		c.Addrs["diameter"] = cfg.Diameter
	}
	for _, svc := range []string{"abm", "ocp", "cgw", "diameter"} {
		first := c.Addrs[svc]
		if first == "" {
			continue
		}
		n := cfg.Replicas[svc]
		if svc == "diameter" {
			n = cfg.Replicas["cgw"]
		}
		addrs := []string{first}
		for i := 1; i < n; i++ {
			a, err := resolvePort("127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, a)
		}
		c.Instances[svc] = addrs
	}
	if cfg.GOMAXPROCS == 0 {
		procs := 0
		for _, addrs := range c.Instances {
			procs += len(addrs)
		}
		procs -= len(c.Instances["diameter"]) // a front of the cgw, no process
		if cfg.Store.Kind == StoreAsd {
			procs += cfg.Store.Nodes
		}
		c.cfg.GOMAXPROCS = ShareGOMAXPROCS(runtime.NumCPU(), procs)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	if err := c.start(ctx); err != nil {
		c.Stop()
		if cerr := c.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	c.NchfURL = cfg.scheme() + cfg.Nchf + "/nchf-convergedcharging/v3/chargingdata"
	c.BalanceURL = cfg.scheme() + cfg.Nchf + "/chf/v1/accounts/"
	return c, nil
}

func (cfg *Config) defaults() error {
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find the chf executable: %w", err)
		}
		cfg.Exe = exe
	}
	if cfg.Nchf == "" {
		cfg.Nchf = DefaultNchf
	}
	if cfg.Accounts == 0 {
		cfg.Accounts = DefaultAccounts
	}
	if cfg.Balance == 0 {
		cfg.Balance = DefaultBalance
	}
	if cfg.First == "" {
		cfg.First = DefaultFirst
	}
	if cfg.Logs == nil {
		cfg.Logs = os.Stderr
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 2*time.Minute + time.Duration(max(cfg.Accounts, 0)/ProvisionRate)*time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for svc, n := range cfg.Replicas {
		if svc != "cgw" && svc != "ocp" && svc != "abm" {
			return fmt.Errorf("%w: replicas of %q: only cgw, ocp and abm can have replicas", ErrConfig, svc)
		}
		if n < 1 || n > 16 {
			return fmt.Errorf("%w: replicas of %s: %d, want 1..16", ErrConfig, svc, n)
		}
	}
	if cfg.AsliteCommit == "" {
		cfg.AsliteCommit = "sync"
	}
	if cfg.AsliteCommit != "sync" && cfg.AsliteCommit != "interval" {
		return fmt.Errorf("%w: aslite commit %q: want sync or interval", ErrConfig, cfg.AsliteCommit)
	}
	if err := cfg.Store.validate(); err != nil {
		return err
	}
	if err := cfg.RuntimeProfile.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.AsliteDataDir != "" && (cfg.Store.Kind != StoreAslite || cfg.Store.External != "") {
		return fmt.Errorf("%w: aslite's data directory without aslite", ErrConfig)
	}
	if cfg.TLSDir != "" {
		if err := cfg.setupTLS(); err != nil {
			return err
		}
	}
	var err error
	for _, a := range []*string{&cfg.Nchf, &cfg.OCP, &cfg.ABM, &cfg.Aerospike, &cfg.Diameter} {
		if a == &cfg.Diameter && *a == "" {
			continue
		}
		if *a, err = resolvePort(*a); err != nil {
			return err
		}
	}
	return nil
}

// resolvePort replaces an empty address or port 0 by a free loopback port,
// never one it has already given out in this process: the kernel may hand
// a just-closed port out again at once, and two services told to listen
// on one port fail to start (seen: the OCP and the CGW both given
// 127.0.0.1:34569). Another process may still take the port before the
// service binds it; the service then fails to start with the address in
// its error.
func resolvePort(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("cannot parse address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	// The listeners stay open until a new port is found, so each retry
	// gets another one.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 64 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", fmt.Errorf("cannot find a free port on %s: %w", host, err)
		}
		held = append(held, ln)
		a := ln.Addr().String()
		givenPorts.Lock()
		dup := givenPorts.m[a]
		if !dup {
			givenPorts.m[a] = true
		}
		givenPorts.Unlock()
		if !dup {
			return a, nil
		}
	}
	return "", fmt.Errorf("cannot find a free port on %s that was not given to a service already", host)
}

// FreePort returns a free loopback host:port that no other caller in this
// process (chf local's services included) has been given.
func FreePort() (string, error) { return resolvePort("127.0.0.1:0") }

// givenPorts are the addresses resolvePort has given out.
var givenPorts = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

func (c *CHF) start(ctx context.Context) error {
	cfg := c.cfg
	if err := c.startStore(ctx); err != nil {
		return err
	}
	if _, ok := c.Addrs["aslite"]; !ok {
		c.Addrs["aerospike"] = c.seeds[0]
	}
	c.readStoreInfo(ctx)
	c.log.Info("store", "kind", c.store.Kind, "hosts", strings.Join(c.store.Hosts, ","), "namespace", c.store.Namespace, "build", c.store.Build)
	if err := c.startService(ctx, "abm", []string{"--aerospike", strings.Join(c.seeds, ","), "--as-namespace", cfg.Store.Namespace}); err != nil {
		return err
	}
	if cfg.Accounts > 0 {
		if err := c.provision(ctx); err != nil {
			return err
		}
	}
	if len(cfg.Plans) > 0 {
		if err := c.provisionPlans(ctx); err != nil {
			return err
		}
	}
	if err := c.startService(ctx, "ocp", []string{"--abm", strings.Join(c.Instances["abm"], ",")}); err != nil {
		return err
	}
	return c.startService(ctx, "cgw", []string{"--ocp", strings.Join(c.Instances["ocp"], ",")})
}

// startService starts every instance of svc with args (and its own
// --listen) and waits until each is ready.
func (c *CHF) startService(ctx context.Context, svc string, args []string) error {
	addrs := c.Instances[svc]
	for i, addr := range addrs {
		ch := &child{name: svc, service: svc, addr: addr}
		if len(addrs) > 1 {
			ch.name = fmt.Sprintf("%s-%d", svc, i+1)
		}
		if svc == "aslite" {
			ch.args = args // it carries its --listen
		} else {
			ch.args = append([]string{"--listen", addr}, args...)
		}
		if c.cfg.GOMAXPROCS > 0 { // before cfg.Args, which may override it
			ch.args = append([]string{"--gomaxprocs", strconv.Itoa(c.cfg.GOMAXPROCS)}, ch.args...)
		}
		if p := c.cfg.RuntimeProfile; p != "" && p != sched.Production { // the same
			ch.args = append([]string{"--" + sched.FlagName, string(p)}, ch.args...)
		}
		if svc == "ocp" && c.cfg.CDRDir != "" {
			dir := c.cfg.CDRDir
			if len(addrs) > 1 {
				dir = filepath.Join(dir, ch.name)
			}
			ch.args = append(ch.args, "--cdr-dir", dir)
		}
		if svc == "cgw" && len(c.Instances["diameter"]) > i {
			ch.diam = c.Instances["diameter"][i]
			ch.args = append(ch.args, "--diameter", ch.diam)
		}
		if err := c.spawn(ch); err != nil {
			return err
		}
	}
	c.mu.Lock()
	var started []*child
	for _, ch := range c.children {
		if ch.service == svc {
			started = append(started, ch)
		}
	}
	c.mu.Unlock()
	for _, ch := range started {
		if err := c.ready(ctx, ch); err != nil {
			return err
		}
	}
	return nil
}

// ready waits until ch answers: aslite accepts TCP, the others' /readyz
// answers 200 (and the cgw's Diameter port accepts TCP).
func (c *CHF) ready(ctx context.Context, ch *child) error {
	if ch.service == "aslite" {
		return c.waitTCP(ctx, ch.name, ch.addr)
	}
	if err := c.waitReady(ctx, ch.name, ch.addr); err != nil {
		return err
	}
	if ch.diam != "" { // the cgw opens it just after its HTTP port
		return c.waitTCP(ctx, ch.name, ch.diam)
	}
	return nil
}

// ProvisionRate is the provisioning rate (accounts per second) the
// default start-up deadline allows for: a tenth of what a small loaded
// machine was measured to do (docs/measurements/2026-12-01-busy-hour.md),
// so a slower machine still provisions within the deadline.
const ProvisionRate = 50_000

// provision writes the accounts through the abm provisioning code,
// straight into the store, logging progress every 10%.
func (c *CHF) provision(ctx context.Context) error {
	cl, err := c.dialStore(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	start := time.Now()
	tenth := 0
	progress := func(done, total int) {
		if t := 10 * done / max(total, 1); t > tenth && t < 10 {
			tenth = t
			c.log.Info("provisioning", "done", done, "of", total, "rate_per_s", int(float64(done)/max(time.Since(start).Seconds(), 1e-9)))
		}
	}
	res, err := provision.Run(ctx, cl, provision.Config{
		First: c.cfg.First, Count: c.cfg.Accounts, Balance: c.cfg.Balance, Overwrite: true, Namespace: c.cfg.Store.Namespace,
	}, progress)
	if err != nil {
		return fmt.Errorf("cannot provision %d accounts: %w", c.cfg.Accounts, err)
	}
	c.log.Info("provisioned accounts", "created", res.Created, "first", c.cfg.First, "balance", c.cfg.Balance, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Plan is a part of the provisioned range written again, before the OCP
// starts, with its own balance, credit limit (postpaid) and buckets
// (chf.Bucket.Expires a validity in seconds, 0 = none).
type Plan struct {
	Offset, Count int // subscribers [Offset, Offset+Count) of the range
	Balance       int64
	CreditLimit   int64
	Buckets       []chf.Bucket
}

// provisionPlans writes the plans' accounts over the range's.
func (c *CHF) provisionPlans(ctx context.Context) error {
	cl, err := c.dialStore(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, pl := range c.cfg.Plans {
		if pl.Count <= 0 {
			continue
		}
		first, err := provision.SUPI(c.cfg.First, pl.Offset)
		if err != nil {
			return fmt.Errorf("cannot provision a plan at %d: %w", pl.Offset, err)
		}
		res, err := provision.Run(ctx, cl, provision.Config{First: first, Count: pl.Count, Balance: pl.Balance, Overwrite: true,
			Namespace: c.cfg.Store.Namespace, CreditLimit: pl.CreditLimit, Buckets: pl.Buckets}, nil)
		if err != nil {
			return fmt.Errorf("cannot provision %d accounts of a plan: %w", pl.Count, err)
		}
		c.log.Info("provisioned a plan", "created", res.Created, "first", first, "balance", pl.Balance, "credit_limit", pl.CreditLimit, "buckets", len(pl.Buckets))
	}
	return nil
}

// ShareGOMAXPROCS is the GOMAXPROCS of each of procs processes sharing
// cpus CPUs: max(1, cpus/procs).
func ShareGOMAXPROCS(cpus, procs int) int {
	if procs <= 0 {
		return max(1, cpus)
	}
	return max(1, cpus/procs)
}

// spawn starts ch's process and records it (replacing an earlier
// process of the same instance, which Restart relies on).
func (c *CHF) spawn(ch *child) error {
	name := ch.name
	args := append(append([]string{ch.service}, ch.args...), c.cfg.Args[ch.service]...)
	cmd := exec.Command(c.cfg.Exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The children read their flags, not the runner's CHF_* environment.
	env := os.Environ()[:0:0]
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHF_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	t := &tail{}
	w := &prefixWriter{prefix: name + " | ", out: c.cfg.Logs, tail: t}
	cmd.Stdout = w
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start %s: %w", name, err)
	}
	c.mu.Lock()
	ch.cmd, ch.exited, ch.tail, ch.err, ch.expected = cmd, make(chan struct{}), t, nil, false
	found := false
	for _, o := range c.children {
		found = found || o == ch
	}
	if !found {
		c.children = append(c.children, ch)
	}
	c.mu.Unlock()
	exited := ch.exited
	go func() {
		werr := cmd.Wait()
		c.mu.Lock()
		ch.err = werr
		stopping := c.stopping || ch.expected
		if !stopping && c.err == nil {
			reason := "exit status 0"
			if werr != nil {
				reason = werr.Error()
			}
			c.err = fmt.Errorf("%w: %s (pid %d): %s%s", ErrChildExited, name, cmd.Process.Pid, reason, t.String())
		}
		c.mu.Unlock()
		close(exited)
		if !stopping {
			c.doneOnce.Do(func() { close(c.done) })
		}
	}()
	c.log.Info("started", "service", name, "pid", cmd.Process.Pid, "args", strings.Join(args[1:], " "))
	return nil
}

// Names returns the instance names of svc ("ocp", or "ocp-1", "ocp-2"
// with replicas) in start order.
func (c *CHF) Names(svc string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	if svc == StoreAsd && c.asd != nil {
		for i := range c.cfg.Store.Nodes {
			out = append(out, c.storeNodeName(i))
		}
		return out
	}
	for _, ch := range c.children {
		if ch.service == svc {
			out = append(out, ch.name)
		}
	}
	return out
}

func (c *CHF) find(name string) (*child, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.children {
		if ch.name == name {
			return ch, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNoInstance, name)
}

// Kill kills instance name with SIGKILL (its whole process group) and
// waits until it is gone. The exit is not a failure of the CHF: Done
// stays open. Restart starts it again.
func (c *CHF) Kill(name string) error {
	if _, i, ok := c.StoreNode(name); ok {
		if err := c.asd.Node(i).Kill(); err != nil {
			return fmt.Errorf("cannot kill %s: %w", name, err)
		}
		return nil
	}
	ch, err := c.find(name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	ch.expected = true
	pid, exited := ch.cmd.Process.Pid, ch.exited
	c.mu.Unlock()
	syscall.Kill(-pid, syscall.SIGCONT) // a stopped process dies only once continued
	syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("cannot kill %s (pid %d): still running after 10s", name, pid)
	}
}

// Restart starts instance name again, with the same flags and address,
// after Kill, and waits until it is ready.
func (c *CHF) Restart(ctx context.Context, name string) error {
	if _, i, ok := c.StoreNode(name); ok {
		if err := c.asd.Node(i).Restart(ctx); err != nil {
			return fmt.Errorf("cannot restart %s: %w", name, err)
		}
		return nil
	}
	ch, err := c.find(name)
	if err != nil {
		return err
	}
	select {
	case <-ch.exited:
	default:
		return fmt.Errorf("cannot restart %s: it is running", name)
	}
	if err := c.spawn(ch); err != nil {
		return err
	}
	return c.ready(ctx, ch)
}

// Pause stops instance name with SIGSTOP (a peer that hangs: its sockets
// stay open, nothing answers); Resume continues it with SIGCONT.
func (c *CHF) Pause(name string) error { return c.signal(name, syscall.SIGSTOP) }

// Resume continues an instance Pause stopped.
func (c *CHF) Resume(name string) error { return c.signal(name, syscall.SIGCONT) }

func (c *CHF) signal(name string, sig syscall.Signal) error {
	if _, i, ok := c.StoreNode(name); ok {
		n := c.asd.Node(i)
		err := n.Stop()
		if sig == syscall.SIGCONT {
			err = n.Cont()
		}
		if err != nil {
			return fmt.Errorf("cannot send %v to %s: %w", sig, name, err)
		}
		return nil
	}
	ch, err := c.find(name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	pid := ch.cmd.Process.Pid
	c.mu.Unlock()
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("cannot send %v to %s (pid %d): %w", sig, name, pid, err)
	}
	return nil
}

func (c *CHF) waitTCP(ctx context.Context, name, addr string) error {
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if err := c.pause(ctx, name); err != nil {
			return err
		}
	}
}

func (c *CHF) waitReady(ctx context.Context, name, addr string) error {
	hc, scheme, err := c.cfg.readyClient()
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	var last string
	for {
		resp, err := hc.Get(scheme + addr + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = strings.TrimSpace(string(b))
		} else {
			last = err.Error()
		}
		if err := c.pause(ctx, name); err != nil {
			return fmt.Errorf("%w (last: %s)", err, last)
		}
	}
}

// pause waits a little, failing when ctx ends or a child exited.
func (c *CHF) pause(ctx context.Context, name string) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("cannot start %s: not ready: %w", name, ctx.Err())
	case <-c.done:
		return c.Err()
	case <-time.After(50 * time.Millisecond):
		return nil
	}
}

// Done is closed when a child exits on its own (not through Stop).
func (c *CHF) Done() <-chan struct{} { return c.done }

// Err is the reason Done was closed (nil while all children run).
func (c *CHF) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Pids returns the process id of each running service.
func (c *CHF) Pids() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.children))
	for _, ch := range c.children {
		select {
		case <-ch.exited:
			continue // killed, not restarted yet
		default:
		}
		m[ch.name] = ch.cmd.Process.Pid
	}
	if c.asd != nil {
		for i := range c.cfg.Store.Nodes {
			if pid := c.asd.Node(i).PID(); pid > 0 {
				m[c.storeNodeName(i)] = pid
			}
		}
	}
	return m
}

// InstanceAddrs returns the host:port of every instance of services, by
// instance name as Pids names it (the service, or "ocp-2" for the second
// of several).
func (c *CHF) InstanceAddrs(services ...string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]string)
	for _, ch := range c.children {
		if slices.Contains(services, ch.service) {
			m[ch.name] = ch.addr
		}
	}
	return m
}

// Stop sends SIGTERM to every child in reverse start order, waits up to 10
// seconds for each, then kills the process group of any that remain. It
// returns the first child's error that is not the result of the stop.
func (c *CHF) Stop() error {
	c.mu.Lock()
	c.stopping = true
	children := append([]*child(nil), c.children...)
	c.mu.Unlock()
	var errs []error
	for i := len(children) - 1; i >= 0; i-- {
		ch := children[i]
		select {
		case <-ch.exited:
			continue
		default:
		}
		pid := ch.cmd.Process.Pid
		syscall.Kill(-pid, syscall.SIGCONT) // a paused child must run to stop
		syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-ch.exited:
			if ch.err != nil {
				errs = append(errs, fmt.Errorf("%s stopped with %v%s", ch.name, ch.err, ch.tail.String()))
			}
		case <-time.After(10 * time.Second):
			c.log.Warn("child did not stop on SIGTERM; killing", "service", ch.name, "pid", pid)
			syscall.Kill(-pid, syscall.SIGKILL)
			<-ch.exited
		}
	}
	// Reap anything left in the children's groups (grandchildren).
	for _, ch := range children {
		syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
	}
	c.mu.Lock()
	cl := c.asd
	c.mu.Unlock()
	if cl != nil { // after the ABM, its only client
		c.asdStop.Do(func() {
			if err := cl.Close(); err != nil {
				errs = append(errs, fmt.Errorf("cannot stop asd: %w", err))
			}
		})
	}
	return errors.Join(errs...)
}

// tail keeps the last lines a child logged, for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 8 {
		t.lines = t.lines[1:]
	}
	t.lines = append(t.lines, line)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "; last log lines:\n  " + strings.Join(t.lines, "\n  ")
}

// prefixWriter writes whole lines to out with a prefix.
type prefixWriter struct {
	mu     sync.Mutex
	prefix string
	out    io.Writer
	tail   *tail
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.tail.add(line)
		bw := bufio.NewWriter(w.out)
		bw.WriteString(w.prefix)
		bw.WriteString(line)
		bw.WriteByte('\n')
		bw.Flush()
	}
	return len(p), nil
}
