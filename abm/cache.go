package abm

import (
	"hash/maphash"
	"math"
	"sync"

	as "github.com/aerospike/aerospike-client-go/v7"
)

// accountCache keeps the state each account had after this process last
// wrote it, with the record's generation after that write. A charging event
// on a cached account skips the read: it is applied to the cached state
// and written with that generation expected (EXPECT_GEN_EQUAL), so when
// anyone else wrote the record meanwhile (another ABM pod, the sweep, a
// provisioning run) the write fails, the entry is dropped and the event is
// applied again on a fresh read. The cache saves one database round trip
// per event and never decides money on its own: the generation check does.
//
// It is sharded by key; each shard holds at most perShard entries and
// drops an arbitrary one when full. Entries older than maxAge are not used.
//
// The cache holds no pointers for the garbage collector to follow: each
// shard keeps its entries in one slice of pointer-free slots, indexed by a
// map from the SUPI's 64-bit hash to the slot (pointer-free too), and
// their variable parts (the SUPI, to tell hash collisions apart, and the
// session blob) in one byte arena. A mark phase then scans nothing of it,
// however many accounts it holds: with an entry per account of
// heap objects (the entry, its blob, its record key) the ABM's GC marks
// took 35–54 ms of its one CPU at 18,000 TPS with 65,536 accounts cached,
// and each was a second whose p99 missed (issue 19). The record key is
// kept as its digest, and built again (no RIPEMD-160, two small
// allocations) when asked for.
//
// An account with heavySessions sessions or more is kept decoded rather
// than as its session blob: its next event then decodes nothing, and
// re-encodes only the sessions it changes (session.enc), so an event on
// an account holding hundreds of open sessions (a popular subscriber under
// a skewed load) costs a copy of its record rather than a decode and an
// encode of every session. The event takes the decoded state out of the
// entry (load) and gives it back with its write (store); meanwhile the
// entry is unusable, and a concurrent event on the account reads the
// record. Those few accounts are the cache's only pointers.
type accountCache struct {
	seed     maphash.Seed
	perShard int
	maxAge   int64 // unix ns
	// namespace and set build the record keys given back.
	namespace, set string
	shards         [cacheShards]cacheShard
}

const cacheShards = 64

// heavySessions is how many sessions (open and closed) make an account
// kept decoded in the cache. Closed sessions are at most 16 (MaxClosed),
// so such an account has at least 16 open: a decoded session takes about
// nine times its encoded size, which only accounts this large repay.
const heavySessions = 32

type cacheShard struct {
	mu    sync.Mutex
	index map[uint64]int32 // SUPI hash -> slot
	slots []cacheSlot
	free  []int32 // slots dropped
	// arena holds each slot's region: its SUPI then its blob. Regions
	// left behind (a record outgrew its region, a slot was dropped) are
	// waste, reclaimed by compact.
	arena []byte
	held  int // bytes of the live slots' regions
	waste int
	// curs interns the currencies of the shard's accounts (a slot keeps
	// an index), so that a load allocates no string.
	curs []string
	// heavy holds the decoded state of the slots kept decoded.
	heavy map[int32]*account
}

// cacheSlot is one cached account: the stored state of its record.
type cacheSlot struct {
	hash    uint64
	at      int64 // unix ns of the write
	balance int64
	debited int64
	gen     uint32 // record generation after our write
	epoch   uint32 // BinEpoch, as written
	// off, size, room: the slot's region of the arena (SUPI then blob),
	// its bytes used and its capacity.
	off, size, room uint32
	supiLen         uint16
	cur             uint8 // index into the shard's curs
	used            bool
	hasKey          bool
	// heavy: the state is the shard's heavy[slot] (no blob); taken
	// while an event works on it (load to store).
	heavy  bool
	taken  bool
	digest [20]byte // the record key's
}

// maxCurrencies is how many currencies a shard interns; an account in
// another one is not cached.
const maxCurrencies = 255

func newAccountCache(entries int, maxAge int64, namespace, set string) *accountCache {
	c := &accountCache{seed: maphash.MakeSeed(), perShard: max(1, entries/cacheShards), maxAge: maxAge, namespace: namespace, set: set}
	for i := range c.shards {
		c.shards[i].index = make(map[uint64]int32)
	}
	return c
}

// locate returns supi's hash and shard.
func (c *accountCache) locate(supi string) (uint64, *cacheShard) {
	h := maphash.String(c.seed, supi)
	return h, &c.shards[h%cacheShards]
}

// find returns supi's slot, or -1 and nil.
func (sh *cacheShard) find(h uint64, supi string) (int32, *cacheSlot) {
	i, ok := sh.index[h]
	if !ok {
		return -1, nil
	}
	e := &sh.slots[i]
	if string(sh.arena[e.off:e.off+uint32(e.supiLen)]) != supi {
		return -1, nil // another SUPI of the same hash
	}
	return i, e
}

