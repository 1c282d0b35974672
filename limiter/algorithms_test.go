package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// at returns the instant ms milliseconds after the Unix epoch.
func at(ms int64) time.Time { return time.Unix(0, ms*int64(time.Millisecond)) }

// taker is any algorithm state; clone gives an independent copy.
type taker interface {
	take(p *params, now, cost int64, d *Decision) int64
}

// takeD runs one take and returns its Decision.
func takeD(s taker, p *params, now, cost int64) Decision {
	var d Decision
	s.take(p, now, cost, &d)
	return d
}

func clone(s taker) taker {
	switch v := s.(type) {
	case *fixedWindow:
		c := *v
		return &c
	case *slidingLog:
		c := *v
		c.e = append([]logEntry(nil), v.e...)
		return &c
	case *slidingCounter:
		c := *v
		return &c
	case *tokenBucket:
		c := *v
		return &c
	case *gcra:
		c := *v
		return &c
	}
	panic("unknown state")
}

func fresh(a Algorithm) taker {
	switch a {
	case FixedWindow:
		return new(fixedWindow)
	case SlidingLog:
		return new(slidingLog)
	case SlidingCounter:
		return new(slidingCounter)
	case TokenBucket:
		return new(tokenBucket)
	}
	return new(gcra)
}

var propertyPolicies = []Policy{
	{Name: "fw", Algorithm: FixedWindow, Limit: 7, Window: 3 * time.Second},
	{Name: "sl", Algorithm: SlidingLog, Limit: 7, Window: 3 * time.Second},
	{Name: "sc", Algorithm: SlidingCounter, Limit: 7, Window: 3 * time.Second},
	{Name: "tb", Algorithm: TokenBucket, Capacity: 7, RefillPerSecond: 3},
	{Name: "tb-odd", Algorithm: TokenBucket, Capacity: 7, RefillPerSecond: 0.7},
	{Name: "lb", Algorithm: LeakyBucket, Capacity: 7, LeakPerSecond: 3},
	{Name: "lb-shape", Algorithm: LeakyBucket, Capacity: 3, LeakPerSecond: 2, MaxDelay: 700 * time.Millisecond},
}

// RetryAfter is exact: waiting it admits the same request, and the instant
// before does not. Cost 0 is a true peek: it changes nothing.
func TestRetryAfterIsExact(t *testing.T) {
	for _, pol := range propertyPolicies {
		t.Run(pol.Name, func(t *testing.T) {
			if err := pol.Validate(); err != nil {
				t.Fatal(err)
			}
			p := newParams(&pol)
			rng := rand.New(rand.NewPCG(1, uint64(len(pol.Name))))
			s := fresh(pol.Algorithm)
			now := int64(1_764_489_600) * int64(time.Second)
			denials := 0
			for i := 0; i < 3000; i++ {
				now += rng.Int64N(int64(400 * time.Millisecond))
				cost := 1 + rng.Int64N(3)
				before := clone(s)
				peek := takeD(clone(s), &p, now, 0)
				d := takeD(s, &p, now, cost)
				if peek2 := takeD(clone(before), &p, now, 0); peek2 != peek {
					t.Fatalf("peek changed state: %+v then %+v", peek, peek2)
				}
				if cost == 1 && peek.Allowed != d.Allowed {
					t.Fatalf("at %d: peek says allowed=%v, cost 1 got %v", i, peek.Allowed, d.Allowed)
				}
				if d.Allowed {
					continue
				}
				denials++
				if d.RetryAfter <= 0 {
					t.Fatalf("denial with RetryAfter %s", d.RetryAfter)
				}
				r := int64(d.RetryAfter)
				// The retry meets the state the denial left behind.
				if got := takeD(clone(s), &p, now+r, cost); !got.Allowed {
					t.Fatalf("step %d: denied %+v; at +RetryAfter still denied: %+v", i, d, got)
				}
				if got := takeD(clone(s), &p, now+r-1, cost); got.Allowed {
					t.Fatalf("step %d: denied with RetryAfter %d ns, but admitted 1 ns earlier: %+v", i, r, got)
				}
			}
			if denials < 100 {
				t.Fatalf("only %d denials: the property was barely exercised", denials)
			}
		})
	}
}

