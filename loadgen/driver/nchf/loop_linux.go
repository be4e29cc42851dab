//go:build linux && (amd64 || arm64)

package nchf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// A loop is one engine worker's event loop (a driver.Worker) over its own
// HTTP/2 connections: non-blocking sockets outside Go's network poller,
// one epoll instance, h2c.NewPolledConn connections fed from one read
// buffer. Per wake-up it makes one epoll_pwait2 call (or, for a short
// wait it sleeps through, one nanosleep and one read per connection), one
// read per readable connection and, per Flush, one write per connection
// with queued requests. Connecting, the HTTP/2 handshake and every
// request are bounded by the driver's timeout, checked at each Poll: a
// server that accepts and never answers yields timeouts, never a blocked
// loop. Requests that arrive while their target's connection is being
// established wait for it (and expire with their own deadline).
//
// The wait is a raw system call: the Go scheduler sees the goroutine as
// running, never as a parked goroutine on an idle P. That matters on
// machines where system calls are expensive: a Go program whose every P
// goes idle between ticks wakes the runtime's sysmon thread (futex, then
// nanosleep polls) at each idle→busy transition, which cost more CPU per
// request than the requests themselves. The price: while the loop waits
// (at most maxPollWait), other goroutines get this P only when it yields,
// which it does before every wait (runtime.Gosched) when the loops hold
// every P (as many loops open as GOMAXPROCS: a yield then finds no idle
// P to wake and costs a trip through the scheduler); with a spare P
// other goroutines run there, and a yield would wake its thread (futex)
// every time. Without the yields, with every P held, the aggregator and
// the GC's workers would wait for sysmon's preemption (10 ms), and the
// preempted loop's sends with them. The wait ends early on a
// signal (EINTR), so stop-the-world and preemption requests are honoured.
// The thread's timer slack is set to 1 ns (prctl, renewed every
// slackRenew waits in case the goroutine moved to another thread), so a
// wait ends when asked, not up to the default 50 µs later: the engine
// sends each request at its due time.
type loop struct {
	d       *Driver
	h       *h2Conns
	epfd    int
	wakeR   int // pipe read end in the epoll set (data wakeData): Wake
	wakeW   int
	targets []ltarget
	conns   []*pconn // by epoll data index; nil slots are free
	dirty   []*pconn // conns with requests queued since the last Flush
	events  [64]syscall.EpollEvent
	rbuf    []byte
	oob     [64]byte  // recvmsg control messages
	rxAt    time.Time // arrival of the data being fed
	live    []*pconn  // every ready connection
	dialing int       // connections being established
	closed  bool
	procs   int    // GOMAXPROCS when the loop was made
	waits   uint32 // counts waits, to renew the timer slack now and then
	// early is how much sooner than asked a slept-through wait asks the
	// kernel to wake it: the median of the kernel's recent lateness
	// (sleepUntil), the rest spun.
	early time.Duration
	free  []*lcall
	// requests in flight or waiting for a connection, in deadline order
	// (every request has the same timeout: queue order)
	head, tail *lcall
	timeoutErr error
}

type ltarget struct {
	t       *h2Target
	conns   []*pconn // ready, in dial order: requests fill the first with room
	dial    *pconn   // being established
	pending []*lcall // waiting for dial
	retryAt time.Time
	lastErr error // of the last failed dial
}

// Connection states.
const (
	stConnecting = iota // TCP connect in progress
	stHandshake         // preface sent, waiting for the server's SETTINGS
	stReady
)

// pconn is one polled connection.
type pconn struct {
	fd       int
	idx      int // in loop.conns and the epoll data
	c        *h2c.Conn
	lt       *ltarget
	state    int
	deadline time.Time // of connecting and the handshake
	out      []byte    // taken from c, not yet written
	dirty    bool
	wantOut  bool // EPOLLOUT registered: the socket buffer was full
	dead     bool
}

// lcall is one request of a loop; pooled.
type lcall struct {
	l          *loop
	m          message
	op         driver.ChargeOp
	cr         h2c.ClientRequest
	hr         h2c.ClientResponse
	out        *driver.Outcome
	fn         func(error)
	cb         func(*h2c.ClientResponse, error)
	deadline   time.Time
	lt         *ltarget
	pc         *pconn // carrying it; nil while pending
	prev, next *lcall
}

