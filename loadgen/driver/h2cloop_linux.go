//go:build linux && (amd64 || arm64)

package driver

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
)

// An h2cLoop is one goroutine's event loop (driver.Loop) over its own
// HTTP/2 connections: non-blocking sockets outside Go's network poller,
// one epoll instance, h2c.NewPolledConn connections fed from one read
// buffer. Per wake-up it makes one epoll_pwait2 call, one read per
// readable connection (level-triggered, so no read that only returns
// EAGAIN) and, per Flush, one write per connection with queued requests.
//
// The wait is a raw system call: the Go scheduler sees the goroutine as
// running, never as a parked goroutine on an idle P. That matters on
// machines where system calls are expensive: a Go program whose every P
// goes idle between ticks wakes the runtime's sysmon thread (futex, then
// nanosleep polls) at each idle→busy transition, which cost more CPU per
// request than the requests themselves. The price: while the loop waits
// (at most maxPollWait), other goroutines get this P only when it yields,
// which it does before every wait (runtime.Gosched) when GOMAXPROCS is 1;
// with more Ps they run on the others as usual. The wait ends early on a signal
// (EINTR), so stop-the-world and preemption requests are honoured.
type h2cLoop struct {
	d       *h2cDriver
	epfd    int
	targets []loopTarget
	conns   []*pconn // by epoll data index; nil slots are free
	dirty   []*pconn // conns with requests queued since the last Flush
	events  [64]syscall.EpollEvent
	rbuf    []byte
	oob     [64]byte  // recvmsg control messages
	rxAt    time.Time // arrival of the data being fed
	live    []*pconn  // every open connection
	closed  bool
	yield   bool // GOMAXPROCS was 1: yield the P before each wait
}

type loopTarget struct {
	t     *h2Target
	conns []*pconn // live, in dial order: requests fill the first with room
}

// pconn is one polled connection.
type pconn struct {
	fd      int
	idx     int // in h2cLoop.conns and the epoll data
	c       *h2c.Conn
	out     []byte // taken from c, not yet written
	dirty   bool
	wantOut bool // EPOLLOUT registered: the socket buffer was full
	dead    bool
}

const (
	// maxPollWait bounds one wait, so the loop yields the P regularly.
	maxPollWait = 10 * time.Millisecond
	loopReadBuf = 256 << 10
	// directReads: with at most this many connections a tick reads each
	// directly instead of asking epoll which are readable.
	directReads = 2
	// sysEpollPwait2 is epoll_pwait2(2) (Linux 5.11+), the same number on
	// every architecture.
	sysEpollPwait2 = 441
)

// NewLoop implements Looper.
func (d *h2cDriver) NewLoop() (Loop, error) {
	if d.noLoop {
		return nil, ErrNoLoop
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: epoll_create1: %v", ErrNoLoop, err)
	}
	l := &h2cLoop{d: d, epfd: epfd, rbuf: make([]byte, loopReadBuf), yield: runtime.GOMAXPROCS(0) == 1}
	for _, t := range d.targets {
		l.targets = append(l.targets, loopTarget{t: t})
	}
	// Probe epoll_pwait2: kernels before 5.11 lack it.
	if _, errno := l.wait(0); errno == syscall.ENOSYS {
		syscall.Close(epfd)
		return nil, fmt.Errorf("%w: epoll_pwait2 not supported", ErrNoLoop)
	}
	return l, nil
}

