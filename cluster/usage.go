package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/slide-metrics/slide/window"
)

// maxCached bounds the usage cache; past it the cache starts over.
const maxCached = 100_000

type cacheKey struct {
	metric, series string
	winMs          int64
	bins           bool
}

// cacheEntry is the remote part of one usage read: every partition but this instance's.
type cacheEntry struct {
	p       window.Partial
	missing []int32
	at      time.Time
	slot    int64 // current slot index of the read: a slot turn invalidates the entry
}

// Read is the usage rules' read (usage.Reader): the aggregate of metric's series (a key or
// a glob) over win at now from every instance. This instance's part is read fresh; the
// part held by peers comes from a cache at most Config.Staleness old (and never from an
// earlier slot), so a burst of decisions on one key costs one fan-out a second. staleMs is
// the age of the remote part used (0 when none was needed). missing lists partitions no
// instance served; the aggregate then covers the others only. A series no instance holds
// is window.ErrNotFound.
func (c *Cluster) Read(ctx context.Context, now int64, metric, series string, win time.Duration, qs []float64) (a window.Agg, staleMs int64, missing []int32, err error) {
	bins := len(qs) > 0
	local, gen := c.localSet()
	p := window.Partial{NoBins: !bins}
	if err := mergeLocal(ctx, c.cfg.Store, now, metric, series, local, false, win, &p); err != nil {
		return a, 0, nil, err
	}
	remote, age, missing := c.remote(ctx, now, metric, series, win, bins, local)
	missing = c.settle(gen, local, slices.Clone(missing)) // the cached slice is shared
	if remote != nil {
		p.Merge(remote)
		staleMs = age.Milliseconds()
	}
	if p.Series == 0 && len(missing) == 0 {
		return a, staleMs, nil, window.ErrNotFound
	}
	return p.Agg(c.cfg.Store.Indexer(metric), qs), staleMs, missing, nil
}

// remote returns the peers' part of a usage read, cached.
func (c *Cluster) remote(ctx context.Context, now int64, metric, series string, win time.Duration, bins bool, local map[int32]bool) (*window.Partial, time.Duration, []int32) {
	slot := window.FloorDiv(now, max(c.cfg.Store.RingConfig(metric).Slot.Milliseconds(), 1))
	k := cacheKey{metric: metric, series: series, winMs: win.Milliseconds(), bins: bins}
	if c.cfg.Staleness > 0 {
		c.cacheMu.Lock()
		e := c.cache[k]
		c.cacheMu.Unlock()
		if e != nil && e.slot == slot && time.Since(e.at) <= c.cfg.Staleness {
			return &e.p, time.Since(e.at), e.missing
		}
	}
	e := &cacheEntry{p: window.Partial{NoBins: !bins}, at: time.Now(), slot: slot}
	r := request{op: opMerge, metric: metric, key: series, winMs: win.Milliseconds(), now: now, bins: bins, only: c.route(series)}
	e.missing = c.fanout(ctx, r, local, func(a *answer) { e.p.Merge(&a.merged) })
	if c.cfg.Staleness > 0 {
		c.cacheMu.Lock()
		if len(c.cache) >= maxCached {
			clear(c.cache)
		}
		c.cache[k] = e
		c.cacheMu.Unlock()
	}
	return &e.p, time.Since(e.at), e.missing
}
