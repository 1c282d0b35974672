package window

// Level indexes (issue #29): the series of a metric under each key prefix of a hierarchy
// (org/team/user), so that a level's merged read visits only the series under its prefix
// instead of scanning the metric, and answers from a cached aggregate while nothing under
// the prefix changed.

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LevelIndex lists, for every key prefix P of a metric with fewer than Depth separators,
// the series under P: the series whose key label is P or starts with P + separator (what a
// rule with levels reads for a level above the key). The store keeps it as series come and
// go, and each prefix remembers its last merged answer, which stays valid until a series
// under it is written, created or removed (a generation per prefix, bumped under the
// series' shard lock), so reading a level costs one lookup while its series are quiet and
// a fold of its own series, not of the metric's, otherwise.
//
// It is safe for concurrent use. It costs the metric's series about 150 bytes each with two
// prefixes (org/team/user: 437 B of heap a sparse series against 288, 100k series), a
// membership per prefix and the shard's note of them, and their writes one atomic add per
// prefix; the other metrics pay nothing but a flag test on the write path. Made by Store.IndexLevels, never removed.
type LevelIndex struct {
	s      *Store
	metric string
	sep    string
	depth  int
	rc     RingConfig // the metric's
	width  int64      // its slot width, ms

	mu    sync.RWMutex
	nodes map[string]*levelNode // by prefix
}

// levelNode is one prefix: its series and its cached answer.
type levelNode struct {
	gen     atomic.Uint64 // bumped after every change of a series under the prefix
	cache   atomic.Pointer[levelCache]
	members map[*series]struct{} // under LevelIndex.mu
}

// levelCache is a prefix's merged answer over k slots ending at slot cur, valid while the
// prefix's generation is gen. A store state answers every now of one slot alike (Ring.at).
type levelCache struct {
	gen, cur, k   uint64
	from, to      int64
	count         uint64
	sum, min, max float64
	series        int
}

// levelRef is a series' memberships in one index (the nodes of its prefixes), chained for
// the indexes of its metric; the shard keeps it (shard.refs) under the shard's lock.
type levelRef struct {
	ix    *LevelIndex
	nodes []*levelNode
	next  *levelRef
}

// IndexLevels returns the index of metric's key prefixes by separator sep that have fewer
// than depth separators (a rule of N levels reads N−1 prefixes: depth N−1), making it on
// the first call, from the series the store holds, and keeping it up to date afterwards.
// Calls with the same arguments share one index. sep must not be empty and depth at least 1.
func (s *Store) IndexLevels(metric, sep string, depth int) *LevelIndex {
	if sep == "" || depth < 1 {
		return nil
	}
	s.levelsMu.Lock()
	defer s.levelsMu.Unlock()
	old := s.levels.Load()
	if old != nil {
		for _, ix := range (*old)[metric] {
			if ix.sep == sep && ix.depth == depth {
				return ix
			}
		}
	}
	rc := s.RingConfig(metric)
	ix := &LevelIndex{s: s, metric: metric, sep: sep, depth: depth, rc: rc,
		width: rc.Slot.Milliseconds(), nodes: map[string]*levelNode{}}
	m := map[string][]*LevelIndex{}
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[metric] = append(m[metric][:len(m[metric]):len(m[metric])], ix)
	s.levels.Store(&m) // from here create indexes the metric's new series itself
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for se := range sh.all() {
			if se.metric == metric && !sh.indexedIn(se, ix) {
				sh.addRef(se, ix.add(se))
			}
		}
		sh.mu.Unlock()
	}
	return ix
}

// indexNew puts a series create has just made into its metric's indexes; the caller holds
// sh.mu. The lock order is shard, then index.
func (s *Store) indexNew(sh *shard, se *series) {
	m := s.levels.Load()
	if m == nil {
		return
	}
	for _, ix := range (*m)[se.metric] {
		sh.addRef(se, ix.add(se))
	}
}

// indexedIn reports whether se is in ix; the caller holds sh.mu.
func (sh *shard) indexedIn(se *series, ix *LevelIndex) bool {
	if !se.watched {
		return false
	}
	for r := sh.refs[se]; r != nil; r = r.next {
		if r.ix == ix {
			return true
		}
	}
	return false
}

// addRef notes se's memberships r; the caller holds sh.mu.
func (sh *shard) addRef(se *series, r *levelRef) {
	if sh.refs == nil {
		sh.refs = map[*series]*levelRef{}
	}
	r.next = sh.refs[se]
	sh.refs[se] = r
	se.watched = true
}

// touch bumps the generation of every prefix se is under, after a write to it; the caller
// holds sh.mu and has checked se.watched. Not inlined: the hot paths keep a flag test and
// a call they rarely make, not its loops.
//
//go:noinline
func (sh *shard) touch(se *series) {
	for r := sh.refs[se]; r != nil; r = r.next {
		for _, n := range r.nodes {
			n.gen.Add(1)
		}
	}
}

