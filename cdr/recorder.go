package cdr

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/chf"
)

// Sink is what the charging core calls once per request the ABM
// answered: ar is the rated request, resp the ABM's answer. Both are
// owned by the caller and not kept. Implementations are safe for
// concurrent use and must not block for long.
type Sink interface {
	Charged(ar *chf.ApplyRequest, resp *chf.ChargeResponse)
}

// Config is the CDR configuration of a service (the --cdr-* flags). Start
// from DefaultConfig.
type Config struct {
	Dir               string
	Node              string
	FileSize          int64
	FileAge           time.Duration
	Fsync             string
	FlushInterval     time.Duration
	PartialTime       time.Duration
	PartialVolume     uint64
	PartialContainers int
}

// DefaultConfig returns the defaults of the --cdr-* flags (CDRs off).
func DefaultConfig() Config {
	return Config{
		FileSize:          64 << 20,
		FileAge:           5 * time.Minute,
		Fsync:             FsyncRotate,
		FlushInterval:     time.Second,
		PartialTime:       15 * time.Minute,
		PartialContainers: 32,
	}
}

// RegisterFlags registers the --cdr-* flags, c's values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Dir, "cdr-dir", c.Dir, "directory to write CHF-CDR files to (TS 32.298 CHFRecord, BER; cdr/README.md); empty = no CDRs")
	fs.StringVar(&c.Node, "cdr-node", c.Node, "recordingNetworkFunctionID of the records and prefix of the file names; empty = the host name")
	fs.Int64Var(&c.FileSize, "cdr-file-size", c.FileSize, "rotate a CDR file once it holds this many bytes")
	fs.DurationVar(&c.FileAge, "cdr-file-age", c.FileAge, "rotate a non-empty CDR file this long after it was opened")
	fs.StringVar(&c.Fsync, "cdr-fsync", c.Fsync, "when CDR files are synced to disk: rotate (each file before it is finished), flush (also after every --cdr-flush-interval) or none")
	fs.DurationVar(&c.FlushInterval, "cdr-flush-interval", c.FlushInterval, "how often buffered CDRs are written to the open file and partial-record limits are checked")
	fs.DurationVar(&c.PartialTime, "cdr-partial-time", c.PartialTime, "close a partial record (causeForRecClosing timeLimit) for a session whose record has been open this long; a session with nothing new since its last record is then forgotten (its release, if it comes, opens a new record)")
	fs.Uint64Var(&c.PartialVolume, "cdr-partial-volume", c.PartialVolume, "close a partial record (volumeLimit) once a session's record holds this many octets; 0 = no volume limit")
	fs.IntVar(&c.PartialContainers, "cdr-partial-containers", c.PartialContainers, "close a partial record (maxChangeCond) once it holds this many used-unit containers")
}

// Validate checks the flags' values.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "":
		return nil
	case c.FileSize <= 0:
		return fmt.Errorf("cannot use --cdr-file-size %d: must be positive", c.FileSize)
	case c.FileAge <= 0:
		return fmt.Errorf("cannot use --cdr-file-age %v: must be positive", c.FileAge)
	case c.Fsync != FsyncRotate && c.Fsync != FsyncFlush && c.Fsync != FsyncNone:
		return fmt.Errorf("cannot use --cdr-fsync %q: must be rotate, flush or none", c.Fsync)
	case c.FlushInterval <= 0:
		return fmt.Errorf("cannot use --cdr-flush-interval %v: must be positive", c.FlushInterval)
	case c.PartialTime <= 0:
		return fmt.Errorf("cannot use --cdr-partial-time %v: must be positive", c.PartialTime)
	case c.PartialContainers <= 0 || c.PartialContainers > 64:
		return fmt.Errorf("cannot use --cdr-partial-containers %d: must be 1..64", c.PartialContainers)
	case strings.ContainsAny(c.Node, "/\x00"):
		return fmt.Errorf("cannot use --cdr-node %q: must not contain '/'", c.Node)
	}
	return nil
}

