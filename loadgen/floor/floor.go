// Package floor measures what a chain of processes costs this machine per
// request/response exchange before any CHF code runs: the wake-ups,
// system calls and loopback TCP of the hops alone.
//
// A CHF transaction crosses four processes (cgw, ocp, abm, the store),
// each woken at least twice (the request, then its peer's answer). At
// light load nothing batches, so every transaction pays those wake-ups
// in full, and on a virtual machine a wake-up of an idle CPU can cost
// tens of microseconds of CPU. Run beside a CHF measurement, the floor
// tells which part of the CHF's CPU per transaction is the platform's:
// a chain of relays that do nothing but pass a message on, as many as
// the CHF has processes, paced at the same rate.
//
// Two relays are measured:
//
//   - go: a Go process as the services run (GOMAXPROCS 1, and the
//     runtime profile of Options.Profile as sched.Runtime applies it),
//     reading and writing through net.Conn, so through Go's netpoller
//     and scheduler;
//   - raw: blocking read and write system calls on one locked thread (no
//     netpoller, no scheduler): what the kernel and the machine cost.
//
// The client sends one exchange at a time at the paced rate (a request
// waits for the previous answer, as at light load), times it from its
// scheduled send, and reads each relay's CPU from /proc over the window.
package floor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/internal/tail"
)

// ErrInput is returned for options out of range.
var ErrInput = errors.New("floor: invalid option")

// Relay kinds.
const (
	RelayGo  = "go"
	RelayRaw = "raw"
)

// Options configure a measurement.
type Options struct {
	Hops     int           // relay processes in the chain, 1..16
	Rate     float64       // exchanges a second, > 0 and at most MaxRate
	Duration time.Duration // measured window
	Warmup   time.Duration // paced exchanges before the window
	Size     int           // request and answer bytes, 1..MaxSize
	Relays   []string      // RelayGo and/or RelayRaw, measured in this order
	// Profile is the relays' runtime profile (--runtime-profile), as the
	// services apply it (sched.Runtime): sched.Production (the zero
	// value) changes nothing; sched.Lab runs them under SCHED_BATCH and
	// the go relays with Go's sysmon kept awake.
	Profile sched.Profile
	// Exe is the binary that serves a relay (`Exe floor relay ...`);
	// empty = this process's own executable.
	Exe string
	// Progress, when set, receives a line per measured relay kind.
	Progress io.Writer
}

// Limits of the options.
const (
	MaxHops = 16
	MaxRate = 100_000
	MaxSize = 1 << 20
)

// Defaults are a CHF's four processes at the light load of `make run`.
func Defaults() Options {
	return Options{Hops: 4, Rate: 1000, Duration: 10 * time.Second, Warmup: 2 * time.Second, Size: 400, Relays: []string{RelayGo, RelayRaw}}
}

// Validate checks the options, naming the flag of the first bad one.
func (o Options) Validate() error {
	switch {
	case o.Hops < 1 || o.Hops > MaxHops:
		return fmt.Errorf("%w: --hops %d: want 1..%d", ErrInput, o.Hops, MaxHops)
	case !(o.Rate > 0) || o.Rate > MaxRate:
		return fmt.Errorf("%w: --rate %g: want > 0 and at most %d", ErrInput, o.Rate, MaxRate)
	case o.Duration <= 0 || o.Duration > time.Hour:
		return fmt.Errorf("%w: --duration %v: want > 0 and at most 1h", ErrInput, o.Duration)
	case o.Warmup < 0 || o.Warmup > time.Hour:
		return fmt.Errorf("%w: --warmup %v: want 0..1h", ErrInput, o.Warmup)
	case o.Size < 1 || o.Size > MaxSize:
		return fmt.Errorf("%w: --size %d: want 1..%d", ErrInput, o.Size, MaxSize)
	case o.Profile.Validate() != nil:
		return fmt.Errorf("%w: --%s %q: want production or lab", ErrInput, sched.FlagName, o.Profile)
	case len(o.Relays) == 0:
		return fmt.Errorf("%w: --relays: name go, raw or both", ErrInput)
	}
	for _, r := range o.Relays {
		if r != RelayGo && r != RelayRaw {
			return fmt.Errorf("%w: --relays %q: want go, raw or go,raw", ErrInput, r)
		}
	}
	return nil
}

