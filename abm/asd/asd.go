// Package asd starts and stops the real Aerospike Community Edition server
// (asd) on loopback for tests and local runs: one node or a mesh cluster of
// several, each with its own free ports and work directory, and waits until
// the cluster has formed before handing it over.
//
// A Cluster's methods are safe for concurrent use, except that Close must not
// run concurrently with Node methods that start or signal processes.
package asd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvBinary names the environment variable that overrides the asd binary's
// path (DefaultBinary).
const EnvBinary = "CHF_TEST_ASD"

// ErrNoBinary is returned by DefaultBinary when no asd binary is found.
var ErrNoBinary = errors.New("asd: no Aerospike server binary")

// Options configures Start. Zero values take the documented defaults.
type Options struct {
	Binary            string // path to asd (required; see DefaultBinary)
	Dir               string // work directory root; node i lives in Dir/node<i>/ (required)
	Nodes             int    // number of nodes, default 1; several form a mesh cluster on loopback
	Namespace         string // default "chf"
	ReplicationFactor int    // default min(2, Nodes)
	DataSize          string // memory storage data-size, default "1G"
	// NsupPeriod is the namespace's nsup-period in seconds, default 120.
	// A negative value writes nsup-period 0, with which asd refuses every
	// write that carries a TTL (FAIL_FORBIDDEN).
	NsupPeriod int
	// StartTimeout bounds Start and Restart's wait for readiness, default 60s
	// (also bounded by the context).
	StartTimeout time.Duration
	Log          *slog.Logger // default slog.Default()
}

// DefaultBinary returns the asd binary to use: $CHF_TEST_ASD when set, else
// <repoRoot>/../shared/aerospike/asd. It returns an error wrapping
// ErrNoBinary naming both places when neither exists.
func DefaultBinary(repoRoot string) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		return "", fmt.Errorf("cannot find asd: %s=%q does not name a file: %w", EnvBinary, p, ErrNoBinary)
	}
	p := filepath.Join(repoRoot, "..", "shared", "aerospike", "asd")
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p, nil
	}
	return "", fmt.Errorf("cannot find asd: %s is not set and %s does not exist: %w", EnvBinary, p, ErrNoBinary)
}

// Cluster is a set of running asd nodes started by Start.
type Cluster struct {
	o     Options
	nodes []*Node
	log   *slog.Logger
}

// Node is one asd process of a Cluster.
type Node struct {
	c     *Cluster
	i     int
	dir   string
	conf  string
	logf  string
	ports ports

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exits
	err  error         // cmd.Wait's result, valid after done
}

type ports struct{ service, fabric, heartbeat, admin int }

