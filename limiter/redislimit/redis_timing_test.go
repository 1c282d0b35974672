package redislimit_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// benchParallelism × GOMAXPROCS goroutines drive every variant.
const benchParallelism = 8

// benchKeys spreads decisions over 1,000 keys, all comfortably under limit.
var benchKeys = func() []string {
	k := make([]string, 1000)
	for i := range k {
		k[i] = "tenant-" + strconv.Itoa(i)
	}
	return k
}()

func reportRate(b *testing.B, start time.Time, decisions int64) {
	b.ReportMetric(float64(decisions)/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkRedisDecision compares decisions per second on one redis-server
// from the same number of goroutines: ours (the leaky_bucket GCRA script,
// the same algorithm as redis_rate: one EVALSHA round trip each) against
// github.com/go-redis/redis_rate/v10 Allow. Variants: ours_pipelined (16
// decisions per Decide: one pipeline), ours_autopipelined and
// anchor_autopipelined (go-redis's AutoPipeliner batches concurrent callers).
// Goal: ours ≥ anchor.
func BenchmarkRedisDecision(b *testing.B) {
	srv := redistest.Start(b)
	opts := redislimit.Options(srv.Addr)
	opts.PoolSize = 64
	c := goredis.NewClient(opts)
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	// Open the pool's connections before any timing, so the first variant
	// does not pay the dials.
	done := make(chan error, opts.PoolSize)
	for i := 0; i < opts.PoolSize; i++ {
		go func() { done <- c.Do(ctx, "CLIENT", "PAUSE", "0").Err() }()
	}
	for i := 0; i < opts.PoolSize; i++ {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	pol := limiter.Policy{Name: "bench", Algorithm: limiter.LeakyBucket, Capacity: 1_000_000, LeakPerSecond: 1_000_000}
	anchorLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}

	oursOn := func(b *testing.B, cl redislimit.Client) {
		be, err := redislimit.New(cl, redislimit.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Load(ctx); err != nil {
			b.Fatal(err)
		}
		l, _ := be.Limiter(pol)
		var n atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			i := int(n.Add(1)) * 7919
			for pb.Next() {
				if _, err := l.AllowN(ctx, benchKeys[i%len(benchKeys)], time.Time{}, 1); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
		reportRate(b, start, int64(b.N))
	}
	anchorOn := func(b *testing.B, cl goredis.UniversalClient) {
		rl := redis_rate.NewLimiter(cl)
		var n atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			i := int(n.Add(1)) * 7919
			for pb.Next() {
				if _, err := rl.Allow(ctx, benchKeys[i%len(benchKeys)], anchorLimit); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
		reportRate(b, start, int64(b.N))
	}

	b.Run("ours", func(b *testing.B) { oursOn(b, c) })
	b.Run("anchor", func(b *testing.B) { anchorOn(b, c) })
	b.Run("ours_pipelined", func(b *testing.B) {
		be, _ := redislimit.New(c, redislimit.Config{})
		be.Load(ctx)
		const batch = 16
		var n atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			i := int(n.Add(1)) * 7919
			reqs := make([]limiter.BackendRequest, 0, batch)
			out := make([]limiter.Decision, batch)
			flush := func() {
				if err := be.Decide(ctx, reqs, out); err != nil {
					b.Error(err)
				}
				reqs = reqs[:0]
			}
			for pb.Next() {
				reqs = append(reqs, limiter.BackendRequest{Policy: &pol, Key: benchKeys[i%len(benchKeys)], Cost: 1})
				i++
				if len(reqs) == batch {
					flush()
				}
			}
			if len(reqs) > 0 {
				flush()
			}
		})
		reportRate(b, start, int64(b.N))
	})
	b.Run("ours_autopipelined", func(b *testing.B) {
		ap, err := c.AutoPipeline()
		if err != nil {
			b.Fatal(err)
		}
		oursOn(b, ap)
	})
	b.Run("anchor_autopipelined", func(b *testing.B) {
		ap, err := c.AutoPipeline()
		if err != nil {
			b.Fatal(err)
		}
		anchorOn(b, ap)
	})
}

var hotRound atomic.Int64

// BenchmarkHotKey floods keys at 10× their limit (100 per minute, 1,000
// requests per key; one op is one request) and reports Redis script calls
// per denied request with and without the deny cache.
func BenchmarkHotKey(b *testing.B) {
	srv := redistest.Start(b)
	for _, cache := range []bool{false, true} {
		name := "without_deny_cache"
		if cache {
			name = "with_deny_cache"
		}
		b.Run(name, func(b *testing.B) {
			var calls atomic.Int64
			be := newBackend(b, srv.Addr, redislimit.Config{OnScriptCall: func(string) { calls.Add(1) }})
			s := newService(b, be, limiter.Config{
				Policies: []limiter.Policy{{Name: "hot", Algorithm: limiter.SlidingLog, Limit: 100, Window: time.Minute,
					Backend: limiter.BackendRedis, Timeout: time.Second}},
				DenyCache: limiter.DenyCacheConfig{Disabled: !cache},
			})
			ctx := context.Background()
			var allowed, denied int64
			key := ""
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%1000 == 0 {
					key = "flood-" + strconv.FormatInt(hotRound.Add(1), 10) // a fresh key every 1,000
				}
				d, err := s.Allow(ctx, "hot", key)
				if err != nil {
					b.Fatal(err)
				}
				if d.Allowed {
					allowed++
				} else {
					denied++
				}
			}
			if denied > 0 {
				// every admitted request costs one call; the rest are the denials'
				b.ReportMetric(float64(calls.Load()-allowed)/float64(denied), "redis_calls/denied")
			}
		})
	}
}
