package promapi

import (
	"sync"
	"unsafe"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// slotCache keeps the native buckets of packed slots from one query to the next, so a
// query reading a slot an earlier one read (a dashboard's refresh reads all but the newest
// slots again) does not decode it again: decoding a packed slot's Rice-coded bins, and
// re-bucketing them for a kind other than native, was about 40% of an instant
// histogram_quantile over 1,000 series (BenchmarkPromQLQuantile).
//
// A packed slot is immutable: the ring replaces it (a new pointer) rather than change it,
// so an entry is a slot's index and the slot itself, which keeps the packed bytes alive: an
// address is never reused for other bins while it is cached. Open slots (the slot in
// progress, a late event's, a peer's) are never cached. Entries are kept per series (one
// map lookup a series, then a walk along its slots) in two bounded generations of at most
// slotCacheBytes (buckets and entries) and slotCacheSeries series each: a lookup promotes a
// series from the old one, and the old one is dropped when the current one fills, so the
// cache holds at most about 100 MB. A query larger than the cache only pays the inserts.
type slotCache struct {
	mu       sync.RWMutex
	cur, old map[string][]cacheEntry // by series string, ascending slot index
	bytes    int                     // what cur holds: its buckets and entries
	arena    []sketch.BinCount       // cur's buckets are carved from it, a chunk at a time
}

type cacheEntry struct {
	index int64
	slot  sketch.Slot
	cachedSlot
}

// cachedSlot is one slot's native buckets: positive ones, then the negative from neg.
type cachedSlot struct {
	bins []sketch.BinCount
	neg  int32
	zero uint64
}

const (
	slotCacheBytes  = 48 << 20
	slotCacheSeries = 1 << 17
	arenaChunk      = 1 << 14
	binBytes        = int(unsafe.Sizeof(sketch.BinCount{}))
	entryBytes      = int(unsafe.Sizeof(cacheEntry{}))
)

// lookState is what a lookup found of a slot.
type lookState uint8

const (
	lookMiss lookState = iota // packed, not cached: convert it, then insert
	lookHit                   // cached
	lookOpen                  // not cacheable
)

type look struct {
	c     cachedSlot
	state lookState
}

// lookup fills dst (one per slot) with what the cache holds of series' slots; fresh says
// the series' entry is in the current generation.
func (c *slotCache) lookup(series string, slots []window.SlotView, dst []look) (_ []look, fresh bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	es, fresh := c.cur[series]
	if !fresh {
		es = c.old[series]
	}
	p := 0
	for i := range slots {
		s := &slots[i]
		for p < len(es) && es[p].index < s.Index {
			p++
		}
		// An entry's slot is a packed one: the same pointer is a hit without reading the
		// slot's memory (a cache miss a slot, the most of a lookup before).
		if p < len(es) && es[p].index == s.Index && es[p].slot == s.Bins {
			dst = append(dst, look{c: es[p].cachedSlot, state: lookHit})
			continue
		}
		l := look{state: lookOpen}
		if s.Bins.IsPacked() {
			l.state = lookMiss
		}
		dst = append(dst, l)
	}
	return dst, fresh
}

// insert makes series' entry its packed slots (whose buckets ls[i].c holds: a miss's in
// memory the caller may reuse, so they are copied) in the current generation.
func (c *slotCache) insert(series string, slots []window.SlotView, ls []look) {
	es := make([]cacheEntry, 0, len(slots))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		c.cur = map[string][]cacheEntry{}
	}
	for _, e := range c.cur[series] {
		c.bytes -= len(e.bins)*binBytes + entryBytes
	}
	for i, l := range ls {
		switch l.state {
		case lookOpen:
			continue
		case lookMiss:
			n := len(l.c.bins)
			if cap(c.arena)-len(c.arena) < n {
				c.arena = make([]sketch.BinCount, 0, max(arenaChunk, n))
			}
			at := len(c.arena)
			c.arena = append(c.arena, l.c.bins...)
			l.c.bins = c.arena[at : at+n : at+n]
		}
		es = append(es, cacheEntry{index: slots[i].Index, slot: slots[i].Bins, cachedSlot: l.c})
		c.bytes += len(l.c.bins)*binBytes + entryBytes
	}
	c.cur[series] = es
	if c.bytes > slotCacheBytes || len(c.cur) > slotCacheSeries {
		c.old, c.cur, c.bytes, c.arena = c.cur, map[string][]cacheEntry{}, 0, nil
	}
}

// caches holds a slotCache per sketch kind: a kind's slots convert to native buckets its
// own way.
type caches struct {
	mu sync.Mutex
	m  map[sketch.Kind]*slotCache
}

func (cs *caches) of(k sketch.Kind) *slotCache {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.m[k]
	if c == nil {
		if cs.m == nil {
			cs.m = map[sketch.Kind]*slotCache{}
		}
		c = &slotCache{}
		cs.m[k] = c
	}
	return c
}