func (o *Options) defaults() error {
	if o.Binary == "" {
		return errors.New("cannot start asd: Options.Binary is empty (see asd.DefaultBinary)")
	}
	if o.Dir == "" {
		return errors.New("cannot start asd: Options.Dir is empty")
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 0 || o.Nodes > 16 {
		return fmt.Errorf("cannot start asd: Options.Nodes=%d out of range 1..16", o.Nodes)
	}
	if o.Namespace == "" {
		o.Namespace = "chf"
	}
	if o.ReplicationFactor == 0 {
		o.ReplicationFactor = min(2, o.Nodes)
	}
	if o.ReplicationFactor < 1 || o.ReplicationFactor > o.Nodes {
		return fmt.Errorf("cannot start asd: Options.ReplicationFactor=%d out of range 1..%d", o.ReplicationFactor, o.Nodes)
	}
	if o.DataSize == "" {
		o.DataSize = "1G"
	}
	if o.NsupPeriod == 0 {
		o.NsupPeriod = 120
	}
	if o.NsupPeriod < 0 {
		o.NsupPeriod = 0
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return nil
}

// Start writes a configuration per node (free loopback ports, work
// directory with smd/), starts the nodes and waits until every node answers
// info requests, reports cluster_size equal to Nodes and the namespace has no
// migrations left. On failure it stops whatever it started; the logs stay in
// Dir.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("cannot start asd: %w", err)
	}
	o.Dir = dir
	c := &Cluster{o: o, log: o.Log.With("component", "asd")}
	all, err := freePorts(4 * o.Nodes)
	if err != nil {
		return nil, fmt.Errorf("cannot start asd: %w", err)
	}
	for i := range o.Nodes {
		n := &Node{c: c, i: i, dir: filepath.Join(o.Dir, fmt.Sprintf("node%d", i)),
			ports: ports{all[4*i], all[4*i+1], all[4*i+2], all[4*i+3]}}
		n.conf = filepath.Join(n.dir, "aerospike.conf")
		n.logf = filepath.Join(n.dir, "aerospike.log")
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.writeConfig(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.waitReady(ctx, o.Nodes, true); err != nil {
		c.Close()
		return nil, err
	}
	c.log.Info("asd cluster ready", "nodes", o.Nodes, "hosts", strings.Join(c.Hosts(), ","), "dir", o.Dir)
	return c, nil
}

// freePorts reserves n distinct loopback ports by listening on port 0 and
// closing the listeners; another process may take one before asd binds it,
// which shows as a start failure naming the port in the node's log.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cannot reserve a loopback port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func (n *Node) writeConfig() error {
	o := n.c.o
	for _, d := range []string{filepath.Join(n.dir, "smd"), filepath.Join(n.dir, "usr", "udf", "lua")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cannot create asd work directory: %w", err)
		}
	}
	var seeds strings.Builder
	for _, m := range n.c.nodes {
		fmt.Fprintf(&seeds, "\t\tmesh-seed-address-port 127.0.0.1 %d\n", m.ports.heartbeat)
	}
	conf := fmt.Sprintf(`# generated by abm/asd
service {
	run-as-daemon false
	proto-fd-max 1024
	work-directory %s
	cluster-name chf-asd
}
logging {
	file %s {
		context any info
	}
}
mod-lua {
	user-path %s
}
network {
	service {
		address 127.0.0.1
		port %d
	}
	heartbeat {
		mode mesh
		address 127.0.0.1
		port %d
%s		interval 150
		timeout 10
	}
	fabric {
		address 127.0.0.1
		port %d
	}
	admin {
		address 127.0.0.1
		port %d
	}
}
namespace %s {
	replication-factor %d
	nsup-period %d
	storage-engine memory {
		data-size %s
	}
}
`, n.dir, n.logf, filepath.Join(n.dir, "usr", "udf", "lua"), n.ports.service, n.ports.heartbeat, seeds.String(),
		n.ports.fabric, n.ports.admin, o.Namespace, o.ReplicationFactor, o.NsupPeriod, o.DataSize)
	if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("cannot write asd config: %w", err)
	}
	return nil
}

// start launches the node's process; it does not wait for readiness.
func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("cannot start asd node %d: already running (pid %d)", n.i, n.cmd.Process.Pid)
		}
	}
	out, err := os.OpenFile(filepath.Join(n.dir, "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cannot open asd console log: %w", err)
	}
	cmd := exec.Command(n.c.o.Binary, "--config-file", n.conf, "--foreground")
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("cannot start asd node %d: %w", n.i, err)
	}
	done := make(chan struct{})
	n.cmd, n.done = cmd, done
	go func() {
		err := cmd.Wait()
		out.Close()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(done)
	}()
	n.c.log.Debug("asd node started", "node", n.i, "pid", cmd.Process.Pid, "port", n.ports.service)
	return nil
}

// alive reports whether the node's process has not exited.
func (n *Node) alive() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exitErr returns why a node's process ended, with the tail of its log.
func (n *Node) exitErr() error {
	n.mu.Lock()
	err := n.err
	n.mu.Unlock()
	return fmt.Errorf("asd node %d exited (%v); log %s: %s", n.i, err, n.logf, tail(n.logf, 600))
}

func tail(path string, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		cb, cerr := os.ReadFile(filepath.Join(filepath.Dir(path), "console.log"))
		if cerr != nil {
			return "(no log: " + err.Error() + ")"
		}
		b = cb
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}

