// Package abm is the Account Balance Manager: it keeps one record per
// subscriber on Aerospike (balance, debited total, live sessions with their
// reservations and last answers) and applies each rated charging event the
// OCP sends as one generation-checked read-modify-write of that record.
// It also provisions accounts. See README.md.
package abm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"

	"github.com/chf-testbed/testbed/chf"
)

// Errors of the ABM. Business outcomes (unknown user, quota exhausted, ...)
// are chf.Result values in the response, not errors.
var (
	// ErrContention is returned when a record kept changing under a
	// read-modify-write for every allowed attempt.
	ErrContention = errors.New("abm: account record contention: retries exhausted")
)

// Config configures a Service. Zero fields take the defaults listed.
type Config struct {
	Namespace string // Aerospike namespace; default "chf"
	Set       string // set of the account records; default "accounts"
	// Now is the clock (tests inject one); default time.Now.
	Now func() time.Time
	// SessionIdle is how long an open session is kept past its last
	// request when it holds no reservation; default 1h.
	SessionIdle time.Duration
	// ClosedTTL is how long the answer of a released session (or of an
	// event with a session id) is kept to answer retries; default 10m.
	ClosedTTL time.Duration
	// DefaultHold is how long a reservation is held when its line carries
	// neither validity nor quota holding time; default 1h.
	DefaultHold time.Duration
	// MaxSessions bounds the open sessions of one account (default
	// DefaultMaxSessions): a create beyond it is refused with
	// ResultEndUserServiceDenied, nothing reserved or charged;
	// MaxClosed the closed ones kept for retries (default 16).
	MaxSessions, MaxClosed int
	// MaxAttempts bounds the read-modify-write attempts of one event on
	// generation conflicts (default 64); backoff is jittered exponential
	// from BackoffMin (default 50µs) to BackoffMax (default 5ms).
	MaxAttempts            int
	BackoffMin, BackoffMax time.Duration
	// Timeout is the Aerospike per-command total timeout; default 1s.
	Timeout time.Duration
	// AccountCache is how many accounts' last written state the service
	// keeps to skip the read of the next event on them (default 65536;
	// negative = off). Writes stay generation-checked: a stale entry
	// costs one failed write and a fresh read, never a wrong balance.
	AccountCache int
	// AccountCacheAge is how long a cached state is used after the
	// write that stored it (default 10s). Turn the cache off when account
	// records may be deleted and re-created while the service runs: a
	// re-created record can reach the cached generation again.
	AccountCacheAge time.Duration
	// SweepRate caps the records the reservation sweep scans per second
	// (default DefaultSweepRate; negative = no cap). RunSweeper also
	// spreads each pass over 90% of its interval.
	SweepRate float64
	// NotifyQueue bounds the re-authorisations the sweep queues for the
	// CGWs to take (default 65536; a full queue drops and counts);
	// NotifyTTL is how long one waits to be taken (default 5m).
	NotifyQueue int
	NotifyTTL   time.Duration
	Logger      *slog.Logger
}

// DefaultSweepRate is the default cap of the reservation sweep, in
// records per second: at 20,000,000 accounts a pass takes about 17
// minutes and a few percent of a core (README.md, The sweep).
const DefaultSweepRate = 20000