// No algorithm admits more than its quota at one instant, whatever the
// clock did before (it may go backwards in tests and replays).
func TestClockGoingBackwards(t *testing.T) {
	for _, pol := range propertyPolicies {
		p := newParams(&pol)
		s := fresh(pol.Algorithm)
		t0 := int64(100 * time.Second)
		takeD(s, &p, t0, 1)
		admitted := int64(1)
		for i := 0; i < 50; i++ {
			if d := takeD(s, &p, t0-int64(i)*int64(time.Second), 1); d.Allowed && d.Delay == 0 {
				admitted++
			}
		}
		if admitted > p.quota {
			t.Errorf("%s: admitted %d with the clock going backwards, quota %d", pol.Name, admitted, p.quota)
		}
	}
}

// The sliding counter's integer estimate reproduces the article's numbers:
// 100 × (1 − 0.1/60) + 0 = 99.83 leaves room for exactly one request.
func TestSlidingCounterEstimate(t *testing.T) {
	pol := Policy{Name: "sc", Algorithm: SlidingCounter, Limit: 100, Window: time.Minute}
	p := newParams(&pol)
	var s slidingCounter
	for i := 0; i < 100; i++ {
		takeD(&s, &p, int64(59_900*time.Millisecond), 1)
	}
	d := takeD(&s, &p, int64(60_100*time.Millisecond), 1)
	if !d.Allowed || d.Remaining != 0 {
		t.Fatalf("first request at 60.1 s: %+v, want allowed with 0 remaining (estimate 99 + 1)", d)
	}
	d = takeD(&s, &p, int64(60_100*time.Millisecond), 1)
	if d.Allowed {
		t.Fatalf("second request at 60.1 s allowed")
	}
	// prev = 100 must decay below 99 (cur is 1): 100·(60−e)/60 < 99 ⟺ e > 0.6 s.
	if want := 600*time.Millisecond + 1 - 100*time.Millisecond; d.RetryAfter != want {
		t.Errorf("RetryAfter = %s, want %s", d.RetryAfter, want)
	}
}

