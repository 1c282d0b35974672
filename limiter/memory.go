package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// MemoryConfig tunes a Memory limiter. The zero value is ready to use.
type MemoryConfig struct {
	// Shards is the number of independently locked maps, rounded up to a power
	// of two. Default 64.
	Shards int
	// MaxKeys bounds the keys held. Default 1<<20.
	MaxKeys int
	// MaxBytes bounds the memory the keys' state takes, in bytes (each key's entry,
	// key and map slot, estimated, plus what its algorithm grows: a sliding log's ring,
	// 16 bytes per request in its window). Default DefaultMaxBytes (256 MiB).
	//
	// When a new key (or a sliding log's growth) would pass MaxKeys or MaxBytes, the
	// least recently used keys whose state is back to initial (equivalent to an empty
	// key: dropping them changes no decision) make room. When only live state is left,
	// the new key is refused rather than a live one evicted, which would hand a denied
	// key a fresh allowance: AllowN returns ErrStoreFull, and a Service decides it by
	// the policy's on_backend_error (open admits it untracked, closed refuses it).
	// Admission stays O(1) when full: at most evictScan keys are looked at.
	MaxBytes int64
	// SweepInterval is how often (in the time passed to AllowN) a shard drops
	// idle keys when it is next touched. Default 1 minute.
	SweepInterval time.Duration
	// Clock is what Allow passes as now. Default MonotonicClock(): never use a
	// plain time.Now, whose wall reading jumps when the system clock is set.
	Clock func() time.Time
}

// Validate reports a negative or absurd setting.
func (c *MemoryConfig) Validate() error {
	if c.Shards < 0 || c.Shards > 1<<16 {
		return fmt.Errorf("memory limiter: shards %d out of range 0..65536", c.Shards)
	}
	if c.MaxKeys < 0 {
		return fmt.Errorf("memory limiter: max keys %d is negative", c.MaxKeys)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("memory limiter: max bytes %d is negative", c.MaxBytes)
	}
	if c.SweepInterval < 0 {
		return fmt.Errorf("memory limiter: sweep interval %s is negative", c.SweepInterval)
	}
	return nil
}

// DefaultMaxBytes is the default of MemoryConfig.MaxBytes.
const DefaultMaxBytes = 256 << 20

// ErrStoreFull is returned by Memory.AllowN for a new key (or a request that would grow
// a key's state) when the store's key or byte budget holds only live state.
var ErrStoreFull = errors.New("limiter store full of live state")

// evictScan is how many least recently used keys a full shard looks at for one whose
// state is back to initial before it refuses a new key.
const evictScan = 4

// MonotonicClock returns a clock that reads the wall time once and then
// advances it with the process's monotonic clock: its readings align with
// Unix time (fixed windows start on the minute) but never jump backwards or
// forwards when NTP or an operator sets the system clock.
func MonotonicClock() func() time.Time {
	base := time.Now()
	return func() time.Time {
		// base carries a monotonic reading, so Since is monotonic; Add keeps
		// the wall part anchored at base.
		return base.Add(time.Since(base))
	}
}

// Memory is the in-process backend for one policy: a sharded map from key to
// the algorithm's state.
//
// It is safe for concurrent use. A decision for an existing key costs one
// hash, one shard lock and one map lookup, O(1) (sliding_log: amortized O(1)
// per unit), and allocates nothing; a new key allocates its entry. Keys whose
// state is back to initial are dropped by a sweep every SweepInterval. Each
// process counts on its own: N instances admit up to N× the limit (see the
// package doc); use the Redis backend for a shared limit.
type Memory struct {
	p     Policy
	pr    params
	clock func() time.Time
	// One of these is set, by algorithm: concrete types, not an interface,
	// so calls are static and the caller's Decision stays on its stack.
	fw      *store[fixedWindow]
	sl      *store[slidingLog]
	sc      *store[slidingCounter]
	tb      *store[tokenBucket]
	lb      *store[gcra]
	evicts  atomic.Int64
	refused atomic.Int64
}