// newKey builds the record key of supi from the digest a slot kept; nil
// when it kept none.
func (c *accountCache) newKey(supi string, has bool, digest *[20]byte) *as.Key {
	if !has {
		return nil
	}
	k, err := as.NewKeyWithDigest(c.namespace, c.set, as.StringValue(supi), digest[:]) // a Value: boxed once
	if err != nil {
		return nil // cannot happen: the digest has 20 bytes
	}
	return k
}

// load decodes the cached state of supi into acc and returns its
// generation; ok is false when there is no usable entry. key is the
// record's key when supi has an entry, usable or not (too old), else nil.
// An account kept decoded is swapped into acc and the entry left taken
// until store (or untake) gives it back.
func (c *accountCache) load(supi string, now int64, acc *account) (gen uint32, key *as.Key, ok bool) {
	h, sh := c.locate(supi)
	sh.mu.Lock()
	i, e := sh.find(h, supi)
	if e == nil {
		sh.mu.Unlock()
		return 0, nil, false
	}
	hasKey, digest := e.hasKey, e.digest
	switch {
	case now-e.at > c.maxAge || e.taken:
	case e.heavy:
		// The entry keeps acc's old memory until store swaps back.
		a := sh.heavy[i]
		*acc, *a = *a, *acc
		acc.overNew = 0
		e.taken = true
		gen, ok = e.gen, true
	default:
		acc.reset()
		acc.balance, acc.debited, acc.currency = e.balance, e.debited, sh.curs[e.cur]
		acc.epoch, acc.epochRead = e.epoch, e.epoch
		// decodeSessions does not retain the arena's bytes.
		if err := acc.decodeSessions(sh.arena[e.off+uint32(e.supiLen) : e.off+e.size]); err != nil {
			sh.remove(i)
		} else {
			gen, ok = e.gen, true
		}
	}
	sh.mu.Unlock()
	return gen, c.newKey(supi, hasKey, &digest), ok
}

// key returns the record key of supi when it has an entry, else nil.
func (c *accountCache) key(supi string) *as.Key {
	h, sh := c.locate(supi)
	sh.mu.Lock()
	var has bool
	var digest [20]byte
	if _, e := sh.find(h, supi); e != nil {
		has, digest = e.hasKey, e.digest
	}
	sh.mu.Unlock()
	return c.newKey(supi, has, &digest)
}

// untake gives back the decoded state load took into acc, unchanged (an
// event that wrote nothing); nothing when supi's entry is not taken.
func (c *accountCache) untake(supi string, acc *account) {
	h, sh := c.locate(supi)
	sh.mu.Lock()
	if i, e := sh.find(h, supi); e != nil && e.taken && e.heavy {
		a := sh.heavy[i]
		*acc, *a = *a, *acc
		e.taken = false
	}
	sh.mu.Unlock()
}

