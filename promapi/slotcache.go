package promapi

import (
	"sync"

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
// so the slot itself is the key, and the key keeps the packed bytes alive, so an address
// is never reused for other bins while it is cached. Open slots (the slot in progress, a
// late event's, a peer's) are never cached. The cache is bounded: two generations of at
// most slotCacheBins buckets and slotCacheSlots slots each; a lookup promotes from the old
// one, and the old one is dropped when the current one fills. A query larger than the
// cache only pays the inserts.
type slotCache struct {
	mu       sync.RWMutex
	cur, old map[sketch.Slot]cachedSlot
	bins     int               // buckets held by cur
	arena    []sketch.BinCount // cur's buckets are carved from it, a chunk at a time
}

// cachedSlot is one slot's native buckets: positive ones, then the negative from neg.
type cachedSlot struct {
	bins []sketch.BinCount
	neg  int32
	zero uint64
}

const (
	slotCacheBins  = 1 << 20
	slotCacheSlots = 1 << 18
	arenaChunk     = 1 << 14
)

// lookState is what a lookup found of a slot.
type lookState uint8

const (
	lookMiss lookState = iota // not cached: decode it, and insert if packed
	lookHit                   // in the current generation
	lookOld                   // in the old generation: promote it
	lookOpen                  // not cacheable
)

type look struct {
	c     cachedSlot
	state lookState
}

// lookup fills dst (one per slot) with what the cache holds of each slot.
func (c *slotCache) lookup(slots []window.SlotView, dst []look) []look {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i := range slots {
		s := slots[i].Bins
		l := look{state: lookOpen}
		if s.IsPacked() {
			l.state = lookMiss
			if e, ok := c.cur[s]; ok {
				l = look{c: e, state: lookHit}
			} else if e, ok := c.old[s]; ok {
				l = look{c: e, state: lookOld}
			}
		}
		dst = append(dst, l)
	}
	return dst
}

// insert caches the slots lookup missed (whose buckets ls[i].c now holds, in memory the
// caller may reuse: they are copied) and promotes those found in the old generation.
func (c *slotCache) insert(slots []window.SlotView, ls []look) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		c.cur = map[sketch.Slot]cachedSlot{}
	}
	for i, l := range ls {
		switch l.state {
		case lookOld:
			c.cur[slots[i].Bins] = l.c
			c.bins += len(l.c.bins)
		case lookMiss:
			n := len(l.c.bins)
			if cap(c.arena)-len(c.arena) < n {
				c.arena = make([]sketch.BinCount, 0, max(arenaChunk, n))
			}
			at := len(c.arena)
			c.arena = append(c.arena, l.c.bins...)
			l.c.bins = c.arena[at : at+n : at+n]
			c.cur[slots[i].Bins] = l.c
			c.bins += n
		}
	}
	if c.bins > slotCacheBins || len(c.cur) > slotCacheSlots {
		c.old, c.cur, c.bins, c.arena = c.cur, map[sketch.Slot]cachedSlot{}, 0, nil
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