// Result is one relay kind's measurement.
type Result struct {
	Relay string `json:"relay"`
	// RuntimeProfile is the relays' runtime profile (Options.Profile);
	// SchedBatch says whether they ran under SCHED_BATCH (lab).
	RuntimeProfile string  `json:"runtime_profile"`
	SchedBatch     bool    `json:"sched_batch"`
	Hops           int     `json:"hops"`
	Size           int     `json:"size"`
	Offered        float64 `json:"offered_per_s"`
	Achieved       float64 `json:"achieved_per_s"`
	Exchanges      int64   `json:"exchanges"`
	// Late counts exchanges sent more than 2 ms after their scheduled
	// time (the previous one had not come back).
	Late int64 `json:"late"`
	// RTT is the exchange's latency from its scheduled send, in ms.
	RTT histogram.Summary `json:"rtt_ms"`
	// RelayUs is each relay process's CPU per exchange, first hop first,
	// in µs; TotalUs their sum (what the chain costs per exchange) and
	// PerHopUs its mean over the hops.
	RelayUs  []float64 `json:"relay_cpu_us_per_exchange"`
	TotalUs  float64   `json:"total_cpu_us_per_exchange"`
	PerHopUs float64   `json:"per_hop_cpu_us_per_exchange"`
	// ClientUs is the client process's CPU per exchange (pacing, timers
	// and its own system calls included), in µs.
	ClientUs float64 `json:"client_cpu_us_per_exchange"`
	// StealPercent is the CPU the hypervisor took over the window, in %
	// of one core (the machine's, not only the chain's).
	StealPercent float64 `json:"steal_percent"`
}

// Measure runs each relay kind of o in turn and returns their results.
// ctx cancels it (the relays are killed; results so far are returned with
// ctx's error).
func Measure(ctx context.Context, o Options) ([]Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cannot find this executable to start the relays: %w", err)
		}
		o.Exe = exe
	}
	var out []Result
	for _, kind := range o.Relays {
		r, err := measure(ctx, o, kind)
		if err != nil {
			return out, err
		}
		out = append(out, r)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%s relays: %.0f exchanges/s, CPU %.1f µs per exchange over %d hops\n", kind, r.Achieved, r.TotalUs, r.Hops)
		}
	}
	return out, nil
}

// relay is one started relay process.
type relay struct {
	cmd  *exec.Cmd
	addr string
	done chan error
}

// startRelay starts `exe floor relay` of kind, forwarding to next (empty:
// it answers itself), and waits for the address it listens on.
func startRelay(ctx context.Context, o Options, kind, next string) (*relay, error) {
	args := []string{"floor", "relay", "--kind", kind, "--size", strconv.Itoa(o.Size), "--" + sched.FlagName, o.Profile.String()}
	if next != "" {
		args = append(args, "--next", next)
	}
	cmd := exec.Command(o.Exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// go: as sched.Runtime runs the services under the profile (Serve
	// sets their one P and the policy), sysmon kept polling under lab;
	// raw: no asynchronous preemption (readFull).
	switch {
	case kind == RelayRaw:
		env := []string{"GODEBUG=asyncpreemptoff=1"}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GODEBUG=") {
				env = append(env, kv)
			}
		}
		cmd.Env = env
	case o.Profile.KeepSysmonAwake():
		cmd.Env = sched.SysmonAwakeEnv(os.Environ())
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("cannot start a relay: %w", err)
	}
	stderr := &tail.Buf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start a relay (%s): %w", o.Exe, err)
	}
	r := &relay{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { r.done <- cmd.Wait() }()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case a := <-addr:
		if a == "" {
			r.kill()
			return nil, fmt.Errorf("a relay exited before listening: %s", stderr.String())
		}
		r.addr = a
		return r, nil
	case <-t.C:
		r.kill()
		return nil, errors.New("a relay did not listen within 10 s")
	case <-ctx.Done():
		r.kill()
		return nil, ctx.Err()
	}
}

func (r *relay) kill() {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
}

