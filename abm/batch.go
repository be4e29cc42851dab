package abm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"

	"github.com/chf-testbed/testbed/chf"
)

// batchGroup is the events of one account in an ApplyBatch, applied in
// batch order to one in-memory copy of the account and written once.
type batchGroup struct {
	supi   string
	idx    []int // the events, in batch order
	key    *as.Key
	acc    account
	gen    uint32 // generation the write expects
	cached bool   // acc came from the account cache
	blob   []byte
	wpol   as.BatchWritePolicy
	rb     recordBins
	opv    [maxWriteBins]as.Operation // what ops point to: the group's own, not one allocation per bin
	ops    [maxWriteBins]*as.Operation
	bw     as.BatchWrite // what write points to
	write  *as.BatchWrite
}

// batchState is the working memory of one ApplyBatch, pooled.
type batchState struct {
	groups []batchGroup
	byKey  map[string]int // supi → index in groups
	reads  []*batchGroup
	writes []*batchGroup
	solo   []int
	keys   []*as.Key
	recs   []as.BatchRecordIfc
	bp     as.BatchPolicy
	// ctx and deadline bound the settling of writes in doubt.
	ctx      context.Context
	deadline time.Time
}

var batchPool = sync.Pool{New: func() any { return &batchState{byKey: make(map[string]int)} }}

// ApplyBatch applies reqs like Apply with batched database commands. The
// events are grouped by account; each account's events are applied in
// batch order to one copy of its record (from the account cache, else from
// one batch read of every such account), and every account that changed is
// written once, in one batch write in which each record is still
// generation-checked (EXPECT_GEN_EQUAL). So the money semantics are those
// of Apply one event after the other: an account whose write meets a newer
// generation has its events applied again one by one through Apply's
// read-modify-write loop, as are the sweep's expiry events and requests
// without a subscriber. resps[i] and
// errs[i] are what Apply would have answered for reqs[i].
func (s *Service) ApplyBatch(ctx context.Context, reqs []*chf.ApplyRequest, resps []*chf.ChargeResponse, errs []error) {
	if len(reqs) == 1 {
		errs[0] = s.Apply(ctx, reqs[0], resps[0])
		return
	}
	defer s.countReplays(resps, errs)
	cloned := false
	for i := range reqs {
		if k := withTopUpKey(reqs[i]); k != reqs[i] {
			if !cloned {
				reqs, cloned = slices.Clone(reqs), true // the caller's slice stays as it was
			}
			reqs[i] = k
		}
	}
	bs := batchPool.Get().(*batchState)
	defer bs.release()
	timeout := s.cfg.Timeout
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		if left <= 0 {
			for i := range errs {
				errs[i] = fmt.Errorf("cannot update account %s: %w", reqs[i].SUPI, context.DeadlineExceeded)
			}
			return
		}
		timeout = min(timeout, left)
	}
	bs.bp = s.batchPolicy
	bs.bp.TotalTimeout, bs.bp.SocketTimeout = timeout, timeout
	bs.ctx, bs.deadline = ctx, time.Now().Add(timeout)

	// Group the events by account.
	for i, req := range reqs {
		errs[i] = nil
		s.seeEpoch(req.Epoch)
		if req.SUPI == "" || req.Op == opExpire {
			// Apply answers a missing subscriber; expiry is the sweep's.
			bs.solo = append(bs.solo, i)
			continue
		}
		gi, ok := bs.byKey[req.SUPI]
		if !ok {
			gi = len(bs.groups)
			if gi < cap(bs.groups) {
				bs.groups = bs.groups[:gi+1]
			} else {
				bs.groups = append(bs.groups, batchGroup{})
			}
			g := &bs.groups[gi]
			g.supi, g.key, g.idx, g.cached = req.SUPI, nil, g.idx[:0], false
			bs.byKey[req.SUPI] = gi
		}
		bs.groups[gi].idx = append(bs.groups[gi].idx, i)
	}

	// Accounts in the cache skip the read when all their events write.
	nowNs := time.Now().UnixNano()
	now := s.cfg.Now().Unix()
	for gi := range bs.groups {
		g := &bs.groups[gi]
		if s.cache != nil {
			if readsOnly(g, reqs) {
				g.key = s.cache.key(g.supi)
			} else {
				gen, key, ok := s.cache.load(g.supi, nowNs, &g.acc)
				g.key = key
				if ok && s.applyCachedGroup(g, reqs, resps, now) {
					g.gen, g.cached = gen, true
					bs.writes = append(bs.writes, g)
					continue
				}
			}
		}
		if g.key == nil {
			key, err := s.newKey(g.supi)
			if err != nil {
				for _, i := range g.idx {
					errs[i] = err
				}
				continue
			}
			g.key = key
		}
		bs.reads = append(bs.reads, g)
	}

	s.batchRead(bs, reqs, resps, errs, now)
	s.batchWrite(bs, reqs, errs, nowNs)

	// In batch order, so that events of one account keep their order.
	slices.Sort(bs.solo)
	for _, i := range bs.solo {
		errs[i] = s.Apply(ctx, reqs[i], resps[i])
	}
}

