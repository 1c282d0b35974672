package limiter

import (
	"hash/maphash"
	"sync"
	"time"
)

// denyCache remembers "key is denied until T" for one Redis policy, so a key
// flooding far above its limit stops costing a round trip per request.
//
// A cached denial is exact, not a guess: the scripts never count denied
// requests, and other instances can only consume more, so nothing but a
// state reset in Redis can make a request admissible before RetryAfter, or
// other numbers: an entry answers only requests of at least the cost it was
// computed for, decided by the same numbers (the same *Policy: the policy's
// own, a plan's, or SetLimits's; each change of plans or limits makes new
// ones, so a key moved to a bigger plan or given a raised limit asks Redis).
type denyCache struct {
	seed    maphash.Seed
	perShrd int
	shards  [16]denyShard
}

type denyShard struct {
	mu sync.Mutex
	m  map[string]denyEntry
	_  [48]byte // keep neighbouring locks off one cache line
}

type denyEntry struct {
	p         *Policy // the numbers it was decided by; kept alive by the entry, so never reused
	until     int64   // ns: denied before this instant
	resetAt   int64   // ns
	cost      int64
	remaining int64
	window    time.Duration // the denial's Window: a calendar period's own length, not its longest
}

func newDenyCache(maxKeys int) *denyCache {
	c := &denyCache{seed: maphash.MakeSeed(), perShrd: max(1, maxKeys/16)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]denyEntry)
	}
	return c
}

func (c *denyCache) shard(key string) *denyShard {
	return &c.shards[maphash.String(c.seed, key)&15]
}

// get returns the cached denial for a request of cost (0 = peek, treated
// as 1) at now decided by p, if any.
func (c *denyCache) get(key string, now, cost int64, p *Policy) (denyEntry, bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	e, ok := sh.m[key]
	if ok && now >= e.until {
		delete(sh.m, key)
		ok = false
	}
	sh.mu.Unlock()
	return e, ok && max(cost, 1) >= e.cost && e.p == p
}

func (c *denyCache) put(key string, e denyEntry, now int64) {
	sh := c.shard(key)
	sh.mu.Lock()
	if _, exists := sh.m[key]; !exists && len(sh.m) >= c.perShrd {
		for k, old := range sh.m {
			if now >= old.until {
				delete(sh.m, k)
			}
		}
		if len(sh.m) >= c.perShrd {
			sh.mu.Unlock()
			return // full of live denials: skip caching rather than evict one
		}
	}
	sh.m[key] = e
	sh.mu.Unlock()
}