// measure builds a chain of relays of kind, paces exchanges through it
// and reads the relays' CPU over the window.
func measure(ctx context.Context, o Options, kind string) (Result, error) {
	res := Result{Relay: kind, RuntimeProfile: o.Profile.String(), SchedBatch: o.Profile.SchedBatch(), Hops: o.Hops, Size: o.Size, Offered: o.Rate}
	relays := make([]*relay, o.Hops)
	defer func() {
		for _, r := range relays {
			if r != nil {
				r.kill()
			}
		}
	}()
	next := ""
	for i := o.Hops - 1; i >= 0; i-- { // the last first: each knows the next
		r, err := startRelay(ctx, o, kind, next)
		if err != nil {
			return res, err
		}
		relays[i], next = r, r.addr
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", relays[0].addr)
	if err != nil {
		return res, fmt.Errorf("cannot connect to the first relay: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	srcs := make([]*cpu.Proc, o.Hops)
	for i, r := range relays {
		srcs[i] = cpu.NewProc(fmt.Sprintf("relay%d", i+1), r.cmd.Process.Pid)
	}
	self := cpu.Self("client")
	buf := make([]byte, o.Size)
	gap := time.Duration(float64(time.Second) / o.Rate)
	// Warm-up, then the window.
	if _, _, err := pace(ctx, c, buf, gap, o.Warmup, nil); err != nil {
		return res, ctxErr(ctx, err)
	}
	before := make([]float64, o.Hops)
	for i, s := range srcs {
		if before[i], err = s.Seconds(ctx); err != nil {
			return res, err
		}
	}
	selfBefore, _ := self.Seconds(ctx)
	hostBefore, herr := cpu.ReadHost()
	h := histogram.New()
	start := time.Now()
	n, late, err := pace(ctx, c, buf, gap, o.Duration, h)
	elapsed := time.Since(start)
	if err != nil {
		return res, ctxErr(ctx, err)
	}
	if n == 0 {
		return res, errors.New("no exchange completed in the window")
	}
	res.Exchanges, res.Late = n, late
	res.Achieved = float64(n) / elapsed.Seconds()
	res.RTT = h.Summary()
	for i, s := range srcs {
		after, err := s.Seconds(ctx)
		if err != nil {
			return res, err
		}
		us := (after - before[i]) * 1e6 / float64(n)
		res.RelayUs = append(res.RelayUs, us)
		res.TotalUs += us
	}
	res.PerHopUs = res.TotalUs / float64(o.Hops)
	if selfAfter, err := self.Seconds(ctx); err == nil {
		res.ClientUs = (selfAfter - selfBefore) * 1e6 / float64(n)
	}
	if hostAfter, err := cpu.ReadHost(); err == nil && herr == nil {
		res.StealPercent = (hostAfter.Steal - hostBefore.Steal) / elapsed.Seconds() * 100
	}
	return res, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// lateAfter is how late a send may leave before it counts as late (as
// the load generator's --late threshold).
const lateAfter = 2 * time.Millisecond

// pace does one exchange every gap for d on c, each waiting for the
// previous answer, and records into h (when set) each one's latency from
// its scheduled send.
func pace(ctx context.Context, c net.Conn, buf []byte, gap, d time.Duration, h *histogram.Histogram) (n, late int64, err error) {
	start := time.Now()
	end := start.Add(d)
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for i := int64(0); ; i++ {
		due := start.Add(time.Duration(i) * gap)
		if !due.Before(end) {
			return n, late, nil
		}
		if w := time.Until(due); w > 0 {
			t.Reset(w)
			select {
			case <-t.C:
			case <-ctx.Done():
				return n, late, ctx.Err()
			}
		} else if -w > lateAfter {
			late++
		}
		if ctx.Err() != nil {
			return n, late, ctx.Err()
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(buf); err != nil {
			return n, late, fmt.Errorf("cannot send an exchange: %w", err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return n, late, fmt.Errorf("cannot read an exchange's answer: %w", err)
		}
		if h != nil {
			h.Record(time.Since(due))
		}
		n++
	}
}

// Serve is a relay process: it listens on loopback, prints its address on
// out, takes one connection and passes each size-byte message to next
// (dialled once) and its answer back, or answers it itself when next is
// empty, until the connection ends or ctx does. Under the lab profile
// its threads run under SCHED_BATCH (its parent sets GODEBUG).
func Serve(ctx context.Context, kind, next string, size int, profile sched.Profile, out io.Writer) error {
	if kind != RelayGo && kind != RelayRaw {
		return fmt.Errorf("%w: --kind %q: want go or raw", ErrInput, kind)
	}
	if size < 1 || size > MaxSize {
		return fmt.Errorf("%w: --size %d: want 1..%d", ErrInput, size, MaxSize)
	}
	if err := profile.Validate(); err != nil {
		return fmt.Errorf("%w: --%s: %w", ErrInput, sched.FlagName, err)
	}
	runtime.GOMAXPROCS(1)
	if profile.SchedBatch() {
		if err := sched.Batch(); err != nil {
			return fmt.Errorf("cannot run the relay under SCHED_BATCH (--runtime-profile production runs it without): %w", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("cannot listen: %w", err)
	}
	defer ln.Close()
	fmt.Fprintln(out, ln.Addr().String())
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	c, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("cannot accept the client: %w", err)
	}
	defer c.Close()
	var up net.Conn
	if next != "" {
		d := net.Dialer{Timeout: 5 * time.Second}
		if up, err = d.DialContext(ctx, "tcp", next); err != nil {
			return fmt.Errorf("cannot connect to the next relay %s: %w", next, err)
		}
		defer up.Close()
	}
	context.AfterFunc(ctx, func() {
		c.Close()
		if up != nil {
			up.Close()
		}
	})
	if kind == RelayGo {
		return relayGo(c, up, size)
	}
	return relayRaw(c, up, size)
}

func relayGo(c, up net.Conn, size int) error {
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			return nil // the client is done
		}
		if up != nil {
			if _, err := up.Write(buf); err != nil {
				return fmt.Errorf("cannot pass a message on: %w", err)
			}
			if _, err := io.ReadFull(up, buf); err != nil {
				return fmt.Errorf("cannot read the next relay's answer: %w", err)
			}
		}
		if _, err := c.Write(buf); err != nil {
			return nil
		}
	}
}

// relayRaw relays with blocking system calls on one locked thread: the
// sockets' descriptors are duplicated in blocking mode (File), so a read
// sleeps in the kernel instead of parking in Go's netpoller.
func relayRaw(c, up net.Conn, size int) error {
	runtime.LockOSThread()
	cf, err := c.(*net.TCPConn).File()
	if err != nil {
		return fmt.Errorf("cannot take the client's socket: %w", err)
	}
	defer cf.Close()
	cfd, ufd := int(cf.Fd()), -1
	if up != nil {
		uf, err := up.(*net.TCPConn).File()
		if err != nil {
			return fmt.Errorf("cannot take the next relay's socket: %w", err)
		}
		defer uf.Close()
		ufd = int(uf.Fd())
	}
	buf := make([]byte, size)
	for {
		if !readFull(cfd, buf) {
			return nil
		}
		if ufd >= 0 {
			if !writeAll(ufd, buf) || !readFull(ufd, buf) {
				return errors.New("cannot relay through the next relay")
			}
		}
		if !writeAll(cfd, buf) {
			return nil
		}
	}
}

// readFull and writeAll use raw system calls: the runtime is not told
// the thread blocks, so sysmon does not poll every 20 µs to retake its P
// (which it does while a thread sits in a syscall it was told of, and
// which costs more than the relaying here); the relay process runs with
// asynchronous preemption off, so no signal interrupts the read either.
func readFull(fd int, b []byte) bool { return rawAll(syscall.SYS_READ, fd, b) }

func writeAll(fd int, b []byte) bool { return rawAll(syscall.SYS_WRITE, fd, b) }

// rawAll reads (SYS_READ) or writes (SYS_WRITE) all of b on fd.
func rawAll(trap uintptr, fd int, b []byte) bool {
	for done := 0; done < len(b); {
		n, _, errno := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[done])), uintptr(len(b)-done))
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 || int(n) <= 0 {
			return false
		}
		done += int(n)
	}
	return true
}

// Write prints results as a table.
func Write(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "%-6s %5s %10s %10s %9s %9s %14s %12s %12s %8s\n", "relay", "hops", "offered/s", "achieved/s", "rtt p50", "rtt p99", "CPU µs/exch", "per hop", "client", "steal %")
	for _, r := range rs {
		fmt.Fprintf(w, "%-6s %5d %10.0f %10.0f %7.3fms %7.3fms %14.1f %12.1f %12.1f %8.1f\n", r.Relay, r.Hops, r.Offered, r.Achieved, r.RTT.P50, r.RTT.P99, r.TotalUs, r.PerHopUs, r.ClientUs, r.StealPercent)
	}
	if len(rs) > 0 {
		policy := "the kernel's default policy, Go's sysmon parking when idle"
		if rs[0].SchedBatch {
			policy = "SCHED_BATCH, Go's sysmon kept awake"
		}
		fmt.Fprintf(w, "relays' runtime profile %s (%s); CPU per exchange from /proc (10 ms ticks, over %d exchanges)\n", orProduction(rs[0].RuntimeProfile), policy, rs[0].Exchanges)
	}
	for _, r := range rs {
		parts := make([]string, len(r.RelayUs))
		for i, u := range r.RelayUs {
			parts[i] = fmt.Sprintf("%.1f", u)
		}
		fmt.Fprintf(w, "%s relays' CPU µs per exchange, first hop first: %s\n", r.Relay, strings.Join(parts, " "))
	}
}

// orProduction is p, or production for a result written before the
// profile was recorded.
func orProduction(p string) string {
	if p == "" {
		return string(sched.Production)
	}
	return p
}