// waitReady polls every live node until each reports cluster_size == size,
// the namespace answers and, when settled, no migrations remain.
func (c *Cluster) waitReady(ctx context.Context, size int, settled bool) error {
	var last error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		last = c.ready(ctx, size, settled)
		if last == nil {
			return nil
		}
		for _, n := range c.nodes {
			if n.cmd != nil && !n.alive() {
				return fmt.Errorf("cannot start asd: %w", n.exitErr())
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot start asd: not ready before the deadline (%v): %w", last, ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *Cluster) ready(ctx context.Context, size int, settled bool) error {
	for _, n := range c.nodes {
		if !n.alive() {
			continue
		}
		st, err := c.infoMap(ctx, n.i, "statistics")
		if err != nil {
			return err
		}
		if st["cluster_size"] != strconv.Itoa(size) {
			return fmt.Errorf("node %d: cluster_size %q, want %d", n.i, st["cluster_size"], size)
		}
		if v := st["migrate_partitions_remaining"]; settled && v != "" && v != "0" {
			return fmt.Errorf("node %d: migrate_partitions_remaining=%s", n.i, v)
		}
		if st["cluster_integrity"] != "" && st["cluster_integrity"] != "true" {
			return fmt.Errorf("node %d: cluster_integrity %q", n.i, st["cluster_integrity"])
		}
		ns, err := c.infoMap(ctx, n.i, "namespace/"+c.o.Namespace)
		if err != nil {
			return err
		}
		if len(ns) == 0 {
			return fmt.Errorf("node %d: namespace %s not reported", n.i, c.o.Namespace)
		}
		for _, k := range []string{"migrate_tx_partitions_remaining", "migrate_rx_partitions_remaining"} {
			if v := ns[k]; settled && v != "" && v != "0" {
				return fmt.Errorf("node %d: %s=%s", n.i, k, v)
			}
		}
		if v := ns["pending_quiesce"]; v == "true" {
			return fmt.Errorf("node %d: pending quiesce", n.i)
		}
		// Clients are refused ("not yet fully initialized") until the
		// partition map is balanced; the client's tend reads the same
		// "partition-generation" and "replicas" keys, and the node is ready
		// once it owns a partition map (generation not -1).
		pg, err := c.Info(ctx, n.i, "partition-generation")
		if err != nil {
			return err
		}
		if pg == "" || pg == "-1" {
			return fmt.Errorf("node %d: partition-generation %q", n.i, pg)
		}
	}
	return nil
}

// Hosts returns "127.0.0.1:port" of every node's service port.
func (c *Cluster) Hosts() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Host()
	}
	return out
}

// Namespace returns the namespace the cluster serves.
func (c *Cluster) Namespace() string { return c.o.Namespace }

// Dir returns the work directory root.
func (c *Cluster) Dir() string { return c.o.Dir }

// Len returns the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Node returns node i (0-based); it panics when i is out of range.
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Host returns the node's "127.0.0.1:port" service address.
func (n *Node) Host() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.ports.service)) }

// Dir returns the node's work directory (config, log, smd).
func (n *Node) Dir() string { return n.dir }

// LogFile returns the path of the node's server log.
func (n *Node) LogFile() string { return n.logf }

// PID returns the node's process id, 0 when it never started.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("cannot signal asd node %d: not started", n.i)
	}
	select {
	case <-done:
		return fmt.Errorf("cannot signal asd node %d: not running", n.i)
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cannot signal asd node %d: %w", n.i, err)
	}
	return nil
}

// Kill sends SIGKILL and waits (up to 10 s) for the process to exit.
func (n *Node) Kill() error {
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return n.wait(10 * time.Second)
}

// Stop sends SIGSTOP: the process freezes, its sockets stay open.
func (n *Node) Stop() error { return n.signal(syscall.SIGSTOP) }

// Cont sends SIGCONT to a node frozen by Stop.
func (n *Node) Cont() error { return n.signal(syscall.SIGCONT) }

func (n *Node) wait(d time.Duration) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("cannot stop asd node %d: still running after %v", n.i, d)
	}
}

// terminate sends SIGCONT and SIGTERM, then SIGKILL after d.
func (n *Node) terminate(d time.Duration) error {
	if !n.alive() {
		return nil
	}
	_ = n.signal(syscall.SIGCONT)
	_ = n.signal(syscall.SIGTERM)
	if n.wait(d) == nil {
		return nil
	}
	n.c.log.Warn("asd node ignored SIGTERM, killing it", "node", n.i, "pid", n.PID())
	_ = n.signal(syscall.SIGKILL)
	return n.wait(10 * time.Second)
}

// Restart starts a node that is no longer running (after Kill, or a crash)
// with the same config and ports and waits until the whole cluster has it
// back (cluster_size equal to the node count, a partition map); the
// migrations that follow run on (MigrationsRemaining): under load they
// can outlast any start timeout. A running node is terminated first.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.terminate(10 * time.Second); err != nil {
		return err
	}
	if err := n.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, n.c.o.StartTimeout)
	defer cancel()
	if err := n.c.waitReady(ctx, len(n.c.nodes), false); err != nil {
		return fmt.Errorf("cannot restart asd node %d: %w", n.i, err)
	}
	return nil
}