const (
	// maxPollWait bounds one wait, so the loop yields the P regularly.
	maxPollWait = 10 * time.Millisecond
	loopReadBuf = 256 << 10
	// directReads: with at most this many connections a slept-through
	// wait reads each directly instead of asking epoll which are readable.
	directReads = 2
	// sysEpollPwait2 is epoll_pwait2(2) (Linux 5.11+), the same number on
	// every architecture.
	sysEpollPwait2 = 441
	// prSetTimerSlack is prctl's PR_SET_TIMERSLACK; it is renewed every
	// slackRenew waits (each prctl costs about half a µs).
	prSetTimerSlack = 29
	slackRenew      = 64
	// dialRetry is how long after a failed dial requests to that target
	// fail at once (with the dial's error) instead of dialing again.
	dialRetry = 100 * time.Millisecond
)

// errNoLoop is returned by newLoop where event loops are not available.
var errNoLoop = errors.New("nchf: no event loop on this platform")

// errFull: every ready connection of the target is at its stream limit.
var errFull = errors.New("nchf: every connection is at its stream limit")

func (d *Driver) newLoop() (driver.Worker, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: epoll_create1: %v", errNoLoop, err)
	}
	l := &loop{d: d, h: d.h2, epfd: epfd, rbuf: make([]byte, loopReadBuf), procs: runtime.GOMAXPROCS(0),
		timeoutErr: fmt.Errorf("%w: no answer within %v", driver.ErrTimeout, d.timeout)}
	for _, t := range d.h2.targets {
		l.targets = append(l.targets, ltarget{t: t})
	}
	// Probe epoll_pwait2: kernels before 5.11 lack it.
	if _, errno := l.wait(0); errno == syscall.ENOSYS {
		syscall.Close(epfd)
		return nil, fmt.Errorf("%w: epoll_pwait2 not supported", errNoLoop)
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("cannot create the event loop's wake pipe: %w", err)
	}
	l.wakeR, l.wakeW = p[0], p[1]
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: wakeData}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.wakeR, &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, fmt.Errorf("cannot poll the event loop's wake pipe: %w", err)
	}
	d.loops.Add(1)
	return l, nil
}

// wakeData is the epoll data of the wake pipe (connections use their
// index, from 0).
const wakeData = -1

// Wake implements driver.Waker: a byte into the wake pipe ends the
// current (or the next) epoll wait. Safe for concurrent use; a full pipe
// is already a wake-up.
func (l *loop) Wake() {
	b := [1]byte{1}
	syscall.Write(l.wakeW, b[:])
}

// drainWake empties the wake pipe.
func (l *loop) drainWake() {
	var b [64]byte
	for {
		n, err := syscall.Read(l.wakeR, b[:])
		if n < len(b) || err != nil {
			return
		}
	}
}

// wait is one epoll_pwait2 with a timeout of d (0: do not block).
func (l *loop) wait(d time.Duration) (int, syscall.Errno) {
	ts := syscall.NsecToTimespec(int64(d))
	n, _, errno := syscall.RawSyscall6(sysEpollPwait2, uintptr(l.epfd),
		uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
	return int(n), errno
}

// Queue implements driver.Worker.
func (l *loop) Queue(c *driver.Charge, o *driver.Outcome, done func(error)) error {
	if l.closed {
		return driver.ErrClosed
	}
	lt := &l.targets[uint(c.Target)%uint(len(l.targets))]
	k := l.get()
	l.d.build(&k.m, c)
	k.op, k.out, k.fn, k.lt = c.Op, o, done, lt
	k.cr = lt.t.request(&k.m)
	k.hr.Body = k.m.rbody[:0]
	err := l.startOn(lt, k)
	if err == nil {
		l.link(k)
		return nil
	}
	if !errors.Is(err, errFull) {
		l.put(k)
		return err
	}
	switch {
	case lt.dial != nil:
	case len(lt.conns) >= l.h.maxConns:
		l.put(k)
		return fmt.Errorf("%w: every connection to %s is at its stream limit", driver.ErrConnection, lt.t.addr)
	case time.Now().Before(lt.retryAt):
		l.put(k)
		return lt.lastErr
	default:
		if err := l.startDial(lt); err != nil {
			l.put(k)
			return err
		}
	}
	lt.pending = append(lt.pending, k)
	l.link(k)
	return nil
}

func (l *loop) get() *lcall {
	if n := len(l.free); n > 0 {
		k := l.free[n-1]
		l.free = l.free[:n-1]
		return k
	}
	k := &lcall{l: l}
	k.cb = func(hr *h2c.ClientResponse, err error) { k.l.finish(k, err) }
	return k
}

func (l *loop) put(k *lcall) {
	k.out, k.fn, k.pc, k.lt = nil, nil, nil, nil
	l.free = append(l.free, k)
}

// link appends k to the deadline list.
func (l *loop) link(k *lcall) {
	k.deadline = time.Now().Add(l.d.timeout)
	k.prev, k.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = k
	} else {
		l.head = k
	}
	l.tail = k
}