// store records that supi (whose record key is key) was written by this
// process at generation written-from gen (its new generation is the next
// one): acc, its sessions encoded in blob. An account with heavySessions
// or more sessions is kept decoded: its state is swapped out of acc,
// which is left holding the entry's spare memory, so the caller must not
// read acc afterwards.
func (c *accountCache) store(supi string, key *as.Key, fromGen uint32, now int64, acc *account, blob []byte) {
	gen := nextGeneration(fromGen)
	h, sh := c.locate(supi)
	heavy := len(acc.sessions) >= heavySessions
	if heavy {
		blob = nil // kept decoded instead
	}
	if len(supi) > math.MaxUint16 || len(supi)+len(blob) > math.MaxInt32 {
		c.drop(supi) // not worth a slot
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cur := 0
	if !heavy {
		if cur = sh.intern(acc.currency); cur < 0 {
			if i, e := sh.find(h, supi); e != nil {
				sh.remove(i)
			}
			return
		}
	}
	i, e := sh.find(h, supi)
	if e == nil {
		i = sh.claim(h, c.perShard)
	}
	if !sh.place(i, supi, blob) {
		sh.remove(i)
		return
	}
	e = &sh.slots[i]
	e.gen, e.at, e.taken = gen, now, false
	e.hasKey = key != nil
	if key != nil {
		copy(e.digest[:], key.Digest())
	}
	if heavy {
		if sh.heavy == nil {
			sh.heavy = make(map[int32]*account)
		}
		a := sh.heavy[i]
		if a == nil {
			a = new(account)
			sh.heavy[i] = a
		}
		*a, *acc = *acc, *a
		a.epochRead, a.overNew = a.epoch, 0
		e.heavy = true
		return
	}
	if e.heavy {
		delete(sh.heavy, i)
		e.heavy = false
	}
	e.balance, e.debited, e.cur, e.epoch = acc.balance, acc.debited, uint8(cur), acc.epoch
}

// intern returns the index of currency in the shard's table, adding it;
// -1 when the table is full.
func (sh *cacheShard) intern(currency string) int {
	for i, c := range sh.curs {
		if c == currency {
			return i
		}
	}
	if len(sh.curs) >= maxCurrencies {
		return -1
	}
	sh.curs = append(sh.curs, currency)
	return len(sh.curs) - 1
}

// claim returns a slot for a new entry of hash h, indexed and in use:
// the entry of another SUPI with that hash, a dropped slot, a new one
// while the shard holds fewer than perShard, else an arbitrary entry
// evicted. The slot keeps its region for place to reuse.
func (sh *cacheShard) claim(h uint64, perShard int) int32 {
	i, ok := sh.index[h]
	switch {
	case ok:
	case len(sh.free) > 0:
		i = sh.free[len(sh.free)-1]
		sh.free = sh.free[:len(sh.free)-1]
	case len(sh.slots) < perShard:
		sh.slots = append(sh.slots, cacheSlot{})
		i = int32(len(sh.slots) - 1)
	default:
		// Full: an arbitrary entry makes room, and its region of the
		// arena is reused for the new one, so that a cache churning over
		// more accounts than it holds allocates nothing and leaves no
		// garbage.
		for k, j := range sh.index {
			delete(sh.index, k)
			i = j
			break
		}
	}
	e := &sh.slots[i]
	if e.heavy {
		delete(sh.heavy, i)
		e.heavy = false
	}
	e.hash, e.used = h, true
	sh.index[h] = i
	return i
}

// place writes supi and blob into slot i's region: in place when they fit
// and the region is not far larger than needed, else in a new region at
// the arena's end (the old one becomes waste). Without the second
// condition a slot would keep the largest record it ever held (slots are
// reused across accounts), so the arena would ratchet up to the cache's
// size x the largest record seen instead of following the records it
// holds. false: the arena cannot hold it (its offsets are 32-bit).
func (sh *cacheShard) place(i int32, supi string, blob []byte) bool {
	e := &sh.slots[i]
	need := uint32(len(supi) + len(blob))
	if e.room < need || e.room > 2*need+blobSlack {
		sh.held -= int(e.room)
		sh.waste += int(e.room)
		room := need + need/8 // a session more fits in place
		if sh.waste > sh.held/2+arenaSlack || len(sh.arena)+int(room) > math.MaxUint32 {
			sh.compact(i)
		}
		if len(sh.arena)+int(room) > math.MaxUint32 {
			e.off, e.room = 0, 0
			return false
		}
		e.off, e.room = uint32(len(sh.arena)), room
		sh.arena = append(sh.arena, make([]byte, room)...)
		sh.held += int(room)
	}
	e.supiLen, e.size = uint16(len(supi)), need
	copy(sh.arena[e.off:], supi)
	copy(sh.arena[e.off+uint32(len(supi)):], blob)
	return true
}

// arenaSlack is how many bytes of waste a shard's arena may hold beyond
// half its live regions before it is compacted.
const arenaSlack = 4 << 10

// compact moves the live regions, except slot skip's (given a new one by
// the caller), into a new arena of their size, leaving no waste.
func (sh *cacheShard) compact(skip int32) {
	arena := make([]byte, 0, sh.held+sh.held/8)
	held := 0
	for j := range sh.slots {
		e := &sh.slots[j]
		if !e.used || int32(j) == skip {
			e.off, e.room = 0, 0
			continue
		}
		off := len(arena)
		arena = append(arena, sh.arena[e.off:e.off+e.room]...)
		e.off = uint32(off)
		held += int(e.room)
	}
	sh.arena, sh.held, sh.waste = arena, held, 0
}

// remove forgets slot i.
func (sh *cacheShard) remove(i int32) {
	e := &sh.slots[i]
	delete(sh.index, e.hash)
	if e.heavy {
		delete(sh.heavy, i)
	}
	sh.held -= int(e.room)
	sh.waste += int(e.room)
	*e = cacheSlot{}
	sh.free = append(sh.free, i)
}

// blobSlack is how many bytes beyond twice its content a region may keep.
const blobSlack = 256

// drop forgets supi.
func (c *accountCache) drop(supi string) {
	h, sh := c.locate(supi)
	sh.mu.Lock()
	if i, e := sh.find(h, supi); e != nil {
		sh.remove(i)
	}
	sh.mu.Unlock()
}

// len returns the number of cached accounts.
func (c *accountCache) len() int {
	n := 0
	for i := range c.shards {
		c.shards[i].mu.Lock()
		n += len(c.shards[i].index)
		c.shards[i].mu.Unlock()
	}
	return n
}

// nextGeneration is the generation a record has after one write at gen:
// Aerospike keeps 16 bits and skips 0 when wrapping.
func nextGeneration(gen uint32) uint32 {
	g := uint16(gen + 1)
	if g == 0 {
		g = 1
	}
	return uint32(g)
}
