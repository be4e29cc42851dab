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

// batchItem is one event of an ApplyBatch on its way through the batched
// read and write.
type batchItem struct {
	i      int // index in the batch
	key    *as.Key
	acc    account
	gen    uint32 // generation the write expects
	cached bool   // acc came from the account cache
	blob   []byte
	wpol   as.BatchWritePolicy
	bins   [3]as.Bin
	ops    [3]*as.Operation
	write  *as.BatchWrite
}

// batchState is the working memory of one ApplyBatch, pooled.
type batchState struct {
	items  []batchItem
	seen   map[string]struct{}
	reads  []*batchItem
	writes []*batchItem
	solo   []int
	keys   []*as.Key
	recs   []as.BatchRecordIfc
	bp     as.BatchPolicy
}

var batchPool = sync.Pool{New: func() any { return &batchState{seen: make(map[string]struct{})} }}

// ApplyBatch applies reqs like Apply with batched database commands: the
// accounts not in the account cache are read with one batch read, and
// every account that changed is written with one batch write in which each
// record is still generation-checked (EXPECT_GEN_EQUAL), so the money
// semantics are those of Apply. An event whose write meets a newer
// generation, an event on an account already in the batch, and the sweep's
// expiry go through Apply's read-modify-write loop one by one afterwards.
// resps[i] and errs[i] are what Apply would have answered for reqs[i].
func (s *Service) ApplyBatch(ctx context.Context, reqs []*chf.ApplyRequest, resps []*chf.ChargeResponse, errs []error) {
	if len(reqs) == 1 {
		errs[0] = s.Apply(ctx, reqs[0], resps[0])
		return
	}
	bs := batchPool.Get().(*batchState)
	defer bs.release()
	bs.items = slices.Grow(bs.items[:0], len(reqs))[:len(reqs)]
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
	bs.bp = *as.NewBatchPolicy()
	bs.bp.TotalTimeout, bs.bp.SocketTimeout = timeout, timeout
	bs.bp.MaxRetries = 0

	nowNs := time.Now().UnixNano()
	now := s.cfg.Now().Unix()
	for i, req := range reqs {
		errs[i] = nil
		if req.SUPI == "" {
			resps[i].Result, resps[i].Detail = chf.ResultInvalid, "missing subscriber"
			continue
		}
		if _, dup := bs.seen[req.SUPI]; dup || req.Op == opExpire {
			bs.solo = append(bs.solo, i)
			continue
		}
		bs.seen[req.SUPI] = struct{}{}
		key, err := as.NewKey(s.cfg.Namespace, s.cfg.Set, req.SUPI)
		if err != nil {
			errs[i] = fmt.Errorf("cannot build account key: %w", err)
			continue
		}
		it := &bs.items[i]
		it.i, it.key, it.cached = i, key, false
		if s.cache != nil && req.Op != chf.OpBalance {
			if gen, ok := s.cache.load(req.SUPI, nowNs, &it.acc); ok && it.acc.apply(req, now, &s.lim, resps[i]) {
				it.gen, it.cached = gen, true
				bs.writes = append(bs.writes, it)
				continue
			}
		}
		bs.reads = append(bs.reads, it)
	}

	s.batchRead(bs, reqs, resps, errs, now)
	s.batchWrite(bs, reqs, errs, nowNs)

	// In batch order, so that events of one account keep their order.
	slices.Sort(bs.solo)
	for _, i := range bs.solo {
		errs[i] = s.Apply(ctx, reqs[i], resps[i])
	}
}

