package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slide-metrics/slide/window"
)

// route is the one partition a read of key needs when Config.KeyPartitioner declares how
// keys are partitioned, or nil (fan out): globs, unknown topologies, and an instance whose
// store contradicted the declaration (CheckKeyPartitioner) always fan out.
func (c *Cluster) route(key string) []int32 {
	if c.cfg.KeyPartitioner == "" || key == "" || window.IsKeyPattern(key) || c.routeOff.Load() {
		return nil
	}
	v := c.view.Load()
	if v == nil || v.Partitions <= 0 {
		return nil
	}
	return []int32{murmur2Partition(key, v.Partitions)}
}

// murmur2Partition is the partition the Java client's default partitioner (and kafka-go's
// Murmur2Balancer) picks for key among n: toPositive(murmur2(key)) % n.
func murmur2Partition(key string, n int) int32 {
	const (
		seed = uint32(0x9747b28c)
		m    = uint32(0x5bd1e995)
		r    = 24
	)
	data := []byte(key)
	h := seed ^ uint32(len(data))
	for len(data) >= 4 {
		k := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32((h & 0x7fffffff) % uint32(n))
}

// localSet is the set of partitions this instance serves now, and the generation it was
// read in (for settle).
func (c *Cluster) localSet() (map[int32]bool, int32) {
	gen := c.generation()
	ps := c.cfg.Local()
	m := make(map[int32]bool, len(ps))
	for _, p := range ps {
		m[p] = true
	}
	return m, gen
}

// Remote lists the partitions of the topic this instance does not hold and serve, sorted:
// what its own store alone misses (promapi.Config.Remote).
func (c *Cluster) Remote() []int32 {
	local, _ := c.localSet()
	n := 0
	if v := c.view.Load(); v != nil {
		n = v.Partitions
	}
	var out []int32
	for p := range int32(n) {
		if !local[p] {
			out = append(out, p)
		}
	}
	return out
}

func (c *Cluster) generation() int32 {
	if c.cfg.Generation == nil {
		return 0
	}
	return c.cfg.Generation()
}

// settle adds this instance's partitions to missing when the generation moved since gen:
// a revocation may have dropped some of their series while the read ran.
func (c *Cluster) settle(gen int32, local map[int32]bool, missing []int32) []int32 {
	if c.generation() == gen {
		return missing
	}
	for p := range local {
		if !slices.Contains(missing, p) {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	return missing
}

// mergeLocal folds the local series of metric matching key (exact, a glob, or "" for
// every key, matched against the series' key label) fed by the partitions in parts, or by
// none, into p. An exact key is one lookup while the metric has no labelled series
// (window.Store.LabelledSeries); else every series of that key is merged. It returns ctx's
// error when the scan stopped because ctx was done.
func mergeLocal(ctx context.Context, st *window.Store, now int64, metric, key string, parts map[int32]bool, peer bool, win time.Duration, p *window.Partial) error {
	if key != "" && !window.IsKeyPattern(key) && st.LabelledSeries(metric) == 0 {
		return st.MergeKey(now, metric, key, func(pt int32) bool { return parts[pt] || (pt < 0 && !peer) }, win, p)
	}
	match := matchOf(key, parts)
	if peer {
		local := match
		match = func(k string, pt int32) bool { return pt >= 0 && local(k, pt) }
	}
	if err := st.MergePartial(now, metric, stopping(ctx, match), win, p); err != nil {
		return err
	}
	return ctx.Err()
}

// scanCheck is how many series a local scan visits between two looks at its context.
const scanCheck = 256

// stopping wraps match so that it matches nothing once ctx is done (the asking client or
// peer has gone), looking at ctx on the first series and every scanCheck after: the
// store's scans take no context, so the rest of the scan only compares metrics, with no
// key match or merge. For one scan at a time (the store calls match from one goroutine).
func stopping(ctx context.Context, match window.SeriesMatch) window.SeriesMatch {
	n, done := 0, false
	return func(k string, p int32) bool {
		if !done && n%scanCheck == 0 {
			done = ctx.Err() != nil
		}
		n++
		return !done && match(k, p)
	}
}

// matchOf selects the series of the partitions in parts (and those fed by no partition,
// which only the instance holding them can answer for) whose key label matches key: exact
// (every series of that key, labelled or not), a glob, or "" for every key. k is a series
// string, so the match is a window.Selector's, never a comparison of the whole string.
func matchOf(key string, parts map[int32]bool) window.SeriesMatch {
	sel, _ := window.CompileSelector(key, nil) // only a matcher can fail to compile
	return func(k string, p int32) bool {
		if p >= 0 && !parts[p] {
			return false
		}
		return sel.Match(k)
	}
}

// Merge folds every series of metric whose key matches key (exact or a glob) over the
// window win at now, held by any instance, into p. bins false skips the sketch bins (no
// quantile wanted). missing lists the partitions no instance served. The error is the
// window's (ErrBadWindow): peer failures only show in missing.
func (c *Cluster) Merge(ctx context.Context, now int64, metric, key string, win time.Duration, bins bool, p *window.Partial) (missing []int32, err error) {
	p.NoBins = !bins
	local, gen := c.localSet()
	if err := mergeLocal(ctx, c.cfg.Store, now, metric, key, local, false, win, p); err != nil {
		return nil, err
	}
	r := request{op: opMerge, metric: metric, key: key, winMs: win.Milliseconds(), now: now, bins: bins, only: c.route(key)}
	missing = c.fanout(ctx, r, local, func(a *answer) { p.Merge(&a.merged) })
	return c.settle(gen, local, missing), nil
}

// MergeGroups folds every series of metric that key (exact, a glob, or "" for every key, on
// the key label) and the label matchers ms select, over the window win at now, held by any
// instance, into its group of g (window.GroupPartials: grouped by g.By(), one group of every
// selected series when that is empty). bins is g's: false when no quantile is wanted. Each
// owner answers its groups (opGroups), not its series, so the cost is one partial per group
// and instance. missing lists the partitions no instance served. It returns
// window.ErrTooManyGroups when this instance's series or a peer's fall in more than
// window.MaxGroups groups, the selector's error (window.ErrMatcher) and the window's.
func (c *Cluster) MergeGroups(ctx context.Context, now int64, metric, key string, ms []window.Matcher, win time.Duration, bins bool, g *window.GroupPartials) (missing []int32, err error) {
	sel, err := window.CompileSelector(key, ms)
	if err != nil {
		return nil, err
	}
	local, gen := c.localSet()
	match := func(k string, p int32) bool { return (p < 0 || local[p]) && sel.Match(k) }
	if err := c.cfg.Store.MergeGroupPartials(now, metric, stopping(ctx, match), win, g); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := request{op: opGroups, metric: metric, key: key, by: g.By(), ms: ms, winMs: win.Milliseconds(), now: now, bins: bins, only: c.route(key)}
	missing = c.fanout(ctx, r, local, func(a *answer) {
		if a.over {
			err = fmt.Errorf("%w: more than %d by %s on a peer", window.ErrTooManyGroups, window.MaxGroups, strings.Join(g.By(), ","))
		}
		for i := range a.groups {
			if err != nil {
				return
			}
			err = g.Add(a.groups[i].values, &a.groups[i].p)
		}
	})
	if err != nil {
		return nil, err
	}
	return c.settle(gen, local, missing), nil
}

// Each calls fn once per series of metric whose key matches pattern ("" for every key),
// with its partial merged across every instance holding part of it, in no particular
// order. fn may keep p.
func (c *Cluster) Each(ctx context.Context, now int64, metric, pattern string, win time.Duration, bins bool, fn func(key string, p *window.Partial)) (missing []int32, err error) {
	local, gen := c.localSet()
	byKey := map[string]*window.Partial{}
	err = c.cfg.Store.EachPartial(now, metric, stopping(ctx, matchOf(pattern, local)), win, bins, func(key string, _ int32, p *window.Partial) {
		if q, ok := byKey[key]; ok {
			q.Merge(p)
			return
		}
		q := &window.Partial{NoBins: !bins}
		q.Merge(p)
		byKey[key] = q
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	r := request{op: opSeries, metric: metric, key: pattern, winMs: win.Milliseconds(), now: now, bins: bins}
	missing = c.fanout(ctx, r, local, func(a *answer) {
		for i := range a.series {
			s := &a.series[i]
			if q, ok := byKey[s.key]; ok {
				q.Merge(&s.p)
			} else {
				byKey[s.key] = &s.p
			}
		}
	})
	i := 0
	for k, p := range byKey {
		if i%scanCheck == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		i++
		fn(k, p)
	}
	return c.settle(gen, local, missing), nil
}
