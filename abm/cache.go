package abm

import (
	"hash/maphash"
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
// An account with heavySessions sessions or more is kept decoded rather
// than as its session blob: its next event then decodes nothing, and
// re-encodes only the sessions it changes (session.enc), so an event on
// an account holding hundreds of open sessions (a popular subscriber under
// a skewed load) costs a copy of its record rather than a decode and an
// encode of every session. The event takes the decoded state out of the
// entry (load) and gives it back with its write (store); meanwhile the
// entry is unusable, and a concurrent event on the account reads the
// record.
type accountCache struct {
	seed     maphash.Seed
	perShard int
	maxAge   int64 // unix ns
	shards   [cacheShards]cacheShard
}

const cacheShards = 64

// heavySessions is how many sessions (open and closed) make an account
// kept decoded in the cache. Closed sessions are at most 16 (MaxClosed),
// so such an account has at least 16 open: a decoded session takes about
// nine times its encoded size, which only accounts this large repay.
const heavySessions = 32

type cacheShard struct {
	mu sync.Mutex
	m  map[string]*cachedAccount
}

// cachedAccount is the stored state of one account record.
type cachedAccount struct {
	gen      uint32 // record generation after our write
	at       int64  // unix ns of the write
	balance  int64
	debited  int64
	currency string
	epoch    uint32 // BinEpoch, as written
	blob     []byte // sessions, as written (nil when acc is set)
	// acc is the state as written of an account with heavySessions or
	// more sessions, instead of blob and the fields above; taken while an
	// event works on it (load to store).
	acc   *account
	taken bool
	// key is the record's key, kept so that a cached account costs no
	// digest (as.NewKey hashes the set and SUPI with RIPEMD-160 and
	// allocates): it does not age and is immutable, so it is shared.
	key *as.Key
}

func newAccountCache(entries int, maxAge int64) *accountCache {
	c := &accountCache{seed: maphash.MakeSeed(), perShard: max(1, entries/cacheShards), maxAge: maxAge}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*cachedAccount)
	}
	return c
}

func (c *accountCache) shard(supi string) *cacheShard {
	return &c.shards[maphash.String(c.seed, supi)%cacheShards]
}

// load decodes the cached state of supi into acc and returns its
// generation; ok is false when there is no usable entry. key is the
// record's key when supi has an entry, usable or not (too old), else nil.
// An account kept decoded is swapped into acc and the entry left taken
// until store (or untake) gives it back.
func (c *accountCache) load(supi string, now int64, acc *account) (gen uint32, key *as.Key, ok bool) {
	sh := c.shard(supi)
	sh.mu.Lock()
	e := sh.m[supi]
	if e == nil {
		sh.mu.Unlock()
		return 0, nil, false
	}
	key = e.key
	if now-e.at > c.maxAge || e.taken {
		sh.mu.Unlock()
		return 0, key, false
	}
	if e.acc != nil {
		// The entry keeps acc's old memory until store swaps back.
		*acc, *e.acc = *e.acc, *acc
		acc.overNew = 0
		e.taken = true
		gen = e.gen
		sh.mu.Unlock()
		return gen, key, true
	}
	acc.reset()
	acc.balance, acc.debited, acc.currency = e.balance, e.debited, e.currency
	acc.epoch, acc.epochRead = e.epoch, e.epoch
	err := acc.decodeSessions(e.blob) // does not retain e.blob
	if err != nil {
		delete(sh.m, supi)
	}
	gen = e.gen
	sh.mu.Unlock()
	return gen, key, err == nil
}

// key returns the record key of supi when it has an entry, else nil.
func (c *accountCache) key(supi string) *as.Key {
	sh := c.shard(supi)
	sh.mu.Lock()
	var k *as.Key
	if e := sh.m[supi]; e != nil {
		k = e.key
	}
	sh.mu.Unlock()
	return k
}

// untake gives back the decoded state load took into acc, unchanged (an
// event that wrote nothing); nothing when supi's entry is not taken.
func (c *accountCache) untake(supi string, acc *account) {
	sh := c.shard(supi)
	sh.mu.Lock()
	if e := sh.m[supi]; e != nil && e.taken && e.acc != nil {
		*acc, *e.acc = *e.acc, *acc
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
	sh := c.shard(supi)
	sh.mu.Lock()
	e := sh.m[supi]
	if e == nil {
		if len(sh.m) >= c.perShard {
			// Full: an arbitrary entry makes room, and its memory (the
			// struct and the blob's array) is reused for supi, so that a
			// cache churning over more accounts than it holds allocates
			// nothing and leaves no garbage.
			for k, old := range sh.m {
				delete(sh.m, k)
				e = old
				break
			}
		}
		if e == nil {
			e = &cachedAccount{}
		}
		sh.m[supi] = e
	}
	e.gen, e.at, e.key, e.taken = gen, now, key, false
	if len(acc.sessions) >= heavySessions {
		if e.acc == nil {
			e.acc = new(account)
		}
		*e.acc, *acc = *acc, *e.acc
		e.acc.epochRead, e.acc.overNew = e.acc.epoch, 0
		e.blob = nil
		sh.mu.Unlock()
		return
	}
	e.acc = nil
	e.balance, e.debited, e.currency = acc.balance, acc.debited, acc.currency
	e.epoch = acc.epoch
	e.blob = reuseBlob(e.blob, blob)
	sh.mu.Unlock()
}

// reuseBlob copies blob into dst's array when it fits and dst is not far
// larger than needed; otherwise into a new array of blob's size. Without
// the second condition an entry would keep the largest record it ever held
// (entries are reused across accounts), so the cache's memory would ratchet
// up to cache size x the largest record seen instead of following the
// records it holds.
func reuseBlob(dst, blob []byte) []byte {
	if cap(dst) >= len(blob) && cap(dst) <= 2*len(blob)+blobSlack {
		return append(dst[:0], blob...)
	}
	return append(make([]byte, 0, len(blob)), blob...)
}

// blobSlack is how many bytes beyond twice its content an entry may keep.
const blobSlack = 256

// drop forgets supi.
func (c *accountCache) drop(supi string) {
	sh := c.shard(supi)
	sh.mu.Lock()
	delete(sh.m, supi)
	sh.mu.Unlock()
}

// len returns the number of cached accounts.
func (c *accountCache) len() int {
	n := 0
	for i := range c.shards {
		c.shards[i].mu.Lock()
		n += len(c.shards[i].m)
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