func (l *loop) unlink(k *lcall) {
	if k.prev != nil {
		k.prev.next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		k.next.prev = k.prev
	} else {
		l.tail = k.prev
	}
	k.prev, k.next = nil, nil
}

// startOn queues k on the first ready connection of lt with room.
func (l *loop) startOn(lt *ltarget, k *lcall) error {
	for _, pc := range lt.conns {
		err := pc.c.RoundTripQueued(&k.cr, &k.hr, k.cb)
		if err == nil {
			k.pc = pc
			l.markDirty(pc)
			return nil
		}
		if !retryable(err) {
			return driver.Classify(err)
		}
	}
	return errFull
}

func (l *loop) markDirty(pc *pconn) {
	if !pc.dirty {
		pc.dirty = true
		l.dirty = append(l.dirty, pc)
	}
}

// finish completes k: the answer (err nil) or its failure.
func (l *loop) finish(k *lcall, err error) {
	if l.closed {
		return // abandoned by Close
	}
	l.unlink(k)
	o, fn := k.out, k.fn
	if err != nil {
		err = driver.Classify(err)
		o.Fail(err)
	} else {
		k.m.fill(&k.hr)
		o.Received = l.rxAt
		classify(k.op, &k.m, o)
		k.m.rbody = k.hr.Body[:0]
	}
	l.put(k)
	fn(err)
}

// expire fails the requests whose deadline passed and the connections
// whose establishment took too long.
func (l *loop) expire(now time.Time) {
	for k := l.head; k != nil && !now.Before(k.deadline); k = l.head {
		if k.pc != nil {
			if k.pc.c.CancelRoundTrip(&k.hr) {
				l.markDirty(k.pc) // the RST_STREAM
			}
		} else if lt := k.lt; lt != nil {
			for i, x := range lt.pending {
				if x == k {
					lt.pending = append(lt.pending[:i], lt.pending[i+1:]...)
					break
				}
			}
		}
		l.finish(k, l.timeoutErr)
	}
	if l.dialing > 0 {
		for i := range l.targets {
			if pc := l.targets[i].dial; pc != nil && !now.Before(pc.deadline) {
				l.kill(pc, fmt.Errorf("%w: %w", driver.ErrTimeout, context.DeadlineExceeded))
			}
		}
	}
}

// Flush implements driver.Worker: one write per connection with queued
// requests.
func (l *loop) Flush() {
	for n := len(l.dirty); n > 0; n = len(l.dirty) {
		pc := l.dirty[n-1]
		l.dirty[n-1] = nil
		l.dirty = l.dirty[:n-1]
		l.flushConn(pc)
	}
}

