// Package aslite is an in-memory, single-node server that speaks the
// Aerospike wire protocol well enough for the unmodified official Go client
// (github.com/aerospike/aerospike-client-go/v7): the embedded default store
// of the testbed and the test target where no Aerospike cluster exists.
//
// See README.md for what it implements and what it answers UNSUPPORTED.
package aslite

// The fuzz seed corpus (testdata/fuzz/FuzzConn, FuzzMessage: client-*) is
// the official client's own requests, recorded.
//go:generate go run ./internal/corpusgen -dir testdata/fuzz

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Server. The zero value of every field but
// Namespaces has a usable default.
type Config struct {
	// Namespaces served (at least one; names shorter than 32 bytes).
	Namespaces []string
	// Now is the clock used for TTLs and last-update times; nil = time.Now.
	Now func() time.Time
	// Logger receives connection errors and lifecycle events; nil = slog.Default().
	Logger *slog.Logger
	// DefaultTTL is the namespace default TTL applied when a write asks for
	// it (TTL 0); 0 = records never expire.
	DefaultTTL time.Duration
	// ForbidTTL refuses every write that sets a TTL (other than "never
	// expire", "do not change" or the namespace default while DefaultTTL
	// is 0) with FAIL_FORBIDDEN, as Aerospike does for a namespace with
	// nsup-period 0 (its default). False = TTLs accepted, as Aerospike with
	// nsup-period > 0.
	ForbidTTL bool
	// ReclaimInterval is how often expired records are deleted and their
	// memory reclaimed in the background; 0 = 5s, negative = never (call
	// Reclaim yourself).
	ReclaimInterval time.Duration
	// MaxMessageSize bounds a request (compressed or not); larger requests
	// close the connection. 0 = 16 MiB.
	MaxMessageSize int
	// MaxRecordSize bounds the stored size of one record; larger writes get
	// RECORD_TOO_BIG. 0 = 1 MiB (Aerospike's default write-block-size).
	MaxRecordSize int
	// MaxConnections bounds the open client connections; more are closed
	// at once. 0 = 10000.
	MaxConnections int
	// NodeName is the node id reported to clients; empty = derived from the
	// listen address, so that a restarted server keeps its name.
	NodeName string
	// ClusterName is answered to the cluster-name info command; empty = "null".
	ClusterName string

	// DataDir, when set, makes the store survive a restart or a crash:
	// every change is appended to a log there and compacted into
	// snapshots, and New recovers what the directory holds (journal.go).
	// Empty = memory only.
	DataDir string
	// Commit is when a durable write is acknowledged: CommitSync (the
	// default) once the log holding it is fsynced, CommitInterval at once,
	// the log being fsynced every CommitInterval.
	Commit Commit
	// CommitInterval is the fsync period of CommitInterval; 0 = 100ms.
	CommitInterval time.Duration
	// SnapshotBytes is the log size that starts a snapshot; 0 = 64 MiB.
	SnapshotBytes int64

	// FirstRequestTimeout closes a connection that sends no complete
	// request within it of being accepted; 0 = 10s.
	FirstRequestTimeout time.Duration
	// IdleTimeout closes a connection that then sends nothing for that
	// long (Aerospike's proto-fd-idle-ms); 0 = never, as the official
	// client's pools expect unless ClientPolicy.IdleTimeout is set a few
	// seconds below it.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one reply to a client that does not
	// read; 0 = 30s.
	WriteTimeout time.Duration
}

// Server is an aslite server. Its methods are safe for concurrent use.
type Server struct {
	cfg       Config
	jr        *journal // nil: memory only
	recovered recovery
	log       *slog.Logger
	now       func() time.Time
	ns        []*namespace
	byName    map[string]*namespace

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]struct{}
	closed   bool
	nodeName string
	wg       sync.WaitGroup
	stop     chan struct{}
	started  time.Time

	stats counters
}

