package limiter

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryConfig tunes a Memory limiter. The zero value is ready to use.
type MemoryConfig struct {
	// Shards is the number of independently locked maps, rounded up to a power
	// of two. Default 64.
	Shards int
	// MaxKeys bounds the keys held; when a shard is full and has nothing idle
	// to drop, an arbitrary key is evicted (its limit restarts). Default 1<<20.
	MaxKeys int
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
	if c.SweepInterval < 0 {
		return fmt.Errorf("memory limiter: sweep interval %s is negative", c.SweepInterval)
	}
	return nil
}

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
	fw     *store[fixedWindow]
	sl     *store[slidingLog]
	sc     *store[slidingCounter]
	tb     *store[tokenBucket]
	lb     *store[gcra]
	evicts atomic.Int64
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
		m.fw = newStore[fixedWindow](shards, perShard, int64(sweep), &m.evicts)
	case SlidingLog:
		m.sl = newStore[slidingLog](shards, perShard, int64(sweep), &m.evicts)
	case SlidingCounter:
		m.sc = newStore[slidingCounter](shards, perShard, int64(sweep), &m.evicts)
	case TokenBucket:
		m.tb = newStore[tokenBucket](shards, perShard, int64(sweep), &m.evicts)
	case LeakyBucket:
		m.lb = newStore[gcra](shards, perShard, int64(sweep), &m.evicts)
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
	if !m.take(key, now.UnixNano(), cost, &d) {
		return d, ErrInvalidKey
	}
	return d, nil
}

// take decides into d; false means key is new and fails ValidateKey.
func (m *Memory) take(key string, now, cost int64, d *Decision) bool {
	switch m.pr.algorithm {
	case TokenBucket:
		return m.tb.take(&m.pr, key, now, cost, d)
	case LeakyBucket:
		return m.lb.take(&m.pr, key, now, cost, d)
	case SlidingLog:
		return m.sl.take(&m.pr, key, now, cost, d)
	case SlidingCounter:
		return m.sc.take(&m.pr, key, now, cost, d)
	default:
		return m.fw.take(&m.pr, key, now, cost, d)
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

// Evictions returns how many keys were evicted because MaxKeys was reached.
func (m *Memory) Evictions() int64 { return m.evicts.Load() }

// Sweep drops every key that is idle at now, in every shard.
func (m *Memory) Sweep(now time.Time) {
	m.cold().sweep(now.UnixNano())
}

var _ Limiter = (*Memory)(nil)

// memStore is the cold part of a store (sizes, sweeps).
type memStore interface {
	len() int
	sweep(now int64)
}

// step runs the algorithm of s (a pointer to one of the state structs in
// algorithms.go). The type switch makes every call static.
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

type entry[S any] struct {
	s       S
	expires int64  // ns: state is initial again from here on
	key     string // a copy: a map key must not pin the caller's request buffer
}

type shard[S any] struct {
	mu sync.Mutex
	m  map[string]*entry[S]
	// hot is the entry used last: a hot key (the one flooding) skips the map
	// probe for a string compare. Cleared whenever entries are deleted.
	hot       *entry[S]
	nextSweep int64
	_         [32]byte // keep neighbouring shards' locks off one cache line
}

type store[S any] struct {
	seed     maphash.Seed
	mask     uint64
	perShard int
	sweepNs  int64
	evicts   *atomic.Int64
	shards   []shard[S]
}

func newStore[S any](shards, perShard int, sweepNs int64, evicts *atomic.Int64) *store[S] {
	st := &store[S]{
		seed:     maphash.MakeSeed(),
		mask:     uint64(shards - 1),
		perShard: perShard,
		sweepNs:  sweepNs,
		evicts:   evicts,
		shards:   make([]shard[S], shards),
	}
	for i := range st.shards {
		st.shards[i].m = make(map[string]*entry[S])
	}
	return st
}

func (st *store[S]) take(p *params, key string, now, cost int64, d *Decision) bool {
	sh := &st.shards[maphash.String(st.seed, key)&st.mask]
	sh.mu.Lock()
	e := sh.hot
	if e == nil || e.key != key {
		e = sh.m[key]
		if e == nil {
			// Keys are validated when they enter the map, so a hit needs no
			// validation: an existing key pays nothing for it.
			if ValidateKey(key) != nil {
				sh.mu.Unlock()
				return false
			}
			e = st.insert(sh, key, now)
		}
		sh.hot = e
	}
	if now >= sh.nextSweep {
		st.sweepLocked(sh, now)
		if sh.m[key] == nil { // swept while idle: it is in use again
			sh.m[e.key] = e
		}
		sh.hot = e
	}
	if exp := step(&e.s, p, now, cost, d); exp > e.expires {
		e.expires = exp
	}
	sh.mu.Unlock()
	return true
}

// insert adds key; requires sh.mu held.
func (st *store[S]) insert(sh *shard[S], key string, now int64) *entry[S] {
	if now >= sh.nextSweep || len(sh.m) >= st.perShard {
		st.sweepLocked(sh, now)
	}
	if len(sh.m) >= st.perShard {
		for k := range sh.m { // map order is random: evict an arbitrary key
			delete(sh.m, k)
			st.evicts.Add(1)
			break
		}
		sh.hot = nil
	}
	e := &entry[S]{key: strings.Clone(key)}
	sh.m[e.key] = e
	return e
}

// sweepLocked drops idle keys; requires sh.mu held. O(keys in shard).
func (st *store[S]) sweepLocked(sh *shard[S], now int64) {
	for k, e := range sh.m {
		if e.expires <= now {
			delete(sh.m, k)
		}
	}
	sh.hot = nil
	sh.nextSweep = now + st.sweepNs
}

func (st *store[S]) len() int {
	n := 0
	for i := range st.shards {
		sh := &st.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (st *store[S]) sweep(now int64) {
	for i := range st.shards {
		sh := &st.shards[i]
		sh.mu.Lock()
		st.sweepLocked(sh, now)
		sh.mu.Unlock()
	}
}