// Poll implements driver.Worker.
func (l *loop) Poll(wait time.Duration) error {
	if l.closed {
		return driver.ErrClosed
	}
	defer l.Flush() // RST_STREAMs of expired requests, requests started on new connections
	now := time.Now()
	l.expire(now)
	if l.head != nil {
		wait = min(wait, l.head.deadline.Sub(now))
	}
	wait = min(max(wait, 0), maxPollWait)
	if wait > 0 {
		if int(l.d.loops.Load()) >= l.procs {
			// The loops hold every P: other goroutines (timers, the
			// aggregator, the GC's workers) run only when one yields.
			// With a spare P they run there, and a Gosched would wake
			// its thread (futex) every time.
			runtime.Gosched()
		}
		if l.waits%slackRenew == 0 {
			// The slack is per thread, and the goroutine may have moved
			// to another (rarely: its waits are raw system calls).
			syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
		}
		l.waits++
	}
	if wait > 0 && wait <= driver.SleepThrough && l.dialing == 0 {
		// Sleep through the interval whatever arrives, then take it all:
		// one wake-up instead of one per burst of responses. Their
		// arrival times come from the kernel, so the late read changes
		// no latency.
		l.sleepUntil(now.Add(wait))
		wait = 0
		if len(l.live) <= directReads {
			// Fewer system calls than an epoll_pwait2 and then reads.
			for i := 0; i < len(l.live); i++ {
				pc := l.live[i]
				l.read(pc)
				if !pc.dead && pc.wantOut {
					l.write(pc)
				}
			}
			l.expire(time.Now())
			return nil
		}
	}
	n, errno := l.wait(wait)
	if errno == syscall.EINTR || errno == syscall.EAGAIN {
		return nil
	}
	if errno != 0 {
		return fmt.Errorf("nchf: epoll_pwait2: %w", errno)
	}
	for i := 0; i < n; i++ {
		ev := l.events[i]
		idx := int(ev.Fd)
		if idx == wakeData {
			l.drainWake()
			continue
		}
		if idx < 0 || idx >= len(l.conns) || l.conns[idx] == nil {
			continue
		}
		pc := l.conns[idx]
		if pc.state == stConnecting {
			l.connected(pc)
			continue
		}
		if ev.Events&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
			l.read(pc)
		}
		if !pc.dead && ev.Events&syscall.EPOLLOUT != 0 {
			l.write(pc)
		}
	}
	l.expire(time.Now())
	return nil
}

// Wake-up anticipation (sleepUntil).
const (
	// earlyStep is how far one wait moves loop.early towards the
	// kernel's lateness: it tracks the median, a µs per wait.
	earlyStep = time.Microsecond
	// maxEarly bounds loop.early, and so the spin after a wake-up.
	maxEarly = 25 * time.Microsecond
)

// sleepUntil returns at end (driver.Config.OnTime; otherwise it sleeps
// until end plus the kernel's wake-up delay), not later than that delay
// makes it. A nanosleep ends some µs after the time asked (the kernel's
// and, on a virtual machine, the host's wake-up delay, even with 1 ns
// timer slack; see docs/design/003-open-loop-pacing.md), so it
// asks for early (the median of that lateness, learnt here) before end
// and spins the rest on the clock: about half the waits spin a few µs,
// the other half end late by less than they would have. A spin never
// lasts longer than maxEarly plus the last lateness' deviation; a wait
// that ends well before its time (a signal) sleeps again.
func (l *loop) sleepUntil(end time.Time) {
	if !l.d.onTime {
		ts := syscall.NsecToTimespec(int64(time.Until(end)))
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		return
	}
	for {
		t0 := time.Now()
		left := end.Sub(t0)
		if left <= 0 {
			return
		}
		if left <= l.early {
			for time.Now().Before(end) {
			}
			return
		}
		d := left - l.early
		ts := syscall.NsecToTimespec(int64(d))
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		late := time.Since(t0) - d
		switch {
		case late > l.early:
			l.early = min(l.early+earlyStep, maxEarly)
		case late < l.early && l.early >= earlyStep:
			l.early -= earlyStep
		}
	}
}

// read takes what the socket holds (one read unless the buffer filled)
// and feeds it to the connection; completions run their callbacks here,
// stamped with the arrival time of the data the kernel reports.
func (l *loop) read(pc *pconn) {
	for {
		iov := syscall.Iovec{Base: &l.rbuf[0]}
		iov.SetLen(len(l.rbuf))
		msg := syscall.Msghdr{Iov: &iov, Iovlen: 1, Control: &l.oob[0]}
		msg.SetControllen(len(l.oob))
		n, _, errno := syscall.RawSyscall(syscall.SYS_RECVMSG, uintptr(pc.fd), uintptr(unsafe.Pointer(&msg)), 0)
		if errno == syscall.EAGAIN || errno == syscall.EINTR {
			break
		}
		l.rxAt = l.arrival(&msg)
		if errno != 0 {
			l.kill(pc, errno)
			return
		}
		if n == 0 {
			l.kill(pc, io.ErrUnexpectedEOF)
			return
		}
		if err := pc.c.Feed(l.rbuf[:n]); err != nil {
			l.flushConn(pc) // a GOAWAY, if any
			l.kill(pc, err)
			return
		}
		if int(n) < len(l.rbuf) {
			break // level-triggered: epoll reports what arrives later
		}
	}
	if pc.state == stHandshake && pc.c.Ready() {
		l.ready(pc)
	}
	// Control frames the input caused (SETTINGS or PING acknowledgements,
	// WINDOW_UPDATE) and requests the callbacks started.
	l.flushConn(pc)
	if pc.c.Err() != nil && pc.c.Active() == 0 {
		l.kill(pc, pc.c.Err()) // GOAWAY received and every stream done
	}
}

