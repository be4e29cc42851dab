package abm

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// uncachedEncoding encodes a's sessions without their cached encodings
// (session.enc), leaving a as it is.
func uncachedEncoding(a *account) []byte {
	c := *a
	c.sessions = make([]session, len(a.sessions))
	for i, s := range a.sessions {
		s.enc, s.encOK = nil, false
		c.sessions[i] = s
	}
	return c.appendSessions(nil)
}

// sessionScript draws charging events on one account with many sessions:
// creates (some beyond the cap), updates with the next, the same (a
// retransmission), an older or a reused sequence number, releases,
// one-time events, the operator's abort and unbar, top-ups with
// allowance buckets, inquiries, unknown sessions, and time passing so that
// reservations, closed sessions and identities expire.
type sessionScript struct {
	rng  *rand.Rand
	now  int64
	ids  []string
	seq  map[string]uint32
	next int
}

func newSessionScript(seed uint64) *sessionScript {
	return &sessionScript{rng: rand.New(rand.NewPCG(seed, 19)), now: 1_800_000_000, seq: map[string]uint32{}}
}

func (sc *sessionScript) line() chf.RatedLine {
	l := dataLine(uint64(sc.rng.IntN(3_000_000)), uint64(1+sc.rng.IntN(8))*1_000_000)
	l.ValidityTime = uint32(30 + sc.rng.IntN(600))
	if sc.rng.IntN(4) == 0 {
		l = chf.RatedLine{RatingGroup: 20, Service: chf.ServiceVoice, UsedUnits: uint64(sc.rng.IntN(120)), Request: true,
			GrantUnits: 60, Price: 1, UnitSize: 1, QuotaHoldingTime: uint32(20 + sc.rng.IntN(300))}
		l.UsedCost = chf.Cost(l.UsedUnits, l.Price, l.UnitSize)
	}
	return l
}

// step returns the next event and advances the script's clock.
func (sc *sessionScript) step() chf.ApplyRequest {
	r := sc.rng
	if r.IntN(20) == 0 {
		sc.now += int64(r.IntN(400))
	}
	pick := func() string {
		if len(sc.ids) == 0 || r.IntN(50) == 0 {
			return "no-such-session"
		}
		return sc.ids[r.IntN(len(sc.ids))]
	}
	digest := r.Uint64() % 3
	epoch := uint32(r.IntN(3)) // 0: not rated (an inquiry's), else the tariff's
	switch n := r.IntN(100); {
	case n < 30:
		sc.next++
		id := fmt.Sprintf("%016x", uint64(sc.next)*0x9e3779b97f4a7c15)
		sc.ids = append(sc.ids, id)
		req := chf.ApplyRequest{Op: chf.OpCreate, Session: id, Key: uint64(sc.next), Digest: digest, Epoch: epoch, Lines: []chf.RatedLine{sc.line()}}
		if r.IntN(3) == 0 {
			req.Notify = []byte("http://smf.example/notify/" + id)
		}
		return req
	case n < 70:
		id := pick()
		q := sc.seq[id]
		switch r.IntN(8) {
		case 0: // a retransmission (or a mismatch, by its digest)
		case 1:
			q = q / 2 // older
		default:
			q++
		}
		sc.seq[id] = max(sc.seq[id], q)
		op := chf.OpUpdate
		if r.IntN(6) == 0 {
			op = chf.OpRelease
		}
		return chf.ApplyRequest{Op: op, Session: id, Seq: q, Digest: digest, Epoch: epoch, Lines: []chf.RatedLine{sc.line()}}
	case n < 80:
		sc.next++
		req := chf.ApplyRequest{Op: chf.OpEvent, Key: uint64(sc.next), Digest: digest, Lines: []chf.RatedLine{smsLine(int64(1 + r.IntN(9)))}}
		if r.IntN(2) == 0 {
			req.Session = fmt.Sprintf("sms-%d", sc.next)
		}
		return req
	case n < 83:
		return chf.ApplyRequest{Op: chf.OpAbortSessions}
	case n < 88:
		return chf.ApplyRequest{Op: chf.OpUnbar}
	case n < 91:
		return chf.ApplyRequest{Op: chf.OpTopUp, TopUp: chf.TopUp{Amount: int64(r.IntN(1000)), Bucket: chf.Bucket{Service: chf.ServiceData, Units: uint64(r.IntN(20_000_000)), Expires: int64(r.IntN(900))}}}
	case n < 95:
		return chf.ApplyRequest{Op: chf.OpSessions}
	default:
		return chf.ApplyRequest{Op: chf.OpBalance}
	}
}