// NewMemory returns a Memory limiter for p (validated; its Backend field is
// ignored, so a Redis policy can get a local fallback).
func NewMemory(p Policy, cfg MemoryConfig) (*Memory, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	shards := 64
	if cfg.Shards > 0 {
		shards = 1
		for shards < cfg.Shards {
			shards *= 2
		}
	}
	maxKeys := 1 << 20
	if cfg.MaxKeys > 0 {
		maxKeys = cfg.MaxKeys
	}
	perShard := max(1, (maxKeys+shards-1)/shards)
	maxBytes := int64(DefaultMaxBytes)
	if cfg.MaxBytes > 0 {
		maxBytes = cfg.MaxBytes
	}
	lim := limits{keys: perShard, bytes: max(1, maxBytes/int64(shards))}
	sweep := time.Minute
	if cfg.SweepInterval > 0 {
		sweep = cfg.SweepInterval
	}
	clock := cfg.Clock
	if clock == nil {
		clock = MonotonicClock()
	}
	m := &Memory{p: p, pr: newParams(&p), clock: clock}
	switch p.Algorithm {
	case FixedWindow:
		m.fw = newStore(grows[fixedWindow]{}, shards, lim, int64(sweep), &m.evicts, &m.refused)
	case SlidingLog:
		m.sl = newStore(logGrows, shards, lim, int64(sweep), &m.evicts, &m.refused)
	case SlidingCounter:
		m.sc = newStore(grows[slidingCounter]{}, shards, lim, int64(sweep), &m.evicts, &m.refused)
	case TokenBucket:
		m.tb = newStore(grows[tokenBucket]{}, shards, lim, int64(sweep), &m.evicts, &m.refused)
	case LeakyBucket:
		m.lb = newStore(grows[gcra]{}, shards, lim, int64(sweep), &m.evicts, &m.refused)
	}
	return m, nil
}

// Policy returns the policy the limiter enforces.
func (m *Memory) Policy() Policy { return m.p }

// Allow is AllowN(ctx, key, clock(), 1).
func (m *Memory) Allow(ctx context.Context, key string) (Decision, error) {
	return m.AllowN(ctx, key, m.clock(), 1)
}

// AllowN decides whether cost units may be spent for key at now. Cost 0
// peeks. It returns ErrInvalidKey, ErrInvalidCost or ErrCostOverLimit for bad
// input (a key is validated once, when it is first seen) and never blocks;
// ctx is unused.
func (m *Memory) AllowN(_ context.Context, key string, now time.Time, cost int64) (d Decision, err error) {
	d.Policy = m.p.Name
	if cost < 0 {
		return d, ErrInvalidCost
	}
	if cost > m.pr.quota {
		return d, ErrCostOverLimit
	}
	var r int
	if m.tb != nil {
		r = takeTokenBucket(m.tb, &m.pr, key, now.UnixNano(), cost, &d) // one call less on the common algorithm
	} else {
		r = m.take(&m.pr, key, now.UnixNano(), cost, &d)
	}
	d.Policy = m.p.Name // a policy with levels writes d whole
	switch r {
	case takeInvalid:
		return d, ErrInvalidKey
	case takeFull:
		return d, ErrStoreFull
	}
	return d, nil
}

// Outcomes of store.take.
const (
	takeOK      = iota
	takeInvalid // a new key that fails ValidateKey
	takeFull    // refused: the budget holds only live state
)

// take decides into d with the numbers pr (the policy's, or a plan's) and returns a
// take* outcome.
func (m *Memory) take(pr *params, key string, now, cost int64, d *Decision) int {
	switch m.pr.algorithm {
	case TokenBucket:
		return takeTokenBucket(m.tb, pr, key, now, cost, d)
	case LeakyBucket:
		return m.lb.take(pr, key, now, cost, d)
	case SlidingLog:
		return m.sl.take(pr, key, now, cost, d)
	case SlidingCounter:
		return m.sc.take(pr, key, now, cost, d)
	default:
		if pr.levels != nil {
			return m.decideLevels(pr, key, now, cost, d, nil, nil)
		}
		return m.fw.take(pr, key, now, cost, d)
	}
}