func (c *Config) setDefaults() {
	if c.Namespace == "" {
		c.Namespace = "chf"
	}
	if c.Set == "" {
		c.Set = "accounts"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = time.Hour
	}
	if c.ClosedTTL <= 0 {
		c.ClosedTTL = 10 * time.Minute
	}
	if c.DefaultHold <= 0 {
		c.DefaultHold = time.Hour
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxClosed <= 0 {
		c.MaxClosed = 16
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 64
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 50 * time.Microsecond
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(5*time.Millisecond, c.BackoffMin)
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.AccountCache == 0 {
		c.AccountCache = 1 << 16
	}
	if c.AccountCacheAge <= 0 {
		c.AccountCacheAge = 10 * time.Second
	}
	if c.SweepRate == 0 {
		c.SweepRate = DefaultSweepRate
	}
	if c.NotifyQueue <= 0 {
		c.NotifyQueue = 1 << 16
	}
	if c.NotifyTTL <= 0 {
		c.NotifyTTL = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Stats are counters of a Service since it started.
type Stats struct {
	Applied   uint64 // events applied (records written or answered)
	Conflicts uint64 // generation conflicts retried
	Expired   uint64 // records whose expired reservations the sweep released
	// CacheHits counts events written without a read (cached state);
	// CacheStale those whose cached state was outdated (then re-read).
	CacheHits, CacheStale uint64
	// Overage is the usage, in minor units, reported beyond what the
	// balances could pay (recorded on the accounts, not debited).
	Overage uint64
	// Writes that failed in doubt (sent, answer lost), by what the
	// re-read of the record told: landed (answered as written), lost
	// (applied again on the fresh record), left in doubt (the deadline
	// passed first; answered as an error).
	InDoubtLanded, InDoubtLost, InDoubtLeft uint64
	// Replays counts the answers that repeated one already given
	// (ChargeResponse.Replayed): nothing charged again.
	Replays uint64
	// TariffEpoch is the newest tariff epoch seen on a request (0: none);
	// Reauth* count the re-authorisations the sweep queued (for a tariff
	// change, for an expired bucket), dropped (queue full or not taken in
	// time) and the CGWs took.
	TariffEpoch                                            uint32
	ReauthTariff, ReauthBucket, ReauthDropped, ReauthTaken uint64
}

// Service applies charging events to account records. It is safe for
// concurrent use; it keeps no state between requests besides pools and
// counters.
type Service struct {
	client *as.Client
	cfg    Config
	lim    limits

	readPolicy  *as.BasePolicy
	writePolicy as.WritePolicy // template: copied per write
	// Templates of ApplyBatch, copied per batch and per account.
	batchPolicy      as.BatchPolicy
	batchWritePolicy as.BatchWritePolicy
	cache            *accountCache // nil = off

	applied, conflicts, expired atomic.Uint64
	cacheHits, cacheStale       atomic.Uint64
	overage                     atomic.Uint64
	inDoubtLanded, inDoubtLost  atomic.Uint64
	inDoubtLeft                 atomic.Uint64
	replays                     atomic.Uint64

	// epoch is the newest tariff epoch seen on a rated request (0 =
	// none yet); notes the re-authorisations the sweep queued.
	epoch atomic.Uint32
	notes *notifyQueue
	sweep sweepStats
	// pace is the clock that paces the sweep's passes (real time; a test
	// injects one). Config.Now is the charging clock instead: a pass
	// sleeps on pace, never on it.
	pace passClock
}

// passClock is the time a sweep pass is paced on.
type passClock interface {
	Now() time.Time
	// SleepUntil waits until t or ctx's end (then its error).
	SleepUntil(ctx context.Context, t time.Time) error
}

// realTime is the passClock of the wall clock.
type realTime struct{}

func (realTime) Now() time.Time                                    { return time.Now() }
func (realTime) SleepUntil(ctx context.Context, t time.Time) error { return sleepUntil(ctx, t) }

// New returns a Service on client. The client stays owned by the caller.
func New(client *as.Client, cfg Config) *Service {
	resolveASMetrics()
	cfg.setDefaults()
	rp := as.NewPolicy()
	rp.TotalTimeout = cfg.Timeout
	rp.SocketTimeout = cfg.Timeout
	// While partitions migrate (a node left or came back), a read at
	// level one may answer from a copy that lacks the newest writes, or
	// none at all: the ABM would answer "no such subscriber" or compute
	// on a stale state that the generation check then refuses, again and
	// again. Level all resolves the duplicates first; outside migrations
	// it costs nothing (docs/measurements/2026-12-07-issue-49-ap-mode.md).
	rp.ReadModeAP = as.ReadModeAPAll
	wp := as.NewWritePolicy(0, 0)
	wp.TotalTimeout = cfg.Timeout
	wp.SocketTimeout = cfg.Timeout
	wp.GenerationPolicy = as.EXPECT_GEN_EQUAL
	wp.RecordExistsAction = as.UPDATE_ONLY
	// A write that failed in doubt must not be replayed blindly by the
	// client: the read-modify-write loop re-reads and decides.
	wp.MaxRetries = 0
	wp.SendKey = true
	var cache *accountCache
	if cfg.AccountCache > 0 {
		cache = newAccountCache(cfg.AccountCache, int64(cfg.AccountCacheAge), cfg.Namespace, cfg.Set)
	}
	return &Service{
		cache:  cache,
		client: client,
		cfg:    cfg,
		lim: limits{
			sessionIdle: int64(cfg.SessionIdle / time.Second),
			closedTTL:   int64(cfg.ClosedTTL / time.Second),
			defaultHold: int64(cfg.DefaultHold / time.Second),
			maxSessions: cfg.MaxSessions,
			maxClosed:   cfg.MaxClosed,
			maxRecent:   MaxRecent,
		},
		notes:            newNotifyQueue(cfg.NotifyQueue, int64(cfg.NotifyTTL)),
		readPolicy:       rp,
		writePolicy:      *wp,
		batchPolicy:      batchPolicy(),
		batchWritePolicy: batchWritePolicy(),
		pace:             realTime{},
	}
}

func batchPolicy() as.BatchPolicy {
	bp := as.NewBatchPolicy()
	bp.ReadModeAP = as.ReadModeAPAll // as the single reads (New)
	// A write that failed in doubt is not replayed by the client: the
	// events are answered with the error and retried by the caller.
	bp.MaxRetries = 0
	return *bp
}

func batchWritePolicy() as.BatchWritePolicy {
	wp := as.NewBatchWritePolicy()
	wp.GenerationPolicy = as.EXPECT_GEN_EQUAL
	wp.RecordExistsAction = as.UPDATE_ONLY
	wp.SendKey = true
	return *wp
}

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	return Stats{Applied: s.applied.Load(), Conflicts: s.conflicts.Load(), Expired: s.expired.Load(),
		CacheHits: s.cacheHits.Load(), CacheStale: s.cacheStale.Load(), Overage: s.overage.Load(),
		InDoubtLanded: s.inDoubtLanded.Load(), InDoubtLost: s.inDoubtLost.Load(), InDoubtLeft: s.inDoubtLeft.Load(),
		Replays: s.replays.Load(),

		TariffEpoch: s.epoch.Load(), ReauthTariff: s.notes.queued[reasonTariff].Load(), ReauthBucket: s.notes.queued[reasonBucket].Load(),
		ReauthDropped: s.notes.dropped.Load() + s.notes.stale.Load(), ReauthTaken: s.notes.taken.Load()}
}

// Ready reports whether the Aerospike cluster is reachable.
func (s *Service) Ready(context.Context) error {
	if !s.client.IsConnected() {
		return errors.New("abm: not connected to aerospike")
	}
	return nil
}

// scratch is the per-request working memory, pooled.
type scratch struct {
	acc  account
	blob []byte
	rp   as.BasePolicy
	wp   as.WritePolicy
	rb   recordBins
	ptrs [maxWriteBins]*as.Bin
}

// recordBins are the bins a write of an account stores, with the values
// they point to: a value in an interface would be an allocation each, and
// the client only calls Value's methods on a put (which *IntegerValue and
// *BytesValue have), so the wire bytes are the same.
type recordBins struct {
	bins  [maxWriteBins]as.Bin
	ints  [4]as.IntegerValue
	bytes as.BytesValue
}

// maxWriteBins is how many bins a write of an account stores at most.
const maxWriteBins = 5

// nullValue is what a bin removed by a write points to.
var nullValue as.NullValue

// fill sets the bins of acc, blob being its encoded sessions, and returns
// how many the write stores (the epoch only when it changed).
func (r *recordBins) fill(acc *account, blob []byte) int {
	r.ints[0], r.ints[1], r.bytes = as.IntegerValue(acc.balance), as.IntegerValue(acc.debited), as.BytesValue(blob)
	r.bins[0] = as.Bin{Name: BinBalance, Value: &r.ints[0]}
	r.bins[1] = as.Bin{Name: BinDebited, Value: &r.ints[1]}
	r.bins[2] = as.Bin{Name: BinSessions, Value: &r.bytes}
	if due := acc.sweepDue(); due != DueNever {
		r.ints[2] = as.IntegerValue(due)
		r.bins[3] = as.Bin{Name: BinDue, Value: &r.ints[2]}
	} else {
		// Nothing pending: no bin (a put of null removes it), so that
		// the many accounts at rest carry none.
		r.bins[3] = as.Bin{Name: BinDue, Value: &nullValue}
	}
	if acc.epoch == acc.epochRead {
		return 4
	}
	r.ints[3] = as.IntegerValue(int64(acc.epoch))
	r.bins[4] = as.Bin{Name: BinEpoch, Value: &r.ints[3]}
	return 5
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Apply runs one rated charging event against the account req.SUPI and
// fills resp (Lines reused). It returns an error only when the database
// failed or the record could not be updated; business outcomes (unknown
// user or session, quota, stale sequence) are in resp.Result. req and resp
// stay owned by the caller.
func (s *Service) Apply(ctx context.Context, req *chf.ApplyRequest, resp *chf.ChargeResponse) error {
	s.seeEpoch(req.Epoch)
	if req.Op == chf.OpNotifications {
		*resp = chf.ChargeResponse{Lines: resp.Lines[:0]}
		resp.Targets = s.notes.take(resp.Targets[:0], chf.NotificationsMax, time.Now().UnixNano())
		return nil
	}
	if req.SUPI == "" {
		resp.Result, resp.Detail = chf.ResultInvalid, "missing subscriber"
		return nil
	}
	req = withTopUpKey(req)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	if err := s.rmw(ctx, nil, req, resp, sc); err != nil {
		return err
	}
	if resp.Replayed {
		s.replays.Add(1)
	}
	return nil
}

// withTopUpKey returns req, or for a top-up without a Key (the operator
// gave no idempotency key) a copy with a random one: the account record
// remembers it (account.remember), so that when a write of it fails in
// doubt, the re-read after it tells whether it landed and applying it
// again credits it once even if the first write lands late. req is not
// modified.
func withTopUpKey(req *chf.ApplyRequest) *chf.ApplyRequest {
	if req.Op != chf.OpTopUp || req.Key != 0 {
		return req
	}
	c := *req
	c.Key = rand.Uint64() | 1
	return &c
}

// newKey builds the record key of supi.
func (s *Service) newKey(supi string) (*as.Key, error) {
	key, err := as.NewKey(s.cfg.Namespace, s.cfg.Set, supi)
	if err != nil {
		return nil, fmt.Errorf("cannot build account key: %w", err)
	}
	return key, nil
}

// countReplays adds the replayed answers among resps to the counter.
func (s *Service) countReplays(resps []*chf.ChargeResponse, errs []error) {
	for i, r := range resps {
		if errs[i] == nil && r.Replayed {
			s.replays.Add(1)
		}
	}
}

// rmw is the generation-checked read-modify-write loop. With the account
// cache on, a charging event on an account this process wrote last is
// first tried on the cached state (no read); any doubt falls back to the
// read-modify-write loop. key nil: the account cache's key of the
// account (found by the same lookup), else a new one.
func (s *Service) rmw(ctx context.Context, key *as.Key, req *chf.ApplyRequest, resp *chf.ChargeResponse, sc *scratch) error {
	deadline, hasDeadline := ctx.Deadline()
	if s.cache != nil {
		if req.Op != chf.OpBalance && req.Op != chf.OpSessions && req.Op != opExpire {
			var done bool
			var err error
			if done, key, err = s.applyCached(ctx, key, req, resp, sc, deadline, hasDeadline); done {
				return err
			}
		} else if key == nil {
			key = s.cache.key(req.SUPI)
		}
	}
	if key == nil {
		var err error
		if key, err = s.newKey(req.SUPI); err != nil {
			return err
		}
	}
	backoff := s.cfg.BackoffMin
	for attempt := 1; ; attempt++ {
		rp, timeout := s.readPolicy, s.cfg.Timeout
		if hasDeadline {
			// The caller's remaining budget bounds the database calls.
			left := time.Until(deadline)
			if left <= 0 {
				return fmt.Errorf("cannot update account %s: %w", req.SUPI, context.DeadlineExceeded)
			}
			if left < timeout {
				timeout = left
				sc.rp = *s.readPolicy
				sc.rp.TotalTimeout, sc.rp.SocketTimeout = timeout, timeout
				rp = &sc.rp
			}
		}
		start := time.Now()
		rec, aerr := s.client.Get(rp, key)
		observeAS(asGet, aerr, start)
		if aerr != nil {
			if aerr.Matches(types.KEY_NOT_FOUND_ERROR) {
				*resp = chf.ChargeResponse{Result: chf.ResultUserUnknown, Detail: "no such subscriber", Lines: resp.Lines[:0]}
				s.applied.Add(1)
				return nil
			}
			return fmt.Errorf("cannot read account %s: %w", req.SUPI, aerr)
		}
		acc := &sc.acc
		if err := decodeAccount(rec.Bins, acc); err != nil {
			return fmt.Errorf("cannot decode account %s: %w", req.SUPI, err)
		}
		now := s.cfg.Now().Unix()
		if !acc.apply(req, now, &s.lim, resp) {
			s.applied.Add(1)
			return nil
		}
		if hasDeadline && !time.Now().Before(deadline) {
			// The caller gave up while this ran (a paused process): write
			// nothing it will not hear of.
			return fmt.Errorf("cannot update account %s: %w", req.SUPI, context.DeadlineExceeded)
		}
		aerr = s.write(key, rec.Generation, timeout, acc, sc)
		if aerr == nil {
			s.applied.Add(1)
			s.overage.Add(uint64(acc.overNew))
			if s.cache != nil {
				s.cache.store(req.SUPI, key, rec.Generation, time.Now().UnixNano(), acc, sc.blob)
			}
			return nil
		}
		if s.cache != nil {
			s.cache.drop(req.SUPI)
		}
		if inDoubt(aerr) {
			// Sent, answer lost: the record tells whether it landed.
			landed, known := s.settle(ctx, key, rec.Generation, acc, sc.blob, []*chf.ApplyRequest{req}, settleDeadline(deadline, hasDeadline, s.cfg.Timeout))
			switch {
			case landed:
				s.applied.Add(1)
				s.overage.Add(uint64(acc.overNew))
				return nil
			case known && attempt < s.cfg.MaxAttempts:
				continue // not written: apply again on a fresh read
			}
			return fmt.Errorf("cannot write account %s (in doubt): %w", req.SUPI, aerr)
		}
		if !aerr.Matches(types.GENERATION_ERROR) {
			return fmt.Errorf("cannot write account %s: %w", req.SUPI, aerr)
		}
		s.conflicts.Add(1)
		if attempt >= s.cfg.MaxAttempts {
			return fmt.Errorf("cannot update account %s after %d attempts: %w", req.SUPI, attempt, ErrContention)
		}
		// Jittered exponential backoff: uniform in [backoff/2, backoff*3/2).
		d := backoff/2 + rand.N(backoff)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("cannot update account %s: %w", req.SUPI, ctx.Err())
		case <-t.C:
		}
		backoff = min(backoff*2, s.cfg.BackoffMax)
	}
}

// applyCached applies req to the cached state of its account and writes it
// expecting the cached generation. It reports done when the event was
// applied (or failed for good); otherwise (no entry, nothing to write, a
// stale entry) the caller reads the record and applies req again. key nil
// is taken from the entry (built when the entry has none); the key used is
// returned for the caller's read (nil when there was no entry).
func (s *Service) applyCached(ctx context.Context, key *as.Key, req *chf.ApplyRequest, resp *chf.ChargeResponse, sc *scratch, deadline time.Time, hasDeadline bool) (done bool, _ *as.Key, err error) {
	nowNs := time.Now().UnixNano()
	acc := &sc.acc
	gen, cached, ok := s.cache.load(req.SUPI, nowNs, acc)
	if key == nil {
		key = cached
	}
	if !ok {
		return false, key, nil
	}
	// Events that write nothing (replays, refusals) are answered from a
	// fresh read, never from the cache; they changed nothing, so the
	// entry gets its state back.
	if !acc.apply(req, s.cfg.Now().Unix(), &s.lim, resp) {
		s.cache.untake(req.SUPI, acc)
		return false, key, nil
	}
	timeout := s.cfg.Timeout
	if hasDeadline {
		left := time.Until(deadline)
		if left <= 0 {
			return true, key, fmt.Errorf("cannot update account %s: %w", req.SUPI, context.DeadlineExceeded)
		}
		timeout = min(timeout, left)
	}
	if key == nil {
		if key, err = s.newKey(req.SUPI); err != nil {
			return true, nil, err
		}
	}
	aerr := s.write(key, gen, timeout, acc, sc)
	if aerr == nil {
		s.applied.Add(1)
		s.overage.Add(uint64(acc.overNew))
		s.cacheHits.Add(1)
		s.cache.store(req.SUPI, key, gen, nowNs, acc, sc.blob)
		return true, key, nil
	}
	s.cache.drop(req.SUPI)
	if aerr.Matches(types.GENERATION_ERROR) {
		s.cacheStale.Add(1)
		return false, key, nil
	}
	if inDoubt(aerr) {
		landed, known := s.settle(ctx, key, gen, acc, sc.blob, []*chf.ApplyRequest{req}, settleDeadline(deadline, hasDeadline, s.cfg.Timeout))
		switch {
		case landed:
			s.applied.Add(1)
			s.overage.Add(uint64(acc.overNew))
			s.cacheHits.Add(1)
			return true, key, nil
		case known:
			return false, key, nil // not written: the caller reads and applies again
		}
		return true, key, fmt.Errorf("cannot write account %s (in doubt): %w", req.SUPI, aerr)
	}
	// The write failed before it was sent: nothing was written; report it
	// (the caller may retry with the same sequence number).
	return true, key, fmt.Errorf("cannot write account %s: %w", req.SUPI, aerr)
}

// write stores acc if the record is still at generation gen, within
// timeout.
func (s *Service) write(key *as.Key, gen uint32, timeout time.Duration, acc *account, sc *scratch) as.Error {
	sc.blob = acc.appendSessions(sc.blob[:0])
	sc.wp = s.writePolicy
	sc.wp.Generation = gen
	sc.wp.TotalTimeout, sc.wp.SocketTimeout = timeout, timeout
	n := sc.rb.fill(acc, sc.blob)
	for i := range n {
		sc.ptrs[i] = &sc.rb.bins[i]
	}
	start := time.Now()
	err := s.client.PutBins(&sc.wp, key, sc.ptrs[:n]...)
	observeAS(asPut, err, start)
	sc.rb = recordBins{}
	return err
}

// decodeAccount fills acc from a record's bins.
func decodeAccount(bins as.BinMap, acc *account) error {
	acc.reset()
	acc.balance = binInt(bins[BinBalance])
	acc.debited = binInt(bins[BinDebited])
	acc.epoch = uint32(binInt(bins[BinEpoch]))
	acc.epochRead = acc.epoch
	if c, ok := bins[BinCurrency].(string); ok {
		acc.currency = c
	}
	blob, _ := bins[BinSessions].([]byte)
	return acc.decodeSessions(blob)
}

func binInt(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	case int32:
		return int64(x)
	case uint64:
		return int64(x)
	}
	return 0
}

// seeEpoch records e (a rated request's tariff epoch) as the newest.
func (s *Service) seeEpoch(e uint32) {
	if e != 0 && s.epoch.Load() != e {
		s.epoch.Store(e)
	}
}

// sweepStats are the sweep's counters and its last pass.
type sweepStats struct {
	passes, scanned   atomic.Uint64
	lastNs, lastCount atomic.Int64  // duration and records of the last pass
	accounts          atomic.Int64  // the accounts stored when the last paced pass began
	rate              atomic.Uint64 // math.Float64bits of the cap in force
}

// sweepPaceStep is how many records the sweep scans between two checks
// of its rate cap: at 20,000 a second, a pause every 51 ms. (Every 64
// records, the ABM spent about 4 µs of CPU per record at that rate on
// this machine, against 1.4 unpaced: a wake-up of the scan's goroutines
// per pause.)
const sweepPaceStep = 1024

// sweepChunk is the most partitions (of 4096) one scan command of the
// sweep covers: a pass is at least 256 short scans, paced between them.
const sweepChunk = 16

// sweepScanRecords is about the most records one scan command of a capped
// sweep makes the store examine. The store examines a scan's records as
// fast as it can and the rate counts only those it returns, so one
// command's examination is a burst of the store's CPU: at 20 M accounts
// 16 partitions a command made the store's bursts long enough to put a
// period into the busy-hour p99 (docs/design/008-abm-reservation-sweep.md).
const sweepScanRecords = 5000

// sweepChunkFor is the partitions per scan command for n accounts: the
// largest power of two up to sweepChunk whose partitions hold at most
// sweepScanRecords (at least 1).
func sweepChunkFor(n int64) int {
	c := sweepChunk
	for c > 1 && int64(c)*n > sweepScanRecords*4096 {
		c /= 2
	}
	return c
}

// Sweep scans every account once, unpaced, releasing expired reservations
// and sessions (each with its own read-modify-write) and queueing the
// re-authorisations it finds. It returns the number of records it changed.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	return s.sweepPass(ctx, 0, 0)
}

// sweepPass is one pass of the sweep: at most rate records a second (0 =
// no cap) and, with spread > 0, partition p not before p/4096 of spread
// after the start.
func (s *Service) sweepPass(ctx context.Context, rate float64, spread time.Duration) (int, error) {
	sp := as.NewScanPolicy()
	sp.IncludeBinData = true
	chunk := sweepChunk
	if rate > 0 {
		// The store paces the scan too (Aerospike and aslite honour
		// RecordsPerSecond per node), so that it sends the records as
		// they are taken instead of a socket buffer's worth at once.
		sp.RecordsPerSecond = int(min(max(rate, 1), math.MaxInt32))
	}
	// The store examines every record, due or not, and the rate counts
	// only those it returns: a capped pass is spread over at least
	// accounts / rate, so that the store examines no more than rate
	// records a second either, in commands of about sweepScanRecords.
	// The accounts are counted again every 256 partitions, since they
	// may grow during a pass (provisioning).
	count := func() {
		n, err := s.storedAccounts()
		if err != nil {
			s.cfg.Logger.Warn("sweep: cannot count the accounts; the pass is spread over the interval only", "err", err)
			return
		}
		s.sweep.accounts.Store(n)
		spread = max(spread, time.Duration(float64(n)/rate*float64(time.Second)))
		chunk = sweepChunkFor(n)
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	var resp chf.ChargeResponse
	var targets []chf.NotifyTarget
	start := s.pace.Now()
	changed, scanned := 0, 0
	defer func() {
		s.sweep.passes.Add(1)
		s.sweep.lastNs.Store(int64(s.pace.Now().Sub(start)))
		s.sweep.lastCount.Store(int64(scanned))
	}()
	// Every chunk divides 256, so p meets each multiple of 256.
	for p := 0; p < 4096; p += chunk {
		if rate > 0 && p%256 == 0 {
			count()
		}
		if spread > 0 {
			if err := s.pace.SleepUntil(ctx, start.Add(spread*time.Duration(p)/4096)); err != nil {
				return changed, nil
			}
		}
		pf := as.NewPartitionFilterByRange(p, chunk)
		sp.FilterExpression = sweepFilter(s.cfg.Now().Unix(), s.epoch.Load())
		rs, aerr := s.client.ScanPartitions(sp, pf, s.cfg.Namespace, s.cfg.Set, BinSessions, BinEpoch)
		if aerr != nil {
			return changed, fmt.Errorf("cannot scan accounts: %w", aerr)
		}
		n, sn, err := s.sweepRecords(ctx, rs, sc, &resp, &targets, rate, start, scanned)
		rs.Close()
		changed += n
		scanned = sn
		if err != nil || ctx.Err() != nil {
			return changed, err
		}
	}
	return changed, nil
}

// sweepFilter is the filter of the sweep's scans at now with cur the newest
// tariff epoch (0 = none seen): the store returns only the records with
// work due (BinDue at or before now) and, once an epoch is known, those
// with something pending (a BinDue) whose BinEpoch is another (non-zero)
// epoch: their open sessions may have to re-authorise (sweepTargets
// decides). A record it leaves out is one the sweep would have read and
// left alone.
func sweepFilter(now int64, cur uint32) *as.Expression {
	due := as.ExpIntBin(BinDue)
	either := []*as.Expression{as.ExpLessEq(due, as.ExpIntVal(now))}
	if cur != 0 {
		te := as.ExpIntBin(BinEpoch)
		either = append(either, as.ExpAnd(
			as.ExpBinExists(BinDue),
			as.ExpBinExists(BinEpoch),
			as.ExpNotEq(te, as.ExpIntVal(0)),
			as.ExpNotEq(te, as.ExpIntVal(int64(cur))),
		))
	}
	if len(either) == 1 {
		// Aerospike 8.1 refuses an OR of one operand (PARAMETER_ERROR).
		return either[0]
	}
	return as.ExpOr(either...)
}

// storedAccounts is the number of account records in the cluster: the
// account set's objects summed over the nodes (Aerospike's "sets" info)
// and divided by the namespace's replication factor.
func (s *Service) storedAccounts() (int64, error) {
	nodes := s.client.GetNodes()
	if len(nodes) == 0 {
		return 0, errors.New("no aerospike node")
	}
	setsCmd := "sets/" + s.cfg.Namespace + "/" + s.cfg.Set
	nsCmd := "namespace/" + s.cfg.Namespace
	var total, rf int64
	for _, n := range nodes {
		info, aerr := n.RequestInfo(as.NewInfoPolicy(), setsCmd, nsCmd)
		if aerr != nil {
			return 0, aerr
		}
		objs, ok := infoInt(info[setsCmd], "objects", ':')
		if !ok && info[setsCmd] != "" {
			return 0, fmt.Errorf("cannot read the objects of %q from %q", setsCmd, info[setsCmd])
		}
		total += objs
		if r, ok := infoInt(info[nsCmd], "replication-factor", ';'); ok && r > rf {
			rf = r
		}
	}
	return total / max(rf, 1), nil
}

// infoInt reads the integer value of key from an info answer whose
// key=value pairs are separated by sep (records by ';').
func infoInt(answer, key string, sep byte) (int64, bool) {
	for _, rec := range strings.Split(answer, ";") {
		for _, kv := range strings.Split(rec, string(sep)) {
			if k, v, ok := strings.Cut(kv, "="); ok && k == key {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// sweepRecords sweeps the records of one scan; scanned counts the pass's
// records so far (for the rate cap) and is returned updated.
func (s *Service) sweepRecords(ctx context.Context, rs *as.Recordset, sc *scratch, resp *chf.ChargeResponse, targets *[]chf.NotifyTarget, rate float64, start time.Time, scanned int) (changed, _ int, _ error) {
	for res := range rs.Results() {
		if res.Err != nil {
			return changed, scanned, fmt.Errorf("cannot scan accounts: %w", res.Err)
		}
		scanned++
		s.sweep.scanned.Add(1)
		if rate > 0 && scanned%sweepPaceStep == 0 {
			if err := s.pace.SleepUntil(ctx, start.Add(time.Duration(float64(scanned)/rate*float64(time.Second)))); err != nil {
				return changed, scanned, nil
			}
		}
		if ctx.Err() != nil {
			return changed, scanned, nil
		}
		blob, _ := res.Record.Bins[BinSessions].([]byte)
		if len(blob) == 0 {
			continue
		}
		acc := &sc.acc
		if err := acc.decodeSessions(blob); err != nil {
			s.cfg.Logger.Warn("sweep: undecodable account", "err", err)
			continue
		}
		acc.epoch = uint32(binInt(res.Record.Bins[BinEpoch]))
		acc.epochRead = acc.epoch
		expired := acc.expire(s.cfg.Now().Unix())
		var n [nReasons]int
		cur := s.epoch.Load()
		var stale bool
		*targets, stale = acc.sweepTargets(cur, (*targets)[:0], &n)
		queued := true
		nowNs := time.Now().UnixNano()
		for i, t := range *targets {
			reason := reasonTariff
			if i >= n[reasonTariff] {
				reason = reasonBucket
			}
			if !s.notes.push(t, reason, nowNs) {
				queued = false
			}
		}
		req := &sweepRequest
		if stale && queued {
			// Queued: record the epoch, so the next pass does not
			// re-authorise them again. (Not queued: the next pass tries.)
			req = &chf.ApplyRequest{Op: opExpire, Epoch: cur}
		} else if !expired {
			continue
		}
		k := res.Record.Key
		key, err := as.NewKeyWithDigest(s.cfg.Namespace, s.cfg.Set, k.Value(), k.Digest())
		if err != nil {
			return changed, scanned, fmt.Errorf("cannot build account key: %w", err)
		}
		if err := s.rmw(ctx, key, req, resp, sc); err != nil {
			return changed, scanned, err
		}
		changed++
		if expired {
			s.expired.Add(1)
		}
	}
	return changed, scanned, nil
}

// sleepUntil waits until t or ctx's end (then its error).
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// sweepRequest is the internal event the sweep applies: it only expires
// (with Epoch set, it also records the tariff epoch).
var sweepRequest = chf.ApplyRequest{Op: opExpire}

// opExpire is an internal operation: release what has expired, nothing else.
const opExpire chf.Op = 255

// RunSweeper runs a sweep pass every interval until ctx ends, each paced:
// spread over 90% of the interval and capped at Config.SweepRate records
// a second, so that a pass over many accounts never takes a core for
// long. A pass that takes longer than the interval (the cap) is followed
// by the next at once. Errors are logged.
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	rate := max(s.cfg.SweepRate, 0)
	s.sweep.rate.Store(math.Float64bits(rate))
	next := s.pace.Now().Add(interval)
	for {
		if s.pace.SleepUntil(ctx, next) != nil {
			return
		}
		start := s.pace.Now()
		next = start.Add(interval)
		n, err := s.sweepPass(ctx, rate, interval*9/10)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.cfg.Logger.Warn("reservation sweep failed", "err", err)
			continue
		}
		s.cfg.Logger.Info("reservation sweep", "accounts", s.sweep.accounts.Load(), "due", s.sweep.lastCount.Load(), "changed_accounts", n,
			"notifications_pending", len(s.notes.ch), "took", time.Since(start).Round(time.Millisecond))
	}
}

// inDoubt reports whether a failed write may nevertheless have landed: the
// client sent it and lost the answer (a timeout, a dropped connection).
func inDoubt(err as.Error) bool {
	return err != nil && err.IsInDoubt()
}

// settleWait is the pause between the re-reads of settle while the store
// does not answer.
const settleWait = 20 * time.Millisecond

// settle decides a write that failed in doubt: it re-reads the record
// until it can tell whether the write of acc (its sessions encoded in
// blob) at generation gen landed, or until deadline. The record tells:
// still at gen, it did not; at gen+1, it did if its bins are what was
// written (else another write took gen+1 and this one failed its
// generation check); beyond, it did if the record remembers one of reqs
// (their identities are kept in the record, see account.holds). known is
// false when the deadline passed first or the record cannot tell (an
// operation without identity overtaken by other writes); the write then
// stays in doubt. Settling allocates; it runs only after a failure.
func (s *Service) settle(ctx context.Context, key *as.Key, gen uint32, acc *account, blob []byte, reqs []*chf.ApplyRequest, deadline time.Time) (landed, known bool) {
	var fresh account
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			s.inDoubtLeft.Add(1)
			return false, false
		}
		rp := *s.readPolicy
		rp.TotalTimeout, rp.SocketTimeout = min(left, s.cfg.Timeout), min(left, s.cfg.Timeout)
		start := time.Now()
		rec, aerr := s.client.Get(&rp, key)
		observeAS(asGet, aerr, start)
		if aerr == nil {
			landed, known = s.decide(rec, gen, acc, blob, reqs, &fresh)
			if known {
				if landed {
					s.inDoubtLanded.Add(1)
				} else {
					s.inDoubtLost.Add(1)
				}
			} else {
				s.inDoubtLeft.Add(1)
			}
			return landed, known
		}
		t := time.NewTimer(min(settleWait, max(time.Until(deadline), 0)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// decide is settle's verdict on one read of the record.
func (s *Service) decide(rec *as.Record, gen uint32, acc *account, blob []byte, reqs []*chf.ApplyRequest, fresh *account) (landed, known bool) {
	switch rec.Generation {
	case gen:
		return false, true
	case gen + 1:
		b, _ := rec.Bins[BinSessions].([]byte)
		same := binInt(rec.Bins[BinBalance]) == acc.balance && binInt(rec.Bins[BinDebited]) == acc.debited && bytes.Equal(b, blob)
		return same, true
	}
	if err := decodeAccount(rec.Bins, fresh); err != nil {
		return false, false
	}
	for _, r := range reqs {
		if present, ok := fresh.holds(r); ok {
			return present, true
		}
	}
	return false, false
}

// settleDeadline is how long settle may take: the caller's deadline, else
// one database timeout from now.
func settleDeadline(deadline time.Time, has bool, timeout time.Duration) time.Time {
	if has {
		return deadline
	}
	return time.Now().Add(timeout)
}