// Recorder turns charged requests into records: an event gives one
// record at once; a session's usage accumulates in memory until its
// release (causeForRecClosing normalRelease) or a partial-record limit
// (time, volume, containers), or until Close (managementIntervention).
// A request answered as a replay whose first answer this recorder did
// not record gives a replay record (README.md, Replays). The OCP is
// stateless, so when a session's requests reach several OCP instances
// each writes records for the usage it saw; the records link by
// chargingSessionIdentifier and recordSequenceNumber, and every debit is
// in exactly one record once a collector applies the replay rule
// (package cdr/collector). Recorder implements Sink and is safe for
// concurrent use.
type Recorder struct {
	cfg    Config
	w      *Writer
	now    func() time.Time
	log    *slog.Logger
	shards [shardCount]shard
	pool   sync.Pool

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

const shardCount = 32

// doneGeneration is how many identities of requests recorded here that
// no open session remembers (releases, events, replays) a shard keeps
// per generation; it keeps two, so the recorder remembers the last
// 32 × 2,048 to 32 × 4,096 of them (about 3 MB). A replay of an older
// one gives a replay record that duplicates a record of this recorder,
// which the collector rule drops.
const doneGeneration = 2048

type key struct{ supi, session string }

type shard struct {
	mu   sync.Mutex
	open map[key]*session
	// done holds the identity hashes (ident.hash) of requests this
	// recorder recorded that no open session remembers: done[0] the
	// current generation, done[1] the previous one.
	done [2]map[uint64]struct{}
}

// markDone remembers h as recorded here, dropping the older generation
// when the current one is full.
func (sh *shard) markDone(h uint64) {
	if len(sh.done[0]) >= doneGeneration {
		sh.done[0], sh.done[1] = sh.done[1], sh.done[0]
		clear(sh.done[0])
	}
	sh.done[0][h] = struct{}{}
}

func (sh *shard) isDone(h uint64) bool {
	_, a := sh.done[0][h]
	_, b := sh.done[1][h]
	return a || b
}

// session is the open record of one charging session.
type session struct {
	k        key
	opened   time.Time
	records  uint32 // records written for the session so far
	lastSeq  uint32
	seen     bool // lastSeq is set
	charged  int64
	currency string
	volume   uint64
	usage    []Usage
}

// NewRecorder opens the writer on cfg.Dir and starts the flush loop;
// now is the clock (nil = time.Now). Close stops it.
func NewRecorder(cfg Config, now func() time.Time, log *slog.Logger) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("cdr: no --cdr-dir")
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("cannot name the CDR node: %w", err)
		}
		cfg.Node = h
	}
	w, err := NewWriter(WriterConfig{Dir: cfg.Dir, Prefix: cfg.Node, MaxSize: cfg.FileSize, MaxAge: cfg.FileAge, Fsync: cfg.Fsync, Now: now, Logger: log})
	if err != nil {
		return nil, err
	}
	r := &Recorder{cfg: cfg, w: w, now: now, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	r.pool.New = func() any { return &session{usage: make([]Usage, 0, cfg.PartialContainers)} }
	for i := range r.shards {
		r.shards[i].open = map[key]*session{}
		for g := range r.shards[i].done {
			r.shards[i].done[g] = make(map[uint64]struct{}, doneGeneration)
		}
	}
	go r.loop()
	return r, nil
}

// Writer returns the recorder's writer (for its Stats).
func (r *Recorder) Writer() *Writer { return r.w }

func hashKey(k key) uint64 {
	return chf.HashString(chf.HashUint(chf.HashString(chf.HashSeed, k.supi), uint64(len(k.supi))), k.session)
}

func (r *Recorder) shard(k key) *shard { return &r.shards[hashKey(k)%shardCount] }

// ident is the identity of one request's debit, the same on every
// transmission: the subscriber, the session (for a replayed create the
// one its first transmission opened; for an event without a session,
// its Key) and the invocationSequenceNumber. It is what a collector
// matches: (chargingSessionIdentifier, localSequenceNumber).
type ident struct {
	k     key
	event uint64 // the event's Key when k.session is empty
	seq   uint32
}

func identOf(ar *chf.ApplyRequest, resp *chf.ChargeResponse) ident {
	id := ident{k: key{ar.SUPI, ar.Session}, seq: ar.Seq}
	switch {
	case ar.Op == chf.OpCreate && resp.Session != "":
		id.k.session = resp.Session // a replayed create: the first one's session
	case ar.Op == chf.OpEvent && ar.Session == "":
		id.event = ar.Key
	}
	return id
}

func (id *ident) hash() uint64 {
	return chf.HashUint(chf.HashUint(hashKey(id.k), id.event), uint64(id.seq))
}