// cold returns the store for sizes and sweeps.
func (m *Memory) cold() memStore {
	switch m.pr.algorithm {
	case TokenBucket:
		return m.tb
	case LeakyBucket:
		return m.lb
	case SlidingLog:
		return m.sl
	case SlidingCounter:
		return m.sc
	default:
		return m.fw
	}
}

// Len returns the number of keys held.
func (m *Memory) Len() int {
	return m.cold().len()
}

// Evictions returns how many keys whose state was back to initial were dropped to make
// room for a new key (MaxKeys or MaxBytes reached).
func (m *Memory) Evictions() int64 { return m.evicts.Load() }

// Refused returns how many requests were refused with ErrStoreFull.
func (m *Memory) Refused() int64 { return m.refused.Load() }

// Bytes returns the estimated bytes the keys' state takes (see MemoryConfig.MaxBytes).
func (m *Memory) Bytes() int64 { return m.cold().bytes() }

// Sweep drops every key that is idle at now, in every shard.
func (m *Memory) Sweep(now time.Time) {
	m.cold().sweep(now.UnixNano())
}

var _ Limiter = (*Memory)(nil)

// memStore is the cold part of a store (sizes, sweeps).
type memStore interface {
	len() int
	bytes() int64
	sweep(now int64)
}

// step runs the algorithm of s (a pointer to one of the state structs in
// algorithms.go). The type switch makes every call static, so d stays on the caller's
// stack (a func value would make it escape).
func step(s any, p *params, now, cost int64, d *Decision) int64 {
	switch s := s.(type) {
	case *tokenBucket:
		return s.take(p, now, cost, d)
	case *gcra:
		return s.take(p, now, cost, d)
	case *slidingLog:
		return s.take(p, now, cost, d)
	case *slidingCounter:
		return s.take(p, now, cost, d)
	case *fixedWindow:
		return s.take(p, now, cost, d)
	}
	return 0 // unreachable: newStore is only instantiated with the five; d stays a denial
}

// grows holds what a store must know of an algorithm whose state grows (the sliding
// log): growth is what deciding cost at now would allocate, bytes what the state holds
// beyond its struct. The zero value (nil funcs) is every other algorithm, whose
// decisions then skip both.
type grows[S any] struct {
	growth func(s *S, p *params, now, cost int64) int64
	bytes  func(s *S) int64
}

var logGrows = grows[slidingLog]{growth: (*slidingLog).growth, bytes: (*slidingLog).bytes}

// entry is one key's state. The fields a full shard's eviction reads and writes come
// first, on the entry's first cache line: unlinking the least recently used entry writes
// its neighbour's next, and the next eviction reads that neighbour's expires and hash, so
// they share one miss.
type entry[S any] struct {
	prev, next *entry[S]
	expires    int64  // ns: state is initial again from here on
	hash       uint64 // keyHasher.hash(key): the shard map's key
	s          S
	key        string    // a copy: the entry must not pin the caller's request buffer
	size       int64     // bytes charged to the shard for this entry
	same       *entry[S] // the next entry whose key has the same hash (rare: a chain)
}

// entryOverhead estimates what a key costs besides its key bytes and its algorithm's
// growth: the entry and the map's slot, bucket share and allocator rounding.
func entryOverhead[S any]() int64 { return int64(unsafe.Sizeof(entry[S]{})) + 48 }

type shard[S any] struct {
	mu sync.Mutex
	// m indexes entries by key hash, so a lookup hashes nothing more and compares key
	// bytes only for the entry it finds; keys sharing a hash are chained through same.
	m map[uint64]*entry[S]
	n int // entries held (m holds a chain per hash)
	// hot is the entry used last: a hot key (the one flooding) skips the map
	// probe for a string compare. Cleared whenever entries are deleted.
	hot *entry[S]
	// An intrusive list, most recently used first: a full shard looks for room at its
	// tail, in O(1).
	front, back *entry[S]
	bytes       int64
	nextSweep   int64
	// tailSeen is back.expires as read before a probe for a key that is not the hot one:
	// in a full shard, a new key's room looks at back next, and reading it then overlaps
	// its cache miss with the probe's instead of paying one after the other.
	tailSeen int64
	_        [24]byte // keep neighbouring shards' locks off one cache line
}