// counters are the live counters behind Server.Stats.
type counters struct {
	Connections    atomic.Int64 // open client connections
	ConnsAccepted  atomic.Int64
	BadConnections atomic.Int64 // connections closed because of a malformed message
	Requests       atomic.Int64 // AS_MSG requests (a batch or scan counts once)
	InfoRequests   atomic.Int64
	Reclaimed      atomic.Int64 // expired records deleted in the background
	Refused        atomic.Int64 // connections closed over Config.MaxConnections
	TimedOut       atomic.Int64 // connections closed by FirstRequestTimeout, IdleTimeout or WriteTimeout
}

// Stats is a snapshot of a server's activity.
type Stats struct {
	Connections    int64 // open client connections
	ConnsAccepted  int64 // connections accepted since start
	BadConnections int64 // connections closed because of a malformed message
	Refused        int64 // connections closed over Config.MaxConnections
	TimedOut       int64 // connections closed by FirstRequestTimeout, IdleTimeout or WriteTimeout
	Requests       int64 // AS_MSG requests (a batch or a scan counts once)
	InfoRequests   int64 // info requests
	Reclaimed      int64 // expired records deleted by Reclaim
	Objects        int64 // records stored, all namespaces (expired ones until reclaimed)
}

// ErrClosed is returned by Serve and Start after Close.
var ErrClosed = errors.New("aslite: server closed")

// ErrConfig is wrapped by New for an invalid Config.
var ErrConfig = errors.New("aslite: invalid config")

// New validates cfg and returns a Server that serves nothing until Start
// or Serve is called.
func New(cfg Config) (*Server, error) {
	if len(cfg.Namespaces) == 0 {
		return nil, fmt.Errorf("%w: no namespace", ErrConfig)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReclaimInterval == 0 {
		cfg.ReclaimInterval = 5 * time.Second
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = 16 << 20
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 10000
	}
	if cfg.MaxRecordSize <= 0 {
		cfg.MaxRecordSize = 1 << 20
	}
	if cfg.FirstRequestTimeout <= 0 {
		cfg.FirstRequestTimeout = 10 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("%w: negative IdleTimeout", ErrConfig)
	}
	if cfg.DefaultTTL < 0 {
		return nil, fmt.Errorf("%w: negative DefaultTTL", ErrConfig)
	}
	if cfg.DataDir != "" {
		if cfg.Commit == "" {
			cfg.Commit = CommitSync
		}
		if _, err := ParseCommit(string(cfg.Commit)); err != nil {
			return nil, err
		}
		if cfg.CommitInterval < 0 {
			return nil, fmt.Errorf("%w: negative CommitInterval", ErrConfig)
		}
		if cfg.CommitInterval == 0 {
			cfg.CommitInterval = 100 * time.Millisecond
		}
		if cfg.SnapshotBytes <= 0 {
			cfg.SnapshotBytes = 64 << 20
		}
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		now:    cfg.Now,
		byName: make(map[string]*namespace),
		conns:  make(map[net.Conn]struct{}),
		stop:   make(chan struct{}),
	}
	for _, name := range cfg.Namespaces {
		if name == "" || len(name) >= 32 {
			return nil, fmt.Errorf("%w: namespace name %q must be 1 to 31 bytes", ErrConfig, name)
		}
		for _, c := range name {
			if c == ';' || c == ':' || c == ',' || c == '\n' || c == '\t' || c == '=' || c == '/' {
				return nil, fmt.Errorf("%w: namespace name %q contains %q", ErrConfig, name, c)
			}
		}
		if s.byName[name] != nil {
			return nil, fmt.Errorf("%w: namespace %q given twice", ErrConfig, name)
		}
		ns := &namespace{name: name}
		s.ns = append(s.ns, ns)
		s.byName[name] = ns
	}
	if cfg.DataDir != "" {
		jr, err := s.openJournal()
		if err != nil {
			s.free()
			return nil, fmt.Errorf("cannot recover %s: %w", cfg.DataDir, err)
		}
		s.jr = jr
		go jr.run()
	}
	return s, nil
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves in the background.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	if err := s.setListener(ln); err != nil {
		ln.Close()
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.acceptLoop(ln)
	}()
	return nil
}

// Serve serves on ln until Close; it returns ErrClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.setListener(ln); err != nil {
		return err
	}
	s.wg.Add(1)
	defer s.wg.Done()
	return s.acceptLoop(ln)
}

