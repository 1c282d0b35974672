package redislimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// BenchmarkLevelsRedis compares one Redis decision of a three-level fixed window
// (fixed_window_levels.lua: three INCRBYs, one round trip) with a
// one-level fixed window (fixed_window.lua: one INCRBY) on the same redis-server, one
// goroutine, every decision admitted. Goal (#29): ≤ 2×.
func BenchmarkLevelsRedis(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, srv.Addr)
	be, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := be.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name string
		p    limiter.Policy
	}{
		{"ours", limiter.Policy{Name: "lv", Algorithm: limiter.FixedWindow, Window: time.Hour, Backend: limiter.BackendRedis,
			Levels: limiter.Levels{Separator: "/", N: 3, Limits: [limiter.MaxLevels]int64{limiter.MaxQuota, limiter.MaxQuota, limiter.MaxQuota}}}},
		{"anchor", limiter.Policy{Name: "one", Algorithm: limiter.FixedWindow, Window: time.Hour, Limit: limiter.MaxQuota, Backend: limiter.BackendRedis}},
	} {
		b.Run(v.name, func(b *testing.B) {
			l, err := be.Limiter(v.p)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if d, err := l.AllowN(ctx, "org-1/team-a/user-7", time.Now(), 1); err != nil || !d.Allowed {
					b.Fatalf("%+v %v", d, err)
				}
			}
		})
	}
}