// Charged implements Sink. A first answer adds its usage and debit to
// the session's open record (or writes the event's record). A replayed
// answer (resp.Replayed: the ABM answered a repeat of a request it had
// applied, debiting nothing again) writes a replay record with the first
// answer's charge unless this recorder recorded that request already:
// its first answer, or an earlier replay, as far as an open session's
// last sequence number and the last identities it keeps tell. A
// replayed release also closes the session's open record here.
func (r *Recorder) Charged(ar *chf.ApplyRequest, resp *chf.ChargeResponse) {
	switch ar.Op {
	case chf.OpEvent, chf.OpCreate, chf.OpUpdate, chf.OpRelease:
	default:
		return
	}
	switch {
	case resp.Replayed:
		r.replay(ar, resp)
	case ar.Op == chf.OpEvent:
		r.event(ar, resp)
	default:
		r.session(ar, resp)
	}
}

// chargedUsage appends a used-unit container for each line of ar the ABM
// debited (rated, with usage; for an event, not refused).
func chargedUsage(dst []Usage, ar *chf.ApplyRequest, resp *chf.ChargeResponse, now time.Time) []Usage {
	for i := range ar.Lines {
		l := &ar.Lines[i]
		if l.Result != chf.ResultSuccess || l.UsedUnits == 0 {
			continue
		}
		if ar.Op == chf.OpEvent && i < len(resp.Lines) && resp.Lines[i].Result != chf.ResultSuccess {
			continue // the event's line was refused: not charged
		}
		dst = append(dst, Usage{RatingGroup: l.RatingGroup, Service: l.Service, Units: l.UsedUnits, Seq: ar.Seq, At: now})
	}
	return dst
}

// event writes the record of a one-time event the ABM charged.
func (r *Recorder) event(ar *chf.ApplyRequest, resp *chf.ChargeResponse) {
	if resp.Result != chf.ResultSuccess && resp.Charged == 0 {
		return
	}
	id := identOf(ar, resp)
	now := r.now()
	var usage [4]Usage
	rec := Record{Node: r.cfg.Node, SUPI: ar.SUPI, Consumer: FunctionalitySMSF, Session: id.k.session, EventKey: id.event, Opened: now,
		Cause: CauseNormalRelease, Charged: resp.Charged, Currency: resp.Currency, Usage: chargedUsage(usage[:0], ar, resp, now)}
	if id.k.session != "" || id.event != 0 {
		sh := r.shard(id.k)
		sh.mu.Lock()
		sh.markDone(id.hash())
		sh.mu.Unlock()
	}
	r.write(&rec)
}

// session adds a session request's usage and debit to the session's
// open record, closing it on a release, a failure the ABM charged (it
// closes such a session) or a partial-record limit.
func (r *Recorder) session(ar *chf.ApplyRequest, resp *chf.ChargeResponse) {
	failed := resp.Result != chf.ResultSuccess
	if failed && resp.Charged == 0 {
		return // refused: nothing debited, no session opened or changed
	}
	final := ar.Op == chf.OpRelease || failed
	id := identOf(ar, resp)
	k := id.k
	sh := r.shard(k)
	now := r.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.open[k]
	if s == nil {
		s = r.pool.Get().(*session)
		s.k = key{strings.Clone(k.supi), strings.Clone(k.session)}
		s.opened = now
		sh.open[k] = s
	}
	// The ABM marks repeats Replayed (see replay); a sequence number
	// not after the last one seen here is a repeat all the same.
	repeat := s.seen && ar.Seq <= s.lastSeq && ar.Op != chf.OpCreate
	if !repeat {
		s.lastSeq, s.seen = ar.Seq, true
		for i := range ar.Lines {
			l := &ar.Lines[i]
			if l.Result != chf.ResultSuccess || l.UsedUnits == 0 {
				continue
			}
			if len(s.usage) == r.cfg.PartialContainers {
				r.closeLocked(sh, s, CauseMaxChangeCond, now, false)
			}
			s.usage = append(s.usage, Usage{RatingGroup: l.RatingGroup, Service: l.Service, Units: l.UsedUnits, Seq: ar.Seq, At: now})
			if l.Service == chf.ServiceData {
				s.volume += l.UsedUnits
			}
		}
	}
	s.charged += resp.Charged
	if resp.Currency != "" && s.currency == "" {
		s.currency = strings.Clone(resp.Currency)
	}
	switch {
	case final:
		sh.markDone(id.hash())
		r.closeLocked(sh, s, CauseNormalRelease, now, true)
	case r.cfg.PartialVolume > 0 && s.volume >= r.cfg.PartialVolume:
		r.closeLocked(sh, s, CauseVolumeLimit, now, false)
	case len(s.usage) >= r.cfg.PartialContainers:
		r.closeLocked(sh, s, CauseMaxChangeCond, now, false)
	}
}