func (s *Server) setListener(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.ln != nil {
		return fmt.Errorf("cannot serve: %w", errors.New("aslite: already serving"))
	}
	s.ln = ln
	s.nodeName = s.cfg.NodeName
	if s.nodeName == "" {
		h := fnv.New64a()
		h.Write([]byte(ln.Addr().String()))
		s.nodeName = fmt.Sprintf("A5%014X", h.Sum64()>>8)
	}
	s.started = time.Now()
	if s.cfg.ReclaimInterval > 0 {
		s.wg.Add(1)
		go s.reclaimLoop()
	}
	s.log.Info("aslite listening", "addr", ln.Addr().String(), "namespaces", s.cfg.Namespaces, "node", s.nodeName)
	return nil
}

// Addr returns the address the server listens on ("" before Start/Serve).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops listening, closes every connection and stops the background
// goroutines; it waits for them to end, then frees the records.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if s.jr != nil {
		s.jr.close()
	}
	for _, ns := range s.ns {
		ns.free()
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cannot close listener: %w", err)
	}
	return nil
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Connections:    s.stats.Connections.Load(),
		ConnsAccepted:  s.stats.ConnsAccepted.Load(),
		BadConnections: s.stats.BadConnections.Load(),
		Requests:       s.stats.Requests.Load(),
		InfoRequests:   s.stats.InfoRequests.Load(),
		Reclaimed:      s.stats.Reclaimed.Load(),
		Refused:        s.stats.Refused.Load(),
		TimedOut:       s.stats.TimedOut.Load(),
	}
	for _, ns := range s.ns {
		st.Objects += ns.objects.Load()
	}
	return st
}

// Reclaim deletes every record expired now and returns how many; the
// background reclaimer calls it every ReclaimInterval.
func (s *Server) Reclaim() int {
	now := s.nowCL()
	n := 0
	for _, ns := range s.ns {
		n += ns.reclaim(now)
	}
	s.stats.Reclaimed.Add(int64(n))
	return n
}

func (s *Server) reclaimLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ReclaimInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Reclaim()
		}
	}
}

// nowCL returns the current time in seconds since the citrusleaf epoch.
func (s *Server) nowCL() uint32 {
	t := s.now().Unix() - citrusleafEpoch
	if t < 1 {
		return 1
	}
	return uint32(t)
}

func (s *Server) acceptLoop(ln net.Listener) error {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.stop:
				return ErrClosed
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if delay == 0 {
					delay = 5 * time.Millisecond
				} else if delay < time.Second {
					delay *= 2
				}
				s.log.Warn("aslite accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("cannot accept: %w", err)
		}
		delay = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrClosed
		}
		if len(s.conns) >= s.cfg.MaxConnections {
			s.mu.Unlock()
			nc.Close()
			if s.stats.Refused.Add(1)%1000 == 1 {
				s.log.Warn("aslite refusing connections over the limit", "limit", s.cfg.MaxConnections, "refused", s.stats.Refused.Load())
			}
			continue
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.stats.ConnsAccepted.Add(1)
		s.stats.Connections.Add(1)
		go s.serveConn(nc)
	}
}

// conn is the per-connection state: buffers are reused across requests and,
// through connPool, across connections.
type conn struct {
	nc  net.Conn
	br  *bufio.Reader
	in  []byte // request body
	out []byte // reply
	ws  workspace
	zr  io.ReadCloser
	hdr [8]byte

	first          bool          // no complete request yet
	rArmed, wArmed time.Time     // when the read and write deadlines were last set
	wt             time.Duration // Config.WriteTimeout
}

