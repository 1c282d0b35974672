package redislimit_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// BenchmarkRedisCluster: decisions/s from 16 goroutines (the leaky_bucket script, one
// EVALSHA round trip each, 1,000 keys) through a Redis Cluster of three masters (ours)
// against one redis-server (anchor), in the same run. It also reports the Redis CPU per
// decision on each master (redis_cpu_us/decision is their sum; m1…m3 each), which is what
// the cluster divides. Goal: ours ≥ 0.9× the anchor.
func BenchmarkRedisCluster(b *testing.B) {
	cluster := redistest.StartCluster(b, 3, 0)
	single := redistest.Start(b)
	pol := limiter.Policy{Name: "bench", Algorithm: limiter.LeakyBucket, Capacity: 1_000_000, LeakPerSecond: 1_000_000}
	ctx := context.Background()
	run := func(b *testing.B, conn redislimit.Conn, servers []*redistest.Server) {
		conn.PoolSize = 16
		be, err := redislimit.New(connClient(b, conn), redislimit.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Load(ctx); err != nil {
			b.Fatal(err)
		}
		l, _ := be.Limiter(pol)
		for _, k := range benchKeys { // warm every node's connections and the script cache
			if _, err := l.AllowN(ctx, k, time.Time{}, 1); err != nil {
				b.Fatal(err)
			}
		}
		cpu0 := make([]float64, len(servers))
		for i, s := range servers {
			cpu0[i] = redisCPU(b, s)
		}
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
		b.StopTimer()
		var total float64
		for i, s := range servers {
			us := (redisCPU(b, s) - cpu0[i]) * 1e6 / float64(b.N)
			total += us
			if len(servers) > 1 {
				b.ReportMetric(us, fmt.Sprintf("m%d_cpu_us/decision", i+1))
			}
		}
		b.ReportMetric(total, "redis_cpu_us/decision")
	}
	b.Run("ours", func(b *testing.B) {
		run(b, redislimit.Conn{Cluster: cluster.Addrs()}, cluster.Nodes)
	})
	b.Run("anchor", func(b *testing.B) {
		run(b, redislimit.Conn{Addr: single.Addr}, []*redistest.Server{single})
	})
}

// redisCPU is the server's used_cpu_user + used_cpu_sys, in seconds.
func redisCPU(b *testing.B, s *redistest.Server) float64 {
	b.Helper()
	info, err := s.Do("INFO", "cpu")
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}