// replay handles an answer marked Replayed. Its request was applied
// once, by an earlier transmission; when this recorder has no record of
// that one (its answer was lost before any recorder here saw it, or it
// reached another OCP), the request goes into a replay record of its
// own: its usage and the first answer's charge, marked with ReplayOID.
// A replayed release closes the session's open record here, adding
// nothing to it.
func (r *Recorder) replay(ar *chf.ApplyRequest, resp *chf.ChargeResponse) {
	id := identOf(ar, resp)
	if id.k.session == "" && id.event == 0 {
		return // no identity: the ABM cannot have replayed it
	}
	final := ar.Op == chf.OpEvent || ar.Op == chf.OpRelease || resp.Result != chf.ResultSuccess
	h := id.hash()
	sh := r.shard(id.k)
	now := r.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var s *session
	if ar.Op != chf.OpEvent {
		s = sh.open[id.k]
	}
	if !sh.isDone(h) && (s == nil || !s.seen || id.seq > s.lastSeq) {
		var usage [4]Usage
		rec := Record{Node: r.cfg.Node, SUPI: ar.SUPI, Consumer: FunctionalitySMF, Session: id.k.session, EventKey: id.event,
			Opened: now, Cause: CausePartialRecord, Charged: resp.Charged, Currency: resp.Currency,
			Usage: chargedUsage(usage[:0], ar, resp, now), Replay: true, ReplaySeq: id.seq}
		if ar.Op == chf.OpEvent {
			rec.Consumer = FunctionalitySMSF
		}
		if final {
			rec.Cause = CauseNormalRelease
		}
		if rec.Charged != 0 || len(rec.Usage) > 0 {
			r.write(&rec)
			sh.markDone(h)
		}
		if s != nil {
			s.lastSeq, s.seen = id.seq, true
		}
	}
	if s != nil && final {
		r.closeLocked(sh, s, CauseNormalRelease, now, true)
	}
}

// closeLocked writes s's record with cause; final removes s (remembering
// the session as closed), otherwise s starts its next partial record.
func (r *Recorder) closeLocked(sh *shard, s *session, cause Cause, now time.Time, final bool) {
	s.records++
	rec := Record{Node: r.cfg.Node, SUPI: s.k.supi, Consumer: FunctionalitySMF, Session: s.k.session,
		Opened: s.opened, Duration: now.Sub(s.opened), Sequence: s.records, Cause: cause,
		Usage: s.usage, Charged: s.charged, Currency: s.currency}
	r.write(&rec)
	s.opened, s.usage, s.charged, s.volume = now, s.usage[:0], 0, 0
	if final {
		delete(sh.open, s.k)
		*s = session{usage: s.usage[:0]}
		r.pool.Put(s)
	}
}

func (r *Recorder) write(rec *Record) {
	if planted(rec) {
		return
	}
	if err := r.w.Write(rec); err != nil && !errors.Is(err, ErrClosed) {
		// The writer logged the first error; records are counted lost.
		return
	}
}

// loop flushes the writer and applies the time limit every
// FlushInterval.
func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.sweep(r.now(), false)
			if err := r.w.Flush(); err != nil {
				r.log.Error("cannot flush CDRs", "err", err)
			}
		}
	}
}

// sweep closes partial records of sessions open beyond PartialTime (all
// open sessions when all is set, with managementIntervention).
func (r *Recorder) sweep(now time.Time, all bool) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, s := range sh.open {
			switch {
			case all:
				if len(s.usage) > 0 || s.charged != 0 || s.records == 0 {
					r.closeLocked(sh, s, CauseManagementIntervention, now, false)
				}
			case now.Sub(s.opened) < r.cfg.PartialTime:
			case len(s.usage) == 0 && s.charged == 0 && s.records > 0:
				// Idle since its last record (released elsewhere, or
				// abandoned): nothing to write, forget it.
				delete(sh.open, s.k)
				*s = session{usage: s.usage[:0]}
				r.pool.Put(s)
			default:
				r.closeLocked(sh, s, CauseTimeLimit, now, false)
			}
		}
		sh.mu.Unlock()
	}
}

// Close writes a partial record (managementIntervention) for every
// session with unrecorded usage or debit, then flushes, syncs and
// finishes the open file. Call it after the server stopped taking
// requests: a Charged after Close is dropped.
func (r *Recorder) Close(ctx context.Context) error {
	var err error
	r.once.Do(func() {
		close(r.stop)
		select {
		case <-r.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		r.sweep(r.now(), true)
		err = r.w.Close()
		st := r.w.Stats()
		r.log.Info("CDR writer closed", "records", st.Records, "bytes", st.Bytes, "files", st.Files)
	})
	return err
}