// wait is one epoll_pwait2 with a timeout of d (0: do not block).
func (l *h2cLoop) wait(d time.Duration) (int, syscall.Errno) {
	ts := syscall.NsecToTimespec(int64(d))
	n, _, errno := syscall.RawSyscall6(sysEpollPwait2, uintptr(l.epfd),
		uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
	return int(n), errno
}

// Poll implements Loop.
func (l *h2cLoop) Poll(d time.Duration, wake bool) error {
	if l.closed {
		return ErrConnection
	}
	if d > 0 && l.yield {
		// With one P, other goroutines (timers, the aggregator) run only
		// when this one yields. With more, they run on the other Ps, and
		// a Gosched would wake an idle P's thread (futex) every time.
		runtime.Gosched()
	}
	d = min(max(d, 0), maxPollWait)
	if !wake && d > 0 {
		// Sleep through the interval whatever arrives, then take it all:
		// one wake-up instead of one per burst of responses. Their
		// arrival times come from the kernel, so the late read changes
		// no latency.
		ts := syscall.NsecToTimespec(int64(d))
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		d = 0
		if len(l.live) <= directReads {
			// Fewer system calls than an epoll_pwait2 and then reads.
			for i := 0; i < len(l.live); i++ {
				pc := l.live[i]
				l.read(pc)
				if !pc.dead && pc.wantOut {
					l.write(pc)
				}
			}
			return nil
		}
	}
	n, errno := l.wait(d)
	if errno == syscall.EINTR || errno == syscall.EAGAIN {
		return nil
	}
	if errno != 0 {
		return fmt.Errorf("driver: epoll_pwait2: %w", errno)
	}
	for i := 0; i < n; i++ {
		ev := l.events[i]
		idx := int(ev.Fd)
		if idx < 0 || idx >= len(l.conns) || l.conns[idx] == nil {
			continue
		}
		pc := l.conns[idx]
		if ev.Events&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
			l.read(pc)
		}
		if !pc.dead && ev.Events&syscall.EPOLLOUT != 0 {
			l.write(pc)
		}
	}
	return nil
}