// unindex takes se, which is leaving the store, out of its indexes; the caller holds sh.mu.
func (sh *shard) unindex(se *series) {
	for r := sh.refs[se]; r != nil; r = r.next {
		r.ix.remove(se, r.nodes)
	}
	delete(sh.refs, se)
	se.watched = false
}

// add makes se a member of the nodes of its prefixes and returns its memberships.
func (ix *LevelIndex) add(se *series) *levelRef {
	r := &levelRef{ix: ix}
	ix.mu.Lock()
	ix.prefixes(SeriesKeyOf(se.key), func(p string) {
		n := ix.nodes[p]
		if n == nil {
			n = &levelNode{members: map[*series]struct{}{}}
			ix.nodes[strings.Clone(p)] = n
		}
		n.members[se] = struct{}{}
		n.gen.Add(1)
		r.nodes = append(r.nodes, n)
	})
	ix.mu.Unlock()
	return r
}

// remove takes se out of nodes, dropping a node left empty.
func (ix *LevelIndex) remove(se *series, nodes []*levelNode) {
	ix.mu.Lock()
	kk := SeriesKeyOf(se.key)
	i := 0
	ix.prefixes(kk, func(p string) {
		n := nodes[i]
		i++
		delete(n.members, se)
		n.gen.Add(1)
		if len(n.members) == 0 && ix.nodes[p] == n {
			delete(ix.nodes, p)
		}
	})
	ix.mu.Unlock()
}

// prefixes calls fn with every prefix the index keeps that key label kk is under: kk
// itself, and kk up to each place a separator starts, as long as the prefix holds fewer
// than depth separators (counted as strings.Count does), shortest first.
func (ix *LevelIndex) prefixes(kk string, fn func(p string)) {
	for i := 0; i+len(ix.sep) <= len(kk); i++ {
		if kk[i:i+len(ix.sep)] != ix.sep {
			continue
		}
		if strings.Count(kk[:i], ix.sep) >= ix.depth {
			return // longer prefixes hold at least as many
		}
		fn(kk[:i])
	}
	if strings.Count(kk, ix.sep) < ix.depth {
		fn(kk)
	}
}

// Covers reports whether the index keeps prefix: whether MergeUnder can answer it.
func (ix *LevelIndex) Covers(prefix string) bool {
	return strings.Count(prefix, ix.sep) < ix.depth
}

// MergeUnder folds every series under prefix that match accepts (nil: all) into p, over
// the last window at now, as MergePartial does with a match that keeps the series whose key
// label is prefix or starts with prefix + separator, and answers the same. It visits only
// the prefix's series, and with a nil match answers from the prefix's cached aggregate
// when no series under it changed since (p then holds no bins: the cache keeps none, so p
// must have NoBins). It returns ErrBadWindow for a window the ring cannot read, and
// ErrNotCovered for a prefix with depth separators or more (Covers).
func (ix *LevelIndex) MergeUnder(now int64, prefix string, match SeriesMatch, window time.Duration, p *Partial) error {
	if !ix.Covers(prefix) {
		return ErrNotCovered
	}
	k, err := readSlots(ix.rc, window)
	if err != nil {
		return err
	}
	ix.mu.RLock()
	n := ix.nodes[prefix]
	ix.mu.RUnlock()
	if n == nil {
		return nil
	}
	cur := uint64(floorDiv(now, ix.width))
	g := n.gen.Load() // before the fold: a write during it makes the answer stale at once
	cacheable := match == nil && p.NoBins && p.Series == 0 && p.Count == 0
	if cacheable {
		if c := n.cache.Load(); c != nil && c.gen == g && c.cur == cur && c.k == uint64(k) {
			p.From, p.To, p.Count, p.Sum, p.Min, p.Max, p.Series = c.from, c.to, c.count, c.sum, c.min, c.max, c.series
			return nil
		}
	}
	sp := memberPool.Get().(*[]*series)
	members := (*sp)[:0]
	ix.mu.RLock()
	for se := range n.members {
		members = append(members, se)
	}
	ix.mu.RUnlock()
	s := ix.s
	for _, se := range members {
		// A member removed since is folded as the scan that reached it first would have;
		// its removal bumped g, so the answer is not kept.
		sh := &s.shards[s.hash(se.metric, se.key)&s.mask]
		sh.mu.Lock()
		if match == nil || match(se.key, se.partition) {
			se.foldInto(now, k, p)
		}
		sh.mu.Unlock()
	}
	clear(members)
	*sp = members[:0]
	memberPool.Put(sp)
	if cacheable {
		n.cache.Store(&levelCache{gen: g, cur: cur, k: uint64(k),
			from: p.From, to: p.To, count: p.Count, sum: p.Sum, min: p.Min, max: p.Max, series: p.Series})
	}
	return nil
}

var memberPool = sync.Pool{New: func() any { return new([]*series) }}