// batchRead reads the accounts of bs.reads in one batch command and
// applies their events; those that changed join bs.writes.
func (s *Service) batchRead(bs *batchState, reqs []*chf.ApplyRequest, resps []*chf.ChargeResponse, errs []error, now int64) {
	switch len(bs.reads) {
	case 0:
		return
	case 1:
		// A batch of one costs more than a plain read: let Apply do it.
		bs.solo = append(bs.solo, bs.reads[0].i)
		return
	}
	bs.keys = bs.keys[:0]
	for _, it := range bs.reads {
		bs.keys = append(bs.keys, it.key)
	}
	recs, aerr := s.client.BatchGet(&bs.bp, bs.keys)
	for j, it := range bs.reads {
		req, resp := reqs[it.i], resps[it.i]
		if aerr != nil {
			errs[it.i] = fmt.Errorf("cannot read account %s: %w", req.SUPI, aerr)
			continue
		}
		rec := recs[j]
		if rec == nil {
			*resp = chf.ChargeResponse{Result: chf.ResultUserUnknown, Detail: "no such subscriber", Lines: resp.Lines[:0]}
			s.applied.Add(1)
			continue
		}
		if err := decodeAccount(rec.Bins, &it.acc); err != nil {
			errs[it.i] = fmt.Errorf("cannot decode account %s: %w", req.SUPI, err)
			continue
		}
		if !it.acc.apply(req, now, &s.lim, resp) {
			s.applied.Add(1)
			continue
		}
		it.gen = rec.Generation
		bs.writes = append(bs.writes, it)
	}
}

// batchWrite writes the accounts of bs.writes in one batch command, each
// expecting its generation. Conflicts go to bs.solo.
func (s *Service) batchWrite(bs *batchState, reqs []*chf.ApplyRequest, errs []error, nowNs int64) {
	if len(bs.writes) == 0 {
		return
	}
	bs.recs = bs.recs[:0]
	for _, it := range bs.writes {
		it.blob = it.acc.appendSessions(it.blob[:0])
		it.wpol = *as.NewBatchWritePolicy()
		it.wpol.GenerationPolicy = as.EXPECT_GEN_EQUAL
		it.wpol.Generation = it.gen
		it.wpol.RecordExistsAction = as.UPDATE_ONLY
		it.wpol.SendKey = true
		it.bins[0] = as.Bin{Name: BinBalance, Value: as.IntegerValue(it.acc.balance)}
		it.bins[1] = as.Bin{Name: BinDebited, Value: as.IntegerValue(it.acc.debited)}
		it.bins[2] = as.Bin{Name: BinSessions, Value: as.BytesValue(it.blob)}
		for k := range it.bins {
			it.ops[k] = as.PutOp(&it.bins[k])
		}
		it.write = as.NewBatchWrite(&it.wpol, it.key, it.ops[:]...)
		bs.recs = append(bs.recs, it.write)
	}
	aerr := s.client.BatchOperate(&bs.bp, bs.recs)
	for _, it := range bs.writes {
		req := reqs[it.i]
		br := it.write.BatchRec()
		switch br.ResultCode {
		case types.OK:
			s.applied.Add(1)
			if it.cached {
				s.cacheHits.Add(1)
			}
			if s.cache != nil {
				s.cache.store(req.SUPI, it.gen, nowNs, &it.acc, it.blob)
			}
			continue
		case types.GENERATION_ERROR:
			if s.cache != nil {
				s.cache.drop(req.SUPI)
			}
			if it.cached {
				s.cacheStale.Add(1)
			} else {
				s.conflicts.Add(1)
			}
			// Apply again on a fresh read, alone.
			bs.solo = append(bs.solo, it.i)
			continue
		}
		if s.cache != nil {
			s.cache.drop(req.SUPI)
		}
		// Failed or in doubt: like Apply, report it; the caller retries
		// with the same sequence number, which charges once.
		err := br.Err
		if err == nil {
			err = aerr
		}
		if err == nil {
			errs[it.i] = fmt.Errorf("cannot write account %s: result %v", req.SUPI, br.ResultCode)
			continue
		}
		errs[it.i] = fmt.Errorf("cannot write account %s: %w", req.SUPI, err)
	}
}

// release clears bs and returns it to the pool.
func (bs *batchState) release() {
	for i := range bs.items {
		it := &bs.items[i]
		it.key, it.write = nil, nil
		it.bins = [3]as.Bin{}
		it.ops = [3]*as.Operation{}
	}
	clear(bs.seen)
	clear(bs.reads)
	clear(bs.writes)
	clear(bs.keys)
	clear(bs.recs)
	bs.reads, bs.writes, bs.solo, bs.keys, bs.recs = bs.reads[:0], bs.writes[:0], bs.solo[:0], bs.keys[:0], bs.recs[:0]
	batchPool.Put(bs)
}
