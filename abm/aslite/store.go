package aslite

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// digest is the 20-byte RIPEMD-160 key digest the client computes.
type digest [20]byte

// partitionOf returns the Aerospike partition of a digest (as the client
// computes it).
func partitionOf(d *digest) int {
	return int(binary.LittleEndian.Uint16(d[:2])) & (nPartitions - 1)
}

// entry is the fixed-size, pointer-free index entry of one record. The
// record's bytes (an optional stored key, then its bins in wire format) live
// in the partition's arena at [off, off+n).
type entry struct {
	off   uint32
	n     uint32
	void  uint32 // expiry, seconds since the citrusleaf epoch; 0 = never
	lutLo uint32 // last update time, Unix milliseconds (low 32 bits)
	lutHi uint16 // ... (high 16 bits)
	gen   uint16
	set   uint16 // set id | entryHasKey
	nbins uint16
}

const (
	entryHasKey = 0x8000
	setMask     = 0x7FFF
	maxSets     = 1023
)

func (e *entry) lut() int64 { return int64(e.lutHi)<<32 | int64(e.lutLo) }

func (e *entry) setLUT(ms int64) {
	e.lutLo = uint32(ms)
	e.lutHi = uint16(ms >> 32)
}

// partition is one of the 4096 shards of a namespace: a map from digest to
// a pointer-free entry and an arena holding the record bytes. Every access
// holds mu; the map and the arena contain no pointers, so the garbage
// collector never scans them however many records they hold.
type partition struct {
	mu       sync.RWMutex
	m        map[digest]entry
	arena    []byte
	dead     int // bytes of the arena no entry refers to
	expiring int // entries with a void time
}

// bytes returns the stored bytes of e. The caller holds mu.
func (p *partition) bytes(e *entry) []byte { return p.arena[e.off : e.off+e.n] }

// bins returns the bins of e in wire format. The caller holds mu.
func (p *partition) bins(e *entry) []byte {
	b := p.bytes(e)
	if e.set&entryHasKey != 0 {
		b = b[2+int(binary.BigEndian.Uint16(b)):]
	}
	return b
}

// storedKey returns the stored user key (particle type + value) of e, or nil.
func (p *partition) storedKey(e *entry) []byte {
	if e.set&entryHasKey == 0 {
		return nil
	}
	b := p.bytes(e)
	return b[2 : 2+int(binary.BigEndian.Uint16(b))]
}

// put stores rec (already laid out) under d. old is the previous entry when
// existed. The caller holds mu for writing.
func (p *partition) put(d *digest, e entry, rec []byte, old *entry) {
	if p.m == nil {
		p.m = make(map[digest]entry)
	}
	if old != nil {
		if old.void != 0 {
			p.expiring--
		}
		if len(rec) <= int(old.n) {
			copy(p.arena[old.off:], rec)
			e.off = old.off
			e.n = uint32(len(rec))
			p.dead += int(old.n) - len(rec)
			if e.void != 0 {
				p.expiring++
			}
			p.m[*d] = e
			return
		}
		p.dead += int(old.n)
		delete(p.m, *d) // so that grow does not copy the old version
	}
	if e.void != 0 {
		p.expiring++
	}
	if len(p.arena)+len(rec) > cap(p.arena) {
		p.grow(len(rec))
	}
	e.off = uint32(len(p.arena))
	e.n = uint32(len(rec))
	p.arena = append(p.arena, rec...)
	p.m[*d] = e
	p.maybeCompact()
}

// grow makes room for need more bytes: it compacts the arena into a new
// mapping twice as large as the live bytes plus need. Pages of a mapping
// are resident only once written, so the headroom costs address space,
// not memory, and saves remappings.
func (p *partition) grow(need int) {
	live := len(p.arena) - p.dead
	p.rebuild(max(2*(live+need), 16<<10))
}

// rebuild copies the live records into a new arena of capacity size.
func (p *partition) rebuild(size int) {
	arena := arenaAlloc(max(size, 4096))
	for d, e := range p.m {
		off := len(arena)
		arena = append(arena, p.arena[e.off:e.off+e.n]...)
		e.off = uint32(off)
		p.m[d] = e
	}
	arenaFree(p.arena)
	p.arena = arena
	p.dead = 0
}

// clear frees the arena when the partition is empty.
func (p *partition) clear() {
	arenaFree(p.arena)
	p.arena, p.dead, p.expiring = nil, 0, 0
}

// remove deletes d whose entry is e. The caller holds mu for writing.
func (p *partition) remove(d *digest, e *entry) {
	if e.void != 0 {
		p.expiring--
	}
	p.dead += int(e.n)
	delete(p.m, *d)
	if len(p.m) == 0 {
		p.clear()
		return
	}
	p.maybeCompact()
}

