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
type accountCache struct {
	seed     maphash.Seed
	perShard int
	maxAge   int64 // unix ns
	shards   [cacheShards]cacheShard
}

const cacheShards = 64

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
	blob     []byte // sessions, as written
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
func (c *accountCache) load(supi string, now int64, acc *account) (gen uint32, key *as.Key, ok bool) {
	sh := c.shard(supi)
	sh.mu.Lock()
	e := sh.m[supi]
	if e == nil {
		sh.mu.Unlock()
		return 0, nil, false
	}
	key = e.key
	if now-e.at > c.maxAge {
		sh.mu.Unlock()
		return 0, key, false
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

// store records that supi (whose record key is key) was written by this
// process at generation written-from gen (its new generation is the next
// one).
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
	e.gen, e.at = gen, now
	e.balance, e.debited, e.currency = acc.balance, acc.debited, acc.currency
	e.epoch, e.key = acc.epoch, key
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