// readsOnly reports whether g holds an event that is always answered from
// a fresh read (an inquiry, the list of sessions), so that its group does
// not use the account cache.
func readsOnly(g *batchGroup, reqs []*chf.ApplyRequest) bool {
	for _, i := range g.idx {
		if op := reqs[i].Op; op == chf.OpBalance || op == chf.OpSessions {
			return true
		}
	}
	return false
}

// applyCachedGroup applies g's events to the cached state in g.acc. Like
// Apply, it gives up (false) when an event would write nothing: replays
// and refusals are answered from a fresh read. When the first event
// gives up nothing changed, and the cache gets its state back.
func (s *Service) applyCachedGroup(g *batchGroup, reqs []*chf.ApplyRequest, resps []*chf.ChargeResponse, now int64) bool {
	for k, i := range g.idx {
		if !g.acc.apply(reqs[i], now, &s.lim, resps[i]) {
			if k == 0 {
				s.cache.untake(g.supi, &g.acc)
			}
			return false
		}
	}
	return true
}

// batchRead reads the accounts of bs.reads in one batch command and
// applies their events; those that changed join bs.writes.
func (s *Service) batchRead(bs *batchState, reqs []*chf.ApplyRequest, resps []*chf.ChargeResponse, errs []error, now int64) {
	switch len(bs.reads) {
	case 0:
		return
	case 1:
		if len(bs.reads[0].idx) == 1 {
			// One event on one account: a plain read-modify-write costs
			// less than a batch.
			bs.solo = append(bs.solo, bs.reads[0].idx[0])
			return
		}
	}
	bs.keys = bs.keys[:0]
	for _, g := range bs.reads {
		bs.keys = append(bs.keys, g.key)
	}
	start := time.Now()
	recs, aerr := s.client.BatchGet(&bs.bp, bs.keys)
	observeAS(asBatchGet, aerr, start)
	asBatch[asBatchGet].Observe(float64(len(bs.keys)))
	for j, g := range bs.reads {
		if aerr != nil {
			for _, i := range g.idx {
				errs[i] = fmt.Errorf("cannot read account %s: %w", g.supi, aerr)
			}
			continue
		}
		rec := recs[j]
		if rec == nil {
			for _, i := range g.idx {
				*resps[i] = chf.ChargeResponse{Result: chf.ResultUserUnknown, Detail: "no such subscriber", Lines: resps[i].Lines[:0]}
			}
			s.applied.Add(uint64(len(g.idx)))
			continue
		}
		if err := decodeAccount(rec.Bins, &g.acc); err != nil {
			for _, i := range g.idx {
				errs[i] = fmt.Errorf("cannot decode account %s: %w", g.supi, err)
			}
			continue
		}
		write := false
		for _, i := range g.idx {
			if g.acc.apply(reqs[i], now, &s.lim, resps[i]) {
				write = true
			}
		}
		if !write {
			s.applied.Add(uint64(len(g.idx)))
			continue
		}
		g.gen = rec.Generation
		bs.writes = append(bs.writes, g)
	}
}