// TestSessionEncodingCacheIsExact: an account kept decoded across events
// (as the account cache keeps a heavy one) re-encodes only the sessions
// each event changed, reusing the others' cached encodings. After every
// event of a long random script its blob must equal the encoding of every
// session afresh, and a twin decoded from the previous blob before each
// event (no cached encodings, as on a read) must answer the same and
// write the same blob.
func TestSessionEncodingCacheIsExact(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			lim := limits{sessionIdle: 300, closedTTL: 600, defaultHold: 600, maxSessions: 150, maxClosed: 16, maxRecent: MaxRecent}
			kept := &account{balance: 50_000, currency: "EUR"}
			sc := newSessionScript(seed)
			var blob []byte
			maxSessions, reencoded, total := 0, 0, 0
			for i := range 6000 {
				req := sc.step()
				var twin account
				if err := twin.decodeSessions(blob); err != nil {
					t.Fatalf("event %d: decode: %v", i, err)
				}
				twin.balance, twin.debited, twin.currency = kept.balance, kept.debited, kept.currency
				twin.epoch, twin.epochRead = kept.epoch, kept.epochRead
				var got, want chf.ChargeResponse
				for j := range kept.sessions {
					if !kept.sessions[j].encOK {
						reencoded++
					}
				}
				wrote := kept.apply(&req, sc.now, &lim, &got)
				twrote := twin.apply(&req, sc.now, &lim, &want)
				if wrote != twrote || !reflect.DeepEqual(got, want) {
					t.Fatalf("event %d (%+v): kept answers %+v (write %v), decoded twin %+v (write %v)", i, req, got, wrote, want, twrote)
				}
				fresh := uncachedEncoding(kept)
				blob = kept.appendSessions(blob[:0])
				if !bytes.Equal(blob, fresh) {
					t.Fatalf("event %d (%+v): the blob from cached encodings differs from a fresh encoding:\n%x\n%x", i, req, blob, fresh)
				}
				if tb := twin.appendSessions(nil); !bytes.Equal(tb, blob) {
					t.Fatalf("event %d (%+v): the twin writes another blob", i, req)
				}
				maxSessions = max(maxSessions, len(kept.sessions))
				total += len(kept.sessions)
			}
			if maxSessions < heavySessions {
				t.Fatalf("the script held at most %d sessions, not a heavy account (%d)", maxSessions, heavySessions)
			}
			// Only a fraction of the sessions is encoded again per event.
			if reencoded*4 > total {
				t.Errorf("%d of %d session encodings were redone", reencoded, total)
			}
		})
	}
}