// Info sends one info-protocol request to node i and returns the value for
// cmd ("" when the server does not know it). Each call uses its own
// connection.
func (c *Cluster) Info(ctx context.Context, node int, cmd string) (string, error) {
	if node < 0 || node >= len(c.nodes) {
		return "", fmt.Errorf("cannot request asd info: node %d out of range", node)
	}
	return Info(ctx, c.nodes[node].Host(), cmd)
}

// infoMap requests cmd and parses "k=v;k=v" into a map.
func (c *Cluster) infoMap(ctx context.Context, node int, cmd string) (map[string]string, error) {
	v, err := c.Info(ctx, node, cmd)
	if err != nil {
		return nil, err
	}
	return ParsePairs(v), nil
}

// ParsePairs parses an info value "k=v;k=v;..." into a map.
func ParsePairs(v string) map[string]string {
	m := make(map[string]string)
	for _, kv := range strings.Split(v, ";") {
		k, val, ok := strings.Cut(kv, "=")
		if ok {
			m[k] = val
		}
	}
	return m
}

// Info sends one info-protocol request (version 2, type 1) for cmd to host
// and returns its value. The deadline is the context's, at most 5 s.
func Info(ctx context.Context, host, cmd string) (string, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return "", fmt.Errorf("cannot request asd info %q: %w", cmd, err)
	}
	defer conn.Close()
	dl := time.Now().Add(5 * time.Second)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	conn.SetDeadline(dl)
	body := cmd + "\n"
	req := make([]byte, 8, 8+len(body))
	req[0], req[1] = 2, 1
	putLen(req[2:8], len(body))
	req = append(req, body...)
	if _, err := conn.Write(req); err != nil {
		return "", fmt.Errorf("cannot request asd info %q: %w", cmd, err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return "", fmt.Errorf("cannot read asd info %q: %w", cmd, err)
	}
	if hdr[0] != 2 || hdr[1] != 1 {
		return "", fmt.Errorf("cannot read asd info %q: unexpected header %x", cmd, hdr)
	}
	var size int
	for _, b := range hdr[2:8] {
		size = size<<8 | int(b)
	}
	if size > 64<<20 {
		return "", fmt.Errorf("cannot read asd info %q: reply of %d bytes", cmd, size)
	}
	resp := make([]byte, size)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return "", fmt.Errorf("cannot read asd info %q: %w", cmd, err)
	}
	for _, line := range strings.Split(string(resp), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if ok && k == cmd {
			return v, nil
		}
		if !ok && line == cmd {
			return "", nil
		}
	}
	return "", nil
}

func putLen(b []byte, n int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(n)
		n >>= 8
	}
}

// MigrationsRemaining sums, over the live nodes, the node statistic
// migrate_partitions_remaining (8.1 reports it in "statistics"); a node
// that lacks it contributes its namespace's migrate_tx_partitions_remaining
// and migrate_rx_partitions_remaining instead.
func (c *Cluster) MigrationsRemaining(ctx context.Context) (int64, error) {
	var sum int64
	for _, n := range c.nodes {
		if !n.alive() {
			continue
		}
		st, err := c.infoMap(ctx, n.i, "statistics")
		if err != nil {
			return 0, fmt.Errorf("cannot count asd migrations: %w", err)
		}
		keys := []string{"migrate_partitions_remaining"}
		if _, ok := st[keys[0]]; !ok {
			st, err = c.infoMap(ctx, n.i, "namespace/"+c.o.Namespace)
			if err != nil {
				return 0, fmt.Errorf("cannot count asd migrations: %w", err)
			}
			keys = []string{"migrate_tx_partitions_remaining", "migrate_rx_partitions_remaining"}
		}
		for _, k := range keys {
			if v := st[k]; v != "" {
				x, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("cannot count asd migrations: node %d %s=%q", n.i, k, v)
				}
				sum += x
			}
		}
	}
	return sum, nil
}

// Build returns the server's edition and version from the first live node,
// e.g. "Aerospike Community Edition 8.1.1.2", or "" when no node answers.
func (c *Cluster) Build(ctx context.Context) string {
	for _, n := range c.nodes {
		if !n.alive() {
			continue
		}
		b, err := c.Info(ctx, n.i, "build")
		if err != nil || b == "" {
			continue
		}
		if e, err := c.Info(ctx, n.i, "edition"); err == nil && e != "" {
			return e + " " + b
		}
		return b
	}
	return ""
}

// Close stops every node (SIGTERM, SIGKILL after 15 s) and waits for them;
// the work directories and logs stay. It is idempotent.
func (c *Cluster) Close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.terminate(15 * time.Second)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
