package cluster

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/slide-metrics/slide/window"
)

// maxCached bounds the usage cache; past it the cache starts over.
const maxCached = 100_000

type cacheKey struct {
	metric, series string
	match          string // ReadSelected's matchers, as PromQL writes them
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
	return c.read(ctx, now, metric, series, nil, nil, win, qs)
}

// ReadSelected is Read for a usage rule with label matchers (usage.SelectReader): the
// series of metric whose key label key matches (exact or a glob) and whose labels ms select,
// merged over every instance. The peers answer one group of the selected series each (the
// groups op with no by-label, as MergeGroups asks), cached as Read's part is. A matcher that
// does not compile is window.ErrMatcher.
func (c *Cluster) ReadSelected(ctx context.Context, now int64, metric, key string, ms []window.Matcher, win time.Duration, qs []float64) (a window.Agg, staleMs int64, missing []int32, err error) {
	sel, err := window.CompileSelector(key, ms)
	if err != nil {
		return a, 0, nil, err
	}
	return c.read(ctx, now, metric, key, sel, ms, win, qs)
}

// read is Read, or ReadSelected when sel is not nil.
func (c *Cluster) read(ctx context.Context, now int64, metric, series string, sel *window.Selector, ms []window.Matcher, win time.Duration, qs []float64) (a window.Agg, staleMs int64, missing []int32, err error) {
	bins := len(qs) > 0
	local, gen := c.localSet()
	p := window.Partial{NoBins: !bins}
	if sel == nil {
		err = mergeLocal(ctx, c.cfg.Store, now, metric, series, local, false, win, &p)
	} else {
		match := func(k string, pt int32) bool { return (pt < 0 || local[pt]) && sel.Match(k) }
		if err = c.cfg.Store.MergePartial(now, metric, stopping(ctx, match), win, &p); err == nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		return a, 0, nil, err
	}
	remote, age, missing := c.remote(ctx, now, metric, series, ms, win, bins, local)
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
// With matchers (ms not nil) it asks the peers for one group of the series they select.
func (c *Cluster) remote(ctx context.Context, now int64, metric, series string, ms []window.Matcher, win time.Duration, bins bool, local map[int32]bool) (*window.Partial, time.Duration, []int32) {
	slot := window.FloorDiv(now, max(c.cfg.Store.RingConfig(metric).Slot.Milliseconds(), 1))
	k := cacheKey{metric: metric, series: series, winMs: win.Milliseconds(), bins: bins}
	if ms != nil {
		var b strings.Builder
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(m.String()) // the value quoted: no two lists write the same
		}
		k.match = "{" + b.String() + "}" // never a plain Read's ""
	}
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
	each := func(a *answer) { e.p.Merge(&a.merged) }
	if ms != nil {
		r.op, r.ms = opGroups, ms
		each = func(a *answer) {
			for i := range a.groups { // no by-label: at most one group
				e.p.Merge(&a.groups[i].p)
			}
		}
	}
	e.missing = c.fanout(ctx, r, local, each)
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