// write sends c.out. It arms the write deadline (WriteTimeout from now)
// when it was last armed more than a quarter of it ago, for every reply
// and for every frame of a long reply (a throttled scan runs for as long
// as its records take): a client that stops reading is cut off after
// about WriteTimeout, a slow reply that keeps going is not.
func (c *conn) write() error {
	if now := time.Now(); now.Sub(c.wArmed) > c.wt/4 {
		c.nc.SetWriteDeadline(now.Add(c.wt))
		c.wArmed = now
	}
	_, err := c.nc.Write(c.out)
	return err
}

var connPool = sync.Pool{New: func() any {
	return &conn{br: bufio.NewReaderSize(nil, 16<<10), in: make([]byte, 0, 4096), out: make([]byte, 0, 4096)}
}}

// maxRetained is the largest buffer a connection keeps between requests.
const maxRetained = 1 << 20

func (s *Server) serveConn(nc net.Conn) {
	c := connPool.Get().(*conn)
	c.nc = nc
	c.wt = s.cfg.WriteTimeout
	c.rArmed, c.wArmed = time.Time{}, time.Time{} // a new socket has no deadlines yet
	c.br.Reset(nc)
	defer func() {
		nc.Close()
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
		s.stats.Connections.Add(-1)
		c.nc = nil
		c.br.Reset(nil)
		if cap(c.in) <= maxRetained && cap(c.out) <= maxRetained {
			c.ws.release()
			connPool.Put(c)
		}
		s.wg.Done()
	}()
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	nc.SetReadDeadline(time.Now().Add(s.cfg.FirstRequestTimeout))
	c.first = true
	for {
		err := s.serveOne(c)
		if err == nil {
			if c.first {
				c.first = false
				if s.cfg.IdleTimeout == 0 {
					nc.SetReadDeadline(time.Time{})
				}
			}
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			s.stats.TimedOut.Add(1)
			return
		}
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isConnReset(err) {
			return
		}
		select {
		case <-s.stop:
			return
		default:
		}
		s.stats.BadConnections.Add(1)
		s.log.Warn("aslite closing connection", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
}

func isConnReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !errors.Is(err, ErrMalformed) && !errors.Is(err, errTooBig)
}

var errTooBig = errors.New("aslite: message too big")

// readBody reads n bytes into c.in, growing it only as bytes arrive so an
// untrusted length never allocates more than twice what was received.
func (c *conn) readBody(n int) ([]byte, error) {
	c.in = c.in[:0]
	if cap(c.in) >= n {
		c.in = c.in[:n]
		_, err := io.ReadFull(c.br, c.in)
		return c.in, err
	}
	for len(c.in) < n {
		if len(c.in) == cap(c.in) {
			grow := cap(c.in)
			if grow < 4096 {
				grow = 4096
			}
			if len(c.in)+grow > n {
				grow = n - len(c.in)
			}
			c.in = append(c.in, make([]byte, grow)...)[:len(c.in)]
		}
		m := min(cap(c.in), n)
		k, err := io.ReadFull(c.br, c.in[len(c.in):m])
		c.in = c.in[:len(c.in)+k]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return c.in, nil
}

// serveOne reads one request, handles it and writes the reply.
func (s *Server) serveOne(c *conn) error {
	if idle := s.cfg.IdleTimeout; idle > 0 && !c.first {
		// Re-armed at most every idle/4: silence is detected after
		// 3/4 to 1 IdleTimeout, without a timer update per request.
		if now := time.Now(); now.Sub(c.rArmed) > idle/4 {
			c.nc.SetReadDeadline(now.Add(idle))
			c.rArmed = now
		}
	}
	if _, err := io.ReadFull(c.br, c.hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("cannot read header: %w", ErrMalformed)
		}
		return err
	}
	h := binary.BigEndian.Uint64(c.hdr[:])
	ver, typ, size := byte(h>>56), byte(h>>48), int64(h&0xFFFFFFFFFFFF)
	if ver != protoVersion {
		return fmt.Errorf("%w: protocol version %d", ErrMalformed, ver)
	}
	if size > int64(s.cfg.MaxMessageSize) {
		return fmt.Errorf("%w: %d bytes (type %d)", errTooBig, size, typ)
	}
	body, err := c.readBody(int(size))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("cannot read body: %w: truncated", ErrMalformed)
		}
		return err
	}
	c.out = c.out[:0]
	switch typ {
	case protoInfo:
		s.stats.InfoRequests.Add(1)
		c.out = s.handleInfo(c, c.out, body)
	case protoAdmin:
		// Security is not enabled (as on Community Edition): clients
		// configured with a user carry on without logging in.
		var at int
		c.out, at = beginProto(c.out)
		c.out = append(c.out, 0, rcSecurityNotEnabled, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
		finishProto(c.out, at, protoAdmin)
	case protoMsg:
		s.stats.Requests.Add(1)
		if err := s.handleMsg(c, body); err != nil {
			return err
		}
	case protoMsgCompressed:
		s.stats.Requests.Add(1)
		inner, err := s.inflate(c, body)
		if err != nil {
			return err
		}
		if err := s.handleMsg(c, inner); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unsupported message type %d", ErrMalformed, typ)
	}
	if seq := c.ws.logSeq; seq != 0 {
		// Durable: the reply waits for the log (group commit).
		c.ws.logSeq = 0
		if err := s.jr.wait(seq); err != nil {
			return err
		}
	}
	if len(c.out) > 0 {
		if err := c.write(); err != nil {
			return err
		}
	}
	if cap(c.out) > maxRetained {
		c.out = make([]byte, 0, 4096)
	}
	if cap(c.in) > maxRetained {
		c.in = make([]byte, 0, 4096)
	}
	return nil
}