func TestMemoryZeroAllocs(t *testing.T) {
	ctx := context.Background()
	for _, pol := range propertyPolicies {
		m, err := NewMemory(pol, MemoryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		now := at(1_764_489_600_000)
		for i := 0; i < 100; i++ { // create the key and grow the log to its quota
			now = now.Add(100 * time.Millisecond)
			m.AllowN(ctx, "tenant-42", now, 1)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			now = now.Add(37 * time.Millisecond)
			if _, err := m.AllowN(ctx, "tenant-42", now, 1); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocs per decision on an existing key, want 0", pol.Name, allocs)
		}
	}
}

func TestMemoryExpiresIdleKeys(t *testing.T) {
	ctx := context.Background()
	m, err := NewMemory(Policy{Name: "x", Algorithm: SlidingLog, Limit: 5, Window: time.Minute},
		MemoryConfig{Shards: 4, SweepInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := at(0)
	for i := 0; i < 100; i++ {
		m.AllowN(ctx, string(rune('a'+i%26))+string(rune('a'+i/26)), t0, 1)
	}
	if m.Len() != 100 {
		t.Fatalf("Len = %d, want 100", m.Len())
	}
	m.Sweep(t0.Add(59 * time.Second))
	if m.Len() != 100 {
		t.Fatalf("after 59 s: Len = %d, want 100 (still in the window)", m.Len())
	}
	m.Sweep(t0.Add(60 * time.Second))
	if m.Len() != 0 {
		t.Fatalf("after 60 s: Len = %d, want 0 (all back to initial)", m.Len())
	}
	// The lazy sweep: touching a shard after the interval drops its idle keys.
	m.AllowN(ctx, "old", t0, 1)
	for i := 0; i < 50; i++ {
		m.AllowN(ctx, string(rune('A'+i)), t0.Add(2*time.Minute), 1)
	}
	if n := m.Len(); n != 50 {
		t.Fatalf("Len = %d after a new round of keys, want 50 (old swept lazily)", n)
	}
}

// TestMemoryMaxKeysEvicts: a full store makes room only from keys whose state is back to
// initial; with only live state left it refuses new keys (counted) and never evicts a live
// one, which handed a denied key a fresh allowance (the fourth probe).
func TestMemoryMaxKeysEvicts(t *testing.T) {
	ctx := context.Background()
	m, _ := NewMemory(Policy{Name: "x", Algorithm: FixedWindow, Limit: 5, Window: time.Minute},
		MemoryConfig{Shards: 1, MaxKeys: 10, SweepInterval: time.Hour})
	for i := 0; i < 25; i++ {
		_, err := m.AllowN(ctx, string(rune('a'+i)), at(0), 1)
		if (i < 10) != (err == nil) || (err != nil && !errors.Is(err, ErrStoreFull)) {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	if m.Len() != 10 || m.Evictions() != 0 || m.Refused() != 15 {
		t.Fatalf("Len = %d, evictions = %d, refused %d; want 10, 0 and 15", m.Len(), m.Evictions(), m.Refused())
	}
	// Once every key's window has ended, new keys take the places of idle ones.
	for i := 0; i < 10; i++ {
		if _, err := m.AllowN(ctx, string(rune('A'+i)), at(0).Add(time.Minute+time.Duration(i)*time.Millisecond), 1); err != nil {
			t.Fatal(err)
		}
	}
	if m.Len() != 10 || m.Refused() != 15 || m.Evictions() != 10 {
		t.Fatalf("after the window: Len = %d, refused %d, evictions %d; want 10, 15 and 10", m.Len(), m.Refused(), m.Evictions())
	}
}

// TestMemoryEvictionKeepsDeniedKeys is the fourth probe: a flood of new keys
// against a full store evicted a key at its limit, and it was allowed again. Now the
// denied key stays denied through the flood, and the flood is refused and counted.
func TestMemoryEvictionKeepsDeniedKeys(t *testing.T) {
	ctx := context.Background()
	m, _ := NewMemory(Policy{Name: "x", Algorithm: TokenBucket, Capacity: 2, RefillPerSecond: 0.001},
		MemoryConfig{Shards: 4, MaxKeys: 64})
	now := at(0)
	for range 2 {
		m.AllowN(ctx, "victim", now, 1)
	}
	if d, _ := m.AllowN(ctx, "victim", now, 1); d.Allowed {
		t.Fatal("victim not denied at its limit")
	}
	for i := range 10_000 {
		m.AllowN(ctx, fmt.Sprintf("flood-%d", i), now, 1)
	}
	if d, err := m.AllowN(ctx, "victim", now, 1); err != nil || d.Allowed {
		t.Fatalf("victim after the flood: %+v %v, want still denied", d, err)
	}
	if m.Refused() < 10_000-64 || m.Len() > 64 {
		t.Fatalf("refused %d, len %d", m.Refused(), m.Len())
	}
}

// TestMemoryByteBudget is the second probe: sliding_log limit 100000 window 1h and
// 2,000 new keys with cost 100000 grew RSS by 2.1 GB (800 KB of log per key). A request is
// one log entry whatever its cost, and the byte budget holds.
func TestMemoryByteBudget(t *testing.T) {
	ctx := context.Background()
	const budget = 1 << 20
	m, _ := NewMemory(Policy{Name: "x", Algorithm: SlidingLog, Limit: MaxLogLimit, Window: time.Hour},
		MemoryConfig{MaxBytes: budget})
	var refused int
	for i := range 20_000 {
		if _, err := m.AllowN(ctx, fmt.Sprintf("k%d", i), at(0), MaxLogLimit); errors.Is(err, ErrStoreFull) {
			refused++
		}
	}
	if b := m.Bytes(); b > budget || b < budget/2 {
		t.Fatalf("%d bytes held, budget %d", b, budget)
	}
	if refused == 0 || int64(refused) != m.Refused() {
		t.Fatalf("refused %d (counted %d), want some once the budget is full", refused, m.Refused())
	}
	// The accounting matches what the keys hold: one 4-entry ring each.
	per := entryOverhead[slidingLog]() + 6 + 4*16
	if n := int64(m.Len()); m.Bytes() < n*(per-2) || m.Bytes() > n*(per+1) {
		t.Fatalf("%d keys, %d bytes: want about %d each", n, m.Bytes(), per)
	}
}

func TestMonotonicClock(t *testing.T) {
	c := MonotonicClock()
	prev := c()
	if d := time.Since(prev); d < -time.Second || d > time.Second {
		t.Fatalf("clock is %s away from the wall clock", d)
	}
	for i := 0; i < 1000; i++ {
		now := c()
		if now.Before(prev) {
			t.Fatalf("clock went backwards: %s then %s", prev, now)
		}
		prev = now
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Name: "", Algorithm: FixedWindow, Limit: 1, Window: time.Second}, "name: must be 1 to 64"},
		{Policy{Name: "a b", Algorithm: FixedWindow, Limit: 1, Window: time.Second}, "name: must be"},
		{Policy{Name: "x"}, `policy "x": algorithm: must be`},
		{Policy{Name: "x", Algorithm: FixedWindow, Window: time.Second}, "limit: must be between 1 and"},
		{Policy{Name: "x", Algorithm: SlidingLog, Limit: MaxLogLimit + 1, Window: time.Second}, "limit: must be between 1 and 100000"},
		{Policy{Name: "x", Algorithm: FixedWindow, Limit: 1}, "window: must be between 1ms"},
		{Policy{Name: "x", Algorithm: FixedWindow, Limit: 1, Window: time.Second, Capacity: 3}, "capacity: applies only to token_bucket"},
		{Policy{Name: "x", Algorithm: TokenBucket, Capacity: 3}, "refill_per_second: must be a number above 0"},
		{Policy{Name: "x", Algorithm: TokenBucket, Capacity: 3, RefillPerSecond: 1, Limit: 5}, "limit: does not apply to token_bucket (use capacity)"},
		{Policy{Name: "x", Algorithm: TokenBucket, Capacity: 3, RefillPerSecond: 1, MaxDelay: time.Second}, "max_delay: applies only to leaky_bucket"},
		{Policy{Name: "x", Algorithm: LeakyBucket, Capacity: 3, RefillPerSecond: 1}, "leak_per_second: must be a number above 0"},
		{Policy{Name: "x", Algorithm: FixedWindow, Limit: 1, Window: time.Second, Timeout: time.Second}, "timeout: applies only to backend redis"},
		{Policy{Name: "x", Algorithm: FixedWindow, Limit: 1, Window: time.Second, OnBackendError: FailLocal}, "on_backend_error: local applies only to backend redis"},
		{Policy{Name: "x", Algorithm: FixedWindow, Limit: 1, Window: time.Second, Backend: BackendRedis, Timeout: time.Nanosecond}, "timeout: must be 0 (default 50ms) or between 1ms and 1m"},
		{Policy{Name: "x", Algorithm: SlidingCounter, Limit: 1 << 30, Window: 24 * time.Hour}, "2^53"},
	} {
		err := c.p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want it to mention %q", c.p, err, c.want)
		}
	}
}

// A token bucket's kept denial (allowAt, fullAt) answers exactly what solving again would:
// every decision of a key held past its limit equals the one from the same state with
// nothing kept, for cost 1 (the fast path) and larger costs.
func TestTokenBucketKeptDenialIsExact(t *testing.T) {
	for _, pol := range []Policy{
		{Name: "tb", Algorithm: TokenBucket, Capacity: 7, RefillPerSecond: 3},
		{Name: "tb-odd", Algorithm: TokenBucket, Capacity: 5, RefillPerSecond: 0.7},
	} {
		p := newParams(&pol)
		rng := rand.New(rand.NewPCG(7, uint64(pol.Capacity)))
		var s tokenBucket
		now := int64(1_764_489_600) * int64(time.Second)
		kept := 0
		for i := 0; i < 5000; i++ {
			now += rng.Int64N(int64(30 * time.Millisecond))
			cost := int64(1)
			if i%7 == 0 {
				cost = 2
			}
			solved := s
			solved.denyCost = 0 // forget what was kept: solve again
			if s.denyCost == cost {
				kept++
			}
			got, want := takeD(&s, &p, now, cost), takeD(&solved, &p, now, cost)
			if got != want {
				t.Fatalf("%s step %d cost %d: kept %+v, solved %+v", pol.Name, i, cost, got, want)
			}
		}
		if kept < 1000 {
			t.Fatalf("%s: the kept denial answered only %d times", pol.Name, kept)
		}
	}
}