// batchWrite writes the accounts of bs.writes in one batch command (a
// plain write when there is one), each expecting its generation. The
// events of an account whose record changed meanwhile go to bs.solo.
func (s *Service) batchWrite(bs *batchState, reqs []*chf.ApplyRequest, errs []error, nowNs int64) {
	if len(bs.writes) == 0 {
		return
	}
	if !time.Now().Before(bs.deadline) {
		// The caller gave up while this ran: write nothing.
		for _, g := range bs.writes {
			for _, i := range g.idx {
				errs[i] = fmt.Errorf("cannot update account %s: %w", g.supi, context.DeadlineExceeded)
			}
		}
		return
	}
	var aerr as.Error
	if len(bs.writes) == 1 {
		g := bs.writes[0]
		sc := scratchPool.Get().(*scratch)
		aerr = s.write(g.key, g.gen, bs.bp.TotalTimeout, &g.acc, sc)
		g.blob = append(g.blob[:0], sc.blob...)
		scratchPool.Put(sc)
		s.wrote(g, aerr, types.OK, inDoubt(aerr), bs, reqs, errs, nowNs)
		return
	}
	bs.recs = bs.recs[:0]
	for _, g := range bs.writes {
		g.blob = g.acc.appendSessions(g.blob[:0])
		g.wpol = s.batchWritePolicy
		g.wpol.Generation = g.gen
		n := g.rb.fill(&g.acc, g.blob)
		// The client's constructors inline, so copying what they return
		// into the pooled group allocates nothing.
		for k := range n {
			g.opv[k] = *as.PutOp(&g.rb.bins[k])
			g.ops[k] = &g.opv[k]
		}
		g.bw = *as.NewBatchWrite(&g.wpol, g.key, g.ops[:n]...)
		g.write = &g.bw
		bs.recs = append(bs.recs, g.write)
	}
	start := time.Now()
	aerr = s.client.BatchOperate(&bs.bp, bs.recs)
	observeAS(asBatchOperate, aerr, start)
	asBatch[asBatchOperate].Observe(float64(len(bs.recs)))
	for _, g := range bs.writes {
		br := g.write.BatchRec()
		err := br.Err
		if err == nil && br.ResultCode != types.OK {
			err = aerr
		}
		s.wrote(g, err, br.ResultCode, br.InDoubt || inDoubt(err), bs, reqs, errs, nowNs)
	}
}

// wrote settles the events of g after its write: counted and cached when
// it landed, sent to bs.solo on a generation conflict or when a write in
// doubt proves not to have landed, failed otherwise.
func (s *Service) wrote(g *batchGroup, err as.Error, rc types.ResultCode, doubt bool, bs *batchState, reqs []*chf.ApplyRequest, errs []error, nowNs int64) {
	if err == nil && rc == types.OK {
		n := uint64(len(g.idx))
		s.applied.Add(n)
		s.overage.Add(uint64(g.acc.overNew))
		if g.cached {
			s.cacheHits.Add(n)
		}
		if s.cache != nil {
			s.cache.store(g.supi, g.key, g.gen, nowNs, &g.acc, g.blob)
		}
		return
	}
	if s.cache != nil {
		s.cache.drop(g.supi)
	}
	if rc == types.GENERATION_ERROR || (err != nil && err.Matches(types.GENERATION_ERROR)) {
		if g.cached {
			s.cacheStale.Add(1)
		} else {
			s.conflicts.Add(1)
		}
		// Apply again on a fresh read, one by one.
		bs.solo = append(bs.solo, g.idx...)
		return
	}
	if doubt {
		mine := make([]*chf.ApplyRequest, len(g.idx))
		for k, i := range g.idx {
			mine[k] = reqs[i]
		}
		landed, known := s.settle(bs.ctx, g.key, g.gen, &g.acc, g.blob, mine, bs.deadline)
		switch {
		case landed:
			s.applied.Add(uint64(len(g.idx)))
			s.overage.Add(uint64(g.acc.overNew))
			return
		case known:
			bs.solo = append(bs.solo, g.idx...) // not written: apply again
			return
		}
	}
	// Failed, or still in doubt: like Apply, report it; the caller retries
	// with the same sequence number, which charges once.
	for _, i := range g.idx {
		if err != nil {
			errs[i] = fmt.Errorf("cannot write account %s: %w", g.supi, err)
		} else {
			errs[i] = fmt.Errorf("cannot write account %s: result %v", g.supi, rc)
		}
	}
}

// release clears bs and returns it to the pool.
func (bs *batchState) release() {
	for i := range bs.groups {
		g := &bs.groups[i]
		g.supi, g.key, g.write = "", nil, nil
		g.rb, g.bw = recordBins{}, as.BatchWrite{}
		g.opv, g.ops = [maxWriteBins]as.Operation{}, [maxWriteBins]*as.Operation{}
	}
	bs.groups = bs.groups[:0]
	bs.ctx = nil
	clear(bs.byKey)
	clear(bs.reads)
	clear(bs.writes)
	clear(bs.keys)
	clear(bs.recs)
	bs.reads, bs.writes, bs.solo, bs.keys, bs.recs = bs.reads[:0], bs.writes[:0], bs.solo[:0], bs.keys[:0], bs.recs[:0]
	batchPool.Put(bs)
}