// arrival returns when the data recvmsg returned reached the socket: the
// SCM_TIMESTAMPNS control message (wall clock, the last segment read),
// mapped onto the monotonic clock; now when there is none.
func (l *loop) arrival(msg *syscall.Msghdr) time.Time {
	now := time.Now()
	if msg.Controllen < syscall.SizeofCmsghdr+uint64(unsafe.Sizeof(syscall.Timespec{})) {
		return now
	}
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&l.oob[0]))
	if h.Level != syscall.SOL_SOCKET || h.Type != syscall.SCM_TIMESTAMPNS {
		return now
	}
	ts := (*syscall.Timespec)(unsafe.Pointer(&l.oob[syscall.SizeofCmsghdr]))
	age := now.Sub(time.Unix(ts.Sec, ts.Nsec))
	if age <= 0 || age > time.Minute { // clock stepped
		return now
	}
	return now.Add(-age)
}

// write writes pc.out; what the socket does not take waits for EPOLLOUT.
func (l *loop) write(pc *pconn) {
	if !pc.wantOut || len(pc.out) == 0 {
		pc.out = pc.c.AppendOutput(pc.out)
	}
	for len(pc.out) > 0 {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(pc.fd),
			uintptr(unsafe.Pointer(&pc.out[0])), uintptr(len(pc.out)))
		if errno == syscall.EINTR {
			continue
		}
		if errno == syscall.EAGAIN {
			if !pc.wantOut {
				pc.wantOut = true
				l.ctl(syscall.EPOLL_CTL_MOD, pc, syscall.EPOLLIN|syscall.EPOLLOUT)
			}
			return
		}
		if errno != 0 {
			l.kill(pc, errno)
			return
		}
		pc.out = pc.out[:copy(pc.out, pc.out[n:])]
	}
	if pc.wantOut {
		pc.wantOut = false
		l.ctl(syscall.EPOLL_CTL_MOD, pc, syscall.EPOLLIN)
	}
}

// flushConn writes what pc's connection has queued, unless the socket is
// full (then EPOLLOUT continues) or still connecting.
func (l *loop) flushConn(pc *pconn) {
	pc.dirty = false
	if pc.dead || pc.state == stConnecting {
		return
	}
	pc.out = pc.c.AppendOutput(pc.out)
	if pc.wantOut || len(pc.out) == 0 {
		return
	}
	l.write(pc)
}

func (l *loop) ctl(op int, pc *pconn, events uint32) {
	ev := syscall.EpollEvent{Events: events, Fd: int32(pc.idx)}
	if err := syscall.EpollCtl(l.epfd, op, pc.fd, &ev); err != nil && op != syscall.EPOLL_CTL_DEL {
		l.kill(pc, err)
	}
}