// inflate decompresses a type-4 message body into the AS_MSG body of the
// inner type-3 message.
func (s *Server) inflate(c *conn, body []byte) ([]byte, error) {
	if len(body) < 8 {
		return nil, fmt.Errorf("%w: short compressed message", ErrMalformed)
	}
	n := binary.BigEndian.Uint64(body)
	if n < 8 || n > uint64(s.cfg.MaxMessageSize) {
		return nil, fmt.Errorf("%w: uncompressed size %d", errTooBig, n)
	}
	src := &byteReader{b: body[8:]}
	var err error
	if c.zr == nil {
		c.zr, err = zlib.NewReader(src)
	} else {
		err = c.zr.(zlib.Resetter).Reset(src, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot inflate: %w: %v", ErrMalformed, err)
	}
	out := c.ws.inflated[:0]
	lr := io.LimitReader(c.zr, int64(n)+1)
	for {
		if len(out) == cap(out) {
			grow := max(cap(out), 4096)
			grow = min(grow, int(n)+1-len(out))
			if grow <= 0 {
				break
			}
			out = append(out, make([]byte, grow)...)[:len(out)]
		}
		k, err := lr.Read(out[len(out):cap(out)])
		out = out[:len(out)+k]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cannot inflate: %w: %v", ErrMalformed, err)
		}
	}
	if cap(out) <= maxRetained {
		c.ws.inflated = out
	}
	if uint64(len(out)) != n {
		return nil, fmt.Errorf("cannot inflate: %w: size %d, header says %d", ErrMalformed, len(out), n)
	}
	h := binary.BigEndian.Uint64(out)
	if byte(h>>56) != protoVersion || byte(h>>48) != protoMsg || h&0xFFFFFFFFFFFF != n-8 {
		return nil, fmt.Errorf("%w: bad inner header of compressed message", ErrMalformed)
	}
	return out[8:], nil
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func (r *byteReader) ReadByte() (byte, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	b := r.b[0]
	r.b = r.b[1:]
	return b, nil
}