// TestHeavyAccountCacheIsExact: the same script on a heavy account
// through a service whose cache keeps it decoded, one event at a time and
// in batches, and through a service without a cache on a twin store:
// every answer, and the balances at the end, must be equal; the heavy
// account must have been served from its decoded entry.
func TestHeavyAccountCacheIsExact(t *testing.T) {
	const supi = "imsi-001010000000001"
	clk := newFakeClock()
	clk.sec.Store(1_800_000_000)
	clA, clB := startStore(t), startStore(t)
	provisionAccounts(t, clA, supi, 1, 50_000)
	provisionAccounts(t, clB, supi, 1, 50_000)
	cached := New(clA, Config{Now: clk.Now, MaxSessions: 150})
	plain := New(clB, Config{Now: clk.Now, MaxSessions: 150, AccountCache: -1})
	ctx := context.Background()
	sc := newSessionScript(7)
	decoded := 0
	for i := 0; i < 3000; {
		n := 1 + i%5
		batch := make([]chf.ApplyRequest, n)
		for k := range batch {
			before := sc.now
			batch[k] = sc.step()
			batch[k].SUPI = supi
			clk.sec.Add(sc.now - before)
		}
		reqs := make([]*chf.ApplyRequest, n)
		resps := make([]*chf.ChargeResponse, n)
		errs := make([]error, n)
		for k := range batch {
			reqs[k], resps[k] = &batch[k], new(chf.ChargeResponse)
		}
		if i%2 == 0 {
			cached.ApplyBatch(ctx, reqs, resps, errs)
		} else {
			for k := range reqs {
				errs[k] = cached.Apply(ctx, reqs[k], resps[k])
			}
		}
		for k := range batch {
			var want chf.ChargeResponse
			werr := plain.Apply(ctx, &batch[k], &want)
			if errs[k] != nil || werr != nil {
				t.Fatalf("event %d: %v / %v", i+k, errs[k], werr)
			}
			got := *resps[k]
			if len(got.Lines) == 0 && len(want.Lines) == 0 {
				got.Lines, want.Lines = nil, nil
			}
			if len(got.Targets) == 0 && len(want.Targets) == 0 {
				got.Targets, want.Targets = nil, nil
			}
			if len(got.Buckets) == 0 && len(want.Buckets) == 0 {
				got.Buckets, want.Buckets = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("event %d (%+v):\n cached %+v\n  plain %+v", i+k, batch[k], got, want)
			}
		}
		i += n
		h, sh := cached.cache.locate(supi)
		sh.mu.Lock()
		if _, e := sh.find(h, supi); e != nil && e.heavy {
			decoded++
		}
		sh.mu.Unlock()
	}
	var ra, rb chf.ChargeResponse
	if err := cached.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi}, &ra); err != nil {
		t.Fatal(err)
	}
	if err := plain.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi}, &rb); err != nil {
		t.Fatal(err)
	}
	if ra.Balance != rb.Balance || ra.Debited != rb.Debited || ra.Reserved != rb.Reserved || ra.Debited == 0 {
		t.Fatalf("cached: balance %d debited %d reserved %d; plain: %d %d %d", ra.Balance, ra.Debited, ra.Reserved, rb.Balance, rb.Debited, rb.Reserved)
	}
	// The records themselves: every bin, the session blob byte for byte.
	key, err := cached.newKey(supi)
	if err != nil {
		t.Fatal(err)
	}
	recA, errA := clA.Get(nil, key)
	recB, errB := clB.Get(nil, key)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	for _, bin := range []string{BinBalance, BinDebited, BinEpoch, BinCurrency, BinSessions} {
		if !reflect.DeepEqual(recA.Bins[bin], recB.Bins[bin]) {
			t.Errorf("bin %s: cached service wrote %v, plain %v", bin, recA.Bins[bin], recB.Bins[bin])
		}
	}
	if decoded < 500 || cached.Stats().CacheHits < 500 {
		t.Fatalf("the heavy account was not served decoded from the cache (decoded after %d of 1000 steps, hits %d)", decoded, cached.Stats().CacheHits)
	}
}