// kill closes pc's socket and fails its streams (their callbacks run
// now); a connection being established fails the requests waiting for it.
func (l *loop) kill(pc *pconn, err error) {
	if pc.dead {
		return
	}
	pc.dead = true
	l.ctl(syscall.EPOLL_CTL_DEL, pc, 0)
	syscall.Close(pc.fd)
	l.conns[pc.idx] = nil
	lt := pc.lt
	if pc.state != stReady {
		l.dialing--
		lt.dial = nil
		err = driver.Classify(fmt.Errorf("cannot connect to %s: %w", lt.t.addr, err))
		lt.lastErr, lt.retryAt = err, time.Now().Add(dialRetry)
		pending := lt.pending
		lt.pending = nil
		for _, k := range pending {
			l.finish(k, err)
		}
		pc.c.Fail(err)
		return
	}
	for j, x := range l.live {
		if x == pc {
			l.live = append(l.live[:j], l.live[j+1:]...)
			break
		}
	}
	for j, x := range lt.conns {
		if x == pc {
			lt.conns = append(lt.conns[:j], lt.conns[j+1:]...)
			break
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil
	}
	pc.c.Fail(err)
}

// startDial starts connecting a new socket to lt's address; requests wait
// in lt.pending until the HTTP/2 handshake completes (ready).
func (l *loop) startDial(lt *ltarget) error {
	fail := func(err error) error {
		err = driver.Classify(fmt.Errorf("cannot connect to %s: %w", lt.t.addr, err))
		lt.lastErr, lt.retryAt = err, time.Now().Add(dialRetry)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.d.timeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", hostOf(lt.t.addr))
	if err == nil && len(addrs) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return fail(err)
	}
	port, err := portOf(lt.t.addr)
	if err != nil {
		return fail(err)
	}
	ip := addrs[0].Unmap()
	var sa syscall.Sockaddr
	family := syscall.AF_INET
	if ip.Is4() {
		sa = &syscall.SockaddrInet4{Port: port, Addr: ip.As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: port, Addr: ip.As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return fail(err)
	}
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	if err := syscall.Connect(fd, sa); err != nil && err != syscall.EINPROGRESS {
		syscall.Close(fd)
		return fail(err)
	}
	pc := &pconn{fd: fd, idx: -1, c: h2c.NewPolledConn(&l.h.opts), lt: lt, state: stConnecting,
		deadline: time.Now().Add(l.d.timeout)}
	for i, x := range l.conns {
		if x == nil {
			pc.idx = i
			break
		}
	}
	if pc.idx < 0 {
		pc.idx = len(l.conns)
		l.conns = append(l.conns, nil)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT, Fd: int32(pc.idx)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		return fail(err)
	}
	l.conns[pc.idx] = pc
	lt.dial = pc
	l.dialing++
	return nil
}

// connected handles the end of a TCP connect: the preface and SETTINGS
// leave, and the loop waits for the server's SETTINGS.
func (l *loop) connected(pc *pconn) {
	soErr, err := syscall.GetsockoptInt(pc.fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
	if err == nil && soErr != 0 {
		err = syscall.Errno(soErr)
	}
	if err != nil {
		l.kill(pc, err)
		return
	}
	pc.state = stHandshake
	l.ctl(syscall.EPOLL_CTL_MOD, pc, syscall.EPOLLIN)
	if !pc.dead {
		l.flushConn(pc)
	}
}

// ready makes pc a ready connection of its target and starts the requests
// waiting for it; those it has no room for wait for another connection.
func (l *loop) ready(pc *pconn) {
	lt := pc.lt
	pc.state = stReady
	lt.dial = nil
	l.dialing--
	lt.conns = append(lt.conns, pc)
	l.live = append(l.live, pc)
	pending := lt.pending
	lt.pending = nil
	for i, k := range pending {
		err := l.startOn(lt, k)
		if err == nil {
			continue
		}
		rest := pending[i:]
		if errors.Is(err, errFull) && len(lt.conns) < l.h.maxConns {
			if err = l.startDial(lt); err == nil {
				lt.pending = append(lt.pending, rest...)
				return
			}
		}
		if errors.Is(err, errFull) {
			err = fmt.Errorf("%w: every connection to %s is at its stream limit", driver.ErrConnection, lt.t.addr)
		}
		for _, k := range rest {
			l.finish(k, err)
		}
		return
	}
}

// Close implements driver.Worker.
func (l *loop) Close() {
	if l.closed {
		return
	}
	l.closed = true // callbacks from here on are abandoned requests
	l.d.loops.Add(-1)
	for _, pc := range l.conns {
		if pc == nil {
			continue
		}
		if pc.state == stReady {
			pc.c.Close() // GOAWAY queued, streams failed
			l.flushConn(pc)
		}
		pc.dead = true
		syscall.Close(pc.fd)
	}
	l.conns, l.live, l.head, l.tail = nil, nil, nil, nil
	syscall.Close(l.epfd)
	syscall.Close(l.wakeR)
	// wakeW stays open: a Wake racing with Close must not write into a
	// reused descriptor; it is closed when the loop is collected.
	runtime.SetFinalizer(l, func(l *loop) { syscall.Close(l.wakeW) })
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return net.LookupPort("tcp", p)
}