// read takes what the socket holds (one read unless the buffer filled)
// and feeds it to the connection; completions run their callbacks here,
// stamped with the arrival time of the data the kernel reports.
func (l *h2cLoop) read(pc *pconn) {
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
			l.kill(pc, io.EOF)
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
func (l *h2cLoop) arrival(msg *syscall.Msghdr) time.Time {
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
func (l *h2cLoop) write(pc *pconn) {
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
// full (then EPOLLOUT continues).
func (l *h2cLoop) flushConn(pc *pconn) {
	pc.dirty = false
	if pc.dead {
		return
	}
	pc.out = pc.c.AppendOutput(pc.out)
	if pc.wantOut || len(pc.out) == 0 {
		return
	}
	l.write(pc)
}

func (l *h2cLoop) ctl(op int, pc *pconn, events uint32) {
	ev := syscall.EpollEvent{Events: events, Fd: int32(pc.idx)}
	if err := syscall.EpollCtl(l.epfd, op, pc.fd, &ev); err != nil && op != syscall.EPOLL_CTL_DEL {
		l.kill(pc, err)
	}
}

// kill closes pc's socket and fails its streams (their callbacks run now).
func (l *h2cLoop) kill(pc *pconn, err error) {
	if pc.dead {
		return
	}
	pc.dead = true
	l.ctl(syscall.EPOLL_CTL_DEL, pc, 0)
	syscall.Close(pc.fd)
	l.conns[pc.idx] = nil
	for j, x := range l.live {
		if x == pc {
			l.live = append(l.live[:j], l.live[j+1:]...)
			break
		}
	}
	for i := range l.targets {
		lt := &l.targets[i]
		for j, x := range lt.conns {
			if x == pc {
				lt.conns = append(lt.conns[:j], lt.conns[j+1:]...)
				break
			}
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	pc.c.Fail(err)
}

// Start implements Async: the request leaves at once.
func (l *h2cLoop) Start(req *Request, resp *Response, done func(error)) error {
	return l.start(req, resp, done, false)
}

// Queue implements Batcher.
func (l *h2cLoop) Queue(req *Request, resp *Response, done func(error)) error {
	return l.start(req, resp, done, true)
}

// Flush implements Batcher: one write per connection with queued requests.
func (l *h2cLoop) Flush() {
	for n := len(l.dirty); n > 0; n = len(l.dirty) {
		pc := l.dirty[n-1]
		l.dirty[n-1] = nil
		l.dirty = l.dirty[:n-1]
		l.flushConn(pc)
	}
}

func (l *h2cLoop) start(req *Request, resp *Response, done func(error), queue bool) error {
	if l.closed {
		return fmt.Errorf("%w: loop closed", ErrConnection)
	}
	lt := &l.targets[req.Target%len(l.targets)]
	cr, hr := l.d.prepare(lt.t, req, resp, done)
	if resp.h2lcb == nil {
		resp.h2lcb = func(hr *h2c.ClientResponse, err error) {
			resp.Received = l.rxAt
			resp.h2cb(hr, err)
		}
	}
	for attempt := 0; attempt < 3; attempt++ {
		// Fill the first connection with room: the fewer connections a
		// tick's requests spread over, the fewer writes and reads.
		var err error = h2c.ErrStreamLimit
		for _, pc := range lt.conns {
			if err = pc.c.RoundTripQueued(cr, hr, resp.h2lcb); err == nil {
				if !pc.dirty {
					pc.dirty = true
					l.dirty = append(l.dirty, pc)
				}
				if !queue {
					l.Flush()
				}
				return nil
			}
			if !retryable(err) {
				return classify(err)
			}
		}
		if len(lt.conns) >= l.d.maxConns {
			break
		}
		if err := l.dial(lt); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: every connection to %s is at its stream limit", ErrConnection, lt.t.addr)
}

// dial connects a new socket to lt's address and completes the HTTP/2
// handshake before returning (blocking the loop for one round trip).
func (l *h2cLoop) dial(lt *loopTarget) error {
	deadline := time.Now().Add(l.d.dialTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", hostOf(lt.t.addr))
	if err != nil || len(addrs) == 0 {
		return classify(fmt.Errorf("cannot resolve %s: %v", lt.t.addr, err))
	}
	port, err := portOf(lt.t.addr)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConnection, err)
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
		return fmt.Errorf("%w: socket: %v", ErrConnection, err)
	}
	fail := func(err error) error {
		syscall.Close(fd)
		return classify(fmt.Errorf("cannot dial %s: %w", lt.t.addr, err))
	}
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	if err := syscall.Connect(fd, sa); err != nil && err != syscall.EINPROGRESS {
		return fail(err)
	}
	if err := pollFd(fd, pollOut, deadline); err != nil {
		return fail(err)
	}
	if soErr, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err != nil || soErr != 0 {
		if err == nil {
			err = syscall.Errno(soErr)
		}
		return fail(err)
	}
	c := h2c.NewPolledConn(&l.d.opts)
	out := c.AppendOutput(nil)
	for len(out) > 0 {
		n, err := syscall.Write(fd, out)
		if err == syscall.EAGAIN {
			if err := pollFd(fd, pollOut, deadline); err != nil {
				return fail(err)
			}
			continue
		}
		if err != nil {
			return fail(err)
		}
		out = out[n:]
	}
	for !c.Ready() {
		if err := pollFd(fd, pollIn, deadline); err != nil {
			return fail(fmt.Errorf("HTTP/2 handshake: %w", err))
		}
		n, err := syscall.Read(fd, l.rbuf)
		if err == syscall.EAGAIN {
			continue
		}
		if err == nil && n == 0 {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			err = c.Feed(l.rbuf[:n])
		}
		if err != nil {
			return fail(fmt.Errorf("HTTP/2 handshake: %w", err))
		}
	}
	pc := &pconn{fd: fd, c: c, idx: -1}
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
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(pc.idx)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fail(err)
	}
	l.conns[pc.idx] = pc
	l.live = append(l.live, pc)
	lt.conns = append(lt.conns, pc)
	l.flushConn(pc) // the SETTINGS acknowledgement
	return nil
}

// Close implements Loop.
func (l *h2cLoop) Close() {
	if l.closed {
		return
	}
	for _, pc := range l.conns {
		if pc == nil {
			continue
		}
		pc.c.Close() // GOAWAY queued, streams failed
		l.flushConn(pc)
		l.kill(pc, nil)
	}
	l.closed = true
	syscall.Close(l.epfd)
}

const (
	pollIn  = 0x1 // POLLIN
	pollOut = 0x4 // POLLOUT
)

// pollFd waits until fd is readable or writable (events) or the deadline
// passes (dialing only: blocks the calling thread).
func pollFd(fd int, events int16, deadline time.Time) error {
	type pollfd struct {
		fd      int32
		events  int16
		revents int16
	}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)
		}
		p := pollfd{fd: int32(fd), events: events}
		ts := syscall.NsecToTimespec(int64(left))
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		if n > 0 {
			return nil // errors show in the following call
		}
	}
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