// limits are one shard's budgets.
type limits struct {
	keys  int
	bytes int64
}

type store[S any] struct {
	grows   grows[S]
	keys    keyHasher
	mask    uint64
	lim     limits
	sweepNs int64
	evicts  *atomic.Int64
	refused *atomic.Int64
	shards  []shard[S]
}

func newStore[S any](g grows[S], shards int, lim limits, sweepNs int64, evicts, refused *atomic.Int64) *store[S] {
	st := &store[S]{
		grows:   g,
		keys:    newKeyHasher(),
		mask:    uint64(shards - 1),
		lim:     lim,
		sweepNs: sweepNs,
		evicts:  evicts,
		refused: refused,
		shards:  make([]shard[S], shards),
	}
	for i := range st.shards {
		st.shards[i].m = make(map[uint64]*entry[S])
	}
	return st
}

func (st *store[S]) take(p *params, key string, now, cost int64, d *Decision) int {
	h := st.keys.hash(key)
	sh := &st.shards[h&st.mask]
	sh.mu.Lock()
	return st.takeLocked(sh, h, p, key, now, cost, d)
}

// takeLocked is take once key's hash h is computed and its shard sh locked; it unlocks sh.
func (st *store[S]) takeLocked(sh *shard[S], h uint64, p *params, key string, now, cost int64, d *Decision) int {
	if now >= sh.nextSweep {
		st.sweepLocked(sh, now)
	}
	e := sh.hot
	if e == nil || e.hash != h || !sameKey(e.key, key) {
		if b := sh.back; b != nil && sh.n >= st.lim.keys {
			sh.tailSeen = b.expires
		}
		var head *entry[S]
		e, head = sh.lookup(h, key)
		if e == nil {
			// Keys are validated when they enter the map, so a hit needs no
			// validation: an existing key pays nothing for it.
			if ValidateKey(key) != nil {
				sh.mu.Unlock()
				return takeInvalid
			}
			if e = st.insert(sh, h, head, key, now); e == nil {
				sh.mu.Unlock()
				st.refused.Add(1)
				return takeFull
			}
		}
		sh.hot = e
		sh.toFront(e)
	}
	if st.grows.growth != nil {
		if g := st.grows.growth(&e.s, p, now, cost); g > 0 && !roomFor(st.room(sh, g, now, e, false)) {
			sh.mu.Unlock()
			st.refused.Add(1)
			return takeFull
		}
	}
	if exp := step(&e.s, p, now, cost, d); exp > e.expires {
		e.expires = exp
	}
	if st.grows.bytes != nil {
		if size := entryOverhead[S]() + int64(len(e.key)) + st.grows.bytes(&e.s); size != e.size {
			sh.bytes += size - e.size
			e.size = size
		}
	}
	sh.mu.Unlock()
	return takeOK
}

// lookup returns the entry of key (whose hash is h) or nil, and the head of h's chain;
// requires sh.mu held.
func (sh *shard[S]) lookup(h uint64, key string) (e, head *entry[S]) {
	head = sh.m[h]
	e = head
	for e != nil && !sameKey(e.key, key) {
		e = e.same
	}
	return e, head
}

// insert adds key (whose hash is h and h's chain head), or returns nil when no room can
// be made; requires sh.mu held.
func (st *store[S]) insert(sh *shard[S], h uint64, head *entry[S], key string, now int64) *entry[S] {
	size := entryOverhead[S]() + int64(len(key))
	ok, e := st.room(sh, size, now, nil, true)
	if !ok {
		return nil
	}
	if head != nil && e != nil {
		head = sh.m[h] // room may have dropped it
	}
	var k string
	if e == nil {
		e = &entry[S]{}
	} else if len(key) <= len(e.key) {
		// An evicted entry is reused, and so are its key's bytes when the new key fits in
		// them: nothing else holds them (the map is keyed by hash, callers get no key
		// back), so a full store allocates nothing for a new key.
		b := unsafe.Slice(unsafe.StringData(e.key), len(key))
		copy(b, key)
		k = unsafe.String(&b[0], len(b))
	}
	if k == "" {
		k = strings.Clone(key) // a copy: the entry must not pin the caller's request buffer
	}
	*e = entry[S]{hash: h, key: k, size: size, same: head}
	sh.m[h] = e
	sh.n++
	sh.bytes += size
	sh.pushFront(e)
	return e
}