// TestHeavyAccountConcurrentEvents: events on one heavy account from many
// goroutines through one service take its decoded entry in turn (a
// concurrent event reads the record instead); every debit lands once.
func TestHeavyAccountConcurrentEvents(t *testing.T) {
	const supi = "imsi-001010000000001"
	cl := startStore(t)
	provisionAccounts(t, cl, supi, 1, 10_000_000)
	svc := New(cl, Config{MaxSessions: 1024})
	ctx := context.Background()
	for i := range heavySessions + 8 {
		var resp chf.ChargeResponse
		req := chf.ApplyRequest{Op: chf.OpCreate, SUPI: supi, Session: fmt.Sprintf("open-%d", i), Lines: []chf.RatedLine{dataLine(0, 1_000_000)}}
		if err := svc.Apply(ctx, &req, &resp); err != nil || resp.Result != chf.ResultSuccess {
			t.Fatalf("create %d: %+v %v", i, resp, err)
		}
	}
	const workers, each = 4, 60
	var mu sync.Mutex
	var charged int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var resp chf.ChargeResponse
				req := chf.ApplyRequest{Op: chf.OpEvent, SUPI: supi, Key: uint64(w*each + i + 1), Lines: []chf.RatedLine{smsLine(int64(1 + i%5))}}
				var err error
				if i%3 == 0 {
					resps, errs := []*chf.ChargeResponse{&resp, new(chf.ChargeResponse)}, make([]error, 2)
					second := chf.ApplyRequest{Op: chf.OpEvent, SUPI: supi, Key: uint64(1_000_000 + w*each + i), Lines: []chf.RatedLine{smsLine(2)}}
					svc.ApplyBatch(ctx, []*chf.ApplyRequest{&req, &second}, resps, errs)
					err = errs[0]
					if errs[1] == nil {
						mu.Lock()
						charged += resps[1].Charged
						mu.Unlock()
					}
				} else {
					err = svc.Apply(ctx, &req, &resp)
				}
				if err != nil {
					t.Errorf("event: %v", err)
					return
				}
				mu.Lock()
				charged += resp.Charged
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var resp chf.ChargeResponse
	if err := New(cl, Config{AccountCache: -1}).Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Debited != charged || resp.Balance != 10_000_000-charged || charged == 0 {
		t.Fatalf("debited %d, balance %d; the events charged %d", resp.Debited, resp.Balance, charged)
	}
}

// TestCacheKeepsHeavyAccountsDecoded: an account with heavySessions
// sessions is kept decoded; load hands its state over as written (the
// epoch as read, no overage of its own) and leaves the entry taken, so a
// second load misses until store or untake gives it back; an account
// below heavySessions is kept as its blob.
func TestCacheKeepsHeavyAccountsDecoded(t *testing.T) {
	c := newAccountCache(1000, int64(1<<62), "chf", "accounts")
	lim := limits{sessionIdle: 300, closedTTL: 600, defaultHold: 600, maxSessions: 1000, maxClosed: 16, maxRecent: MaxRecent}
	heavy := &account{balance: 1 << 40, currency: "EUR", epoch: 3, epochRead: 2, overNew: 9}
	openSessions(t, heavy, &lim, heavySessions, 1_800_000_000)
	want := heavy.appendSessions(nil)
	bal := heavy.balance
	c.store("heavy", nil, 5, 1, heavy, want)

	var got account
	gen, _, ok := c.load("heavy", 2, &got)
	if !ok || gen != 6 {
		t.Fatalf("load: ok %v gen %d", ok, gen)
	}
	if got.balance != bal || got.epoch != 3 || got.epochRead != 3 || got.overNew != 0 || !bytes.Equal(got.appendSessions(nil), want) {
		t.Fatalf("loaded balance %d epoch %d/%d overNew %d", got.balance, got.epoch, got.epochRead, got.overNew)
	}
	var again account
	if _, _, ok := c.load("heavy", 2, &again); ok {
		t.Fatal("a taken entry was loaded twice")
	}
	c.untake("heavy", &got)
	if _, _, ok := c.load("heavy", 2, &again); !ok || !bytes.Equal(again.appendSessions(nil), want) {
		t.Fatal("the entry given back by untake does not load as it was")
	}

	light := &account{balance: 1 << 40, currency: "EUR"}
	openSessions(t, light, &lim, heavySessions-1, 1_800_000_000)
	c.store("light", nil, 1, 1, light, light.appendSessions(nil))
	h, sh := c.locate("light")
	if i, e := sh.find(h, "light"); e == nil || e.heavy || sh.heavy[i] != nil || e.size <= uint32(len("light")) {
		t.Fatal("an account below heavySessions is not kept as its blob")
	}
	if _, _, ok := c.load("light", 2, &got); !ok || len(got.sessions) != heavySessions-1 || got.balance != light.balance {
		t.Fatalf("light account loaded %v: %d sessions, balance %d", ok, len(got.sessions), got.balance)
	}
	if _, _, ok := c.load("light", 2, &got); !ok {
		t.Fatal("a blob entry is not loaded twice")
	}
}