// maybeCompact rewrites the arena when more than half of it is dead.
func (p *partition) maybeCompact() {
	if p.dead < 4096 || p.dead*2 < len(p.arena) {
		return
	}
	live := len(p.arena) - p.dead
	p.rebuild(live + live/4)
}

// namespace holds the records of one namespace.
type namespace struct {
	name  string
	parts [nPartitions]partition

	setMu    sync.Mutex
	setNames atomic.Pointer[[]string] // id-1 -> name; copy on write
	setIDs   sync.Map                 // string -> uint16
	objects  atomic.Int64
	setObjs  [maxSets + 1]atomic.Int64
}

// setID returns the id of set name, creating it when create is set. Id 0
// is the empty set. ok is false when the set does not exist (or there are
// too many sets).
func (ns *namespace) setID(name []byte, create bool) (uint16, bool) {
	if len(name) == 0 {
		return 0, true
	}
	if v, ok := ns.setIDs.Load(string(name)); ok {
		return v.(uint16), true
	}
	if !create {
		return 0, false
	}
	ns.setMu.Lock()
	defer ns.setMu.Unlock()
	if v, ok := ns.setIDs.Load(string(name)); ok {
		return v.(uint16), true
	}
	var names []string
	if p := ns.setNames.Load(); p != nil {
		names = append(names, *p...)
	}
	if len(names) >= maxSets {
		return 0, false
	}
	names = append(names, string(name))
	id := uint16(len(names))
	ns.setNames.Store(&names)
	ns.setIDs.Store(string(name), id)
	return id, true
}

// setName returns the name of set id.
func (ns *namespace) setName(id uint16) string {
	id &= setMask
	if id == 0 {
		return ""
	}
	p := ns.setNames.Load()
	if p == nil || int(id) > len(*p) {
		return ""
	}
	return (*p)[id-1]
}

// sets returns the names of all sets with their ids.
func (ns *namespace) sets() []string {
	p := ns.setNames.Load()
	if p == nil {
		return nil
	}
	return *p
}

func (ns *namespace) created(e *entry) {
	ns.objects.Add(1)
	ns.setObjs[e.set&setMask].Add(1)
}

func (ns *namespace) deleted(e *entry) {
	ns.objects.Add(-1)
	ns.setObjs[e.set&setMask].Add(-1)
}

// expired reports whether e is past its void time at now (citrusleaf seconds).
func expired(e *entry, now uint32) bool { return e.void != 0 && now >= e.void }

// truncate deletes the records of set (all sets when all) last updated at
// or before cutoff (Unix ms). It returns the number deleted.
func (ns *namespace) truncate(set uint16, all bool, cutoff int64) int {
	n := 0
	for i := range ns.parts {
		p := &ns.parts[i]
		p.mu.Lock()
		for d, e := range p.m {
			if (all || e.set&setMask == set) && e.lut() <= cutoff {
				if e.void != 0 {
					p.expiring--
				}
				p.dead += int(e.n)
				delete(p.m, d)
				ns.deleted(&e)
				n++
			}
		}
		if len(p.m) == 0 {
			p.clear()
		} else {
			p.maybeCompact()
		}
		p.mu.Unlock()
	}
	return n
}

// reclaim deletes the records expired at now and compacts arenas. It
// returns the number deleted.
func (ns *namespace) reclaim(now uint32) int {
	n := 0
	for i := range ns.parts {
		p := &ns.parts[i]
		p.mu.RLock()
		skip := p.expiring == 0
		p.mu.RUnlock()
		if skip {
			continue
		}
		p.mu.Lock()
		for d, e := range p.m {
			if expired(&e, now) {
				p.remove(&d, &e)
				ns.deleted(&e)
				n++
			}
		}
		p.mu.Unlock()
	}
	return n
}

// memoryBytes reports the arena bytes in use (live and dead).
func (ns *namespace) memoryBytes() (arena, dead int64) {
	for i := range ns.parts {
		p := &ns.parts[i]
		p.mu.RLock()
		arena += int64(cap(p.arena))
		dead += int64(p.dead)
		p.mu.RUnlock()
	}
	return arena, dead
}

// free releases every record of the namespace (Server.Close).
func (ns *namespace) free() {
	for i := range ns.parts {
		p := &ns.parts[i]
		p.mu.Lock()
		p.m = nil
		p.clear()
		p.mu.Unlock()
	}
	ns.objects.Store(0)
	for i := range ns.setObjs {
		ns.setObjs[i].Store(0)
	}
}