// room makes need more bytes (and, for a new key, one more key) fit the shard's budgets
// by dropping least recently used keys whose state is back to initial at now, looking at
// no more than evictScan of them and never at keep. It reports whether they fit; requires
// sh.mu held.
//
// It also returns one of the entries it dropped, for the caller to reuse.
func (st *store[S]) room(sh *shard[S], need, now int64, keep *entry[S], newKey bool) (bool, *entry[S]) {
	full := func() bool {
		return sh.bytes+need > st.lim.bytes || (newKey && sh.n >= st.lim.keys)
	}
	var spare *entry[S]
	e := sh.back
	for i := 0; i < evictScan && e != nil && full(); i++ {
		prev := e.prev
		if e != keep && e.expires <= now {
			st.removeLocked(sh, e)
			st.evicts.Add(1)
			spare = e
		}
		e = prev
	}
	return !full(), spare
}

func roomFor[S any](ok bool, _ *entry[S]) bool { return ok }

func (sh *shard[S]) pushFront(e *entry[S]) {
	e.prev, e.next = nil, sh.front
	if sh.front != nil {
		sh.front.prev = e
	}
	sh.front = e
	if sh.back == nil {
		sh.back = e
	}
}

func (sh *shard[S]) unlink(e *entry[S]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		sh.front = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		sh.back = e.prev
	}
	e.prev, e.next = nil, nil
}

func (sh *shard[S]) toFront(e *entry[S]) {
	if sh.front != e {
		sh.unlink(e)
		sh.pushFront(e)
	}
}

// removeLocked drops e; requires sh.mu held.
func (st *store[S]) removeLocked(sh *shard[S], e *entry[S]) {
	if sh.n == len(sh.m) { // no chains in the shard (the rule): one map operation
		delete(sh.m, e.hash)
	} else {
		st.unchain(sh, e)
	}
	e.same = nil
	sh.n--
	sh.unlink(e)
	sh.bytes -= e.size
	if sh.hot == e {
		sh.hot = nil
	}
}

// unchain takes e out of the map when keys share its hash; requires sh.mu held.
func (st *store[S]) unchain(sh *shard[S], e *entry[S]) {
	switch head := sh.m[e.hash]; {
	case head == e && e.same == nil:
		delete(sh.m, e.hash)
	case head == e:
		sh.m[e.hash] = e.same
	default:
		for head.same != e {
			head = head.same
		}
		head.same = e.same
	}
}

// sweepLocked drops idle keys; requires sh.mu held. O(keys in shard), once per
// SweepInterval.
func (st *store[S]) sweepLocked(sh *shard[S], now int64) {
	for e := sh.front; e != nil; {
		next := e.next
		if e.expires <= now {
			st.removeLocked(sh, e)
		}
		e = next
	}
	sh.nextSweep = now + st.sweepNs
}

// locked calls f on each shard in turn, holding that shard's lock: the cold paths (gauges,
// the sweep) that visit the whole store.
func (st *store[S]) locked(f func(sh *shard[S])) {
	for i := range st.shards {
		sh := &st.shards[i]
		sh.mu.Lock()
		f(sh)
		sh.mu.Unlock()
	}
}

func (st *store[S]) len() int {
	n := 0
	st.locked(func(sh *shard[S]) { n += sh.n })
	return n
}

func (st *store[S]) bytes() int64 {
	var n int64
	st.locked(func(sh *shard[S]) { n += sh.bytes })
	return n
}

func (st *store[S]) sweep(now int64) {
	st.locked(func(sh *shard[S]) { st.sweepLocked(sh, now) })
}
