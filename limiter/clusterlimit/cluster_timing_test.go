package clusterlimit

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/limiter"
)

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClusterDecision is a decision of a cluster policy whose key another instance
// owns (ours: forwarded over loopback HTTP, signed both ways, batched with the others in
// flight) against the same decision of a memory policy (anchor), 64 goroutines per core,
// keys spread over 10,000 tenants. Both instances run in this process, so cpu_ns/op is
// the CPU of the caller and the owner together per decision.
func BenchmarkClusterDecision(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	base := limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Capacity: 1 << 30, RefillPerSecond: 1000}
	run := func(b *testing.B, svc *limiter.Service, keys []string) {
		b.ReportAllocs()
		b.SetParallelism(64)
		var next atomic.Int64
		cpu0 := processCPU()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				k := keys[int(next.Add(1))%len(keys)]
				if d, err := svc.Allow(ctx, "p", k); err != nil || !d.Allowed || d.Degraded {
					panic(fmt.Sprintf("decision %+v, %v", d, err))
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
	}
	b.Run("ours", func(b *testing.B) {
		p := clusterPolicy(base, limiter.FailClosed, 5*time.Second)
		auth, err := cluster.NewAuth(cluster.AuthConfig{Key: []byte("0123456789abcdef0123456789abcdef")})
		if err != nil {
			b.Fatal(err)
		}
		tp, ins := startSigned(b, auth, 2, p)
		var remote []string // the keys ins[1] owns: every decision of ins[0] is forwarded
		for _, k := range keys {
			if tp.truth[partitionOf(k, tp.parts)] == ins[1].g.self {
				remote = append(remote, k)
			}
		}
		run(b, ins[0].svc, remote)
		b.ReportMetric(float64(ins[0].g.trips.Load())/float64(b.N), "trips/op")
	})
	b.Run("anchor", func(b *testing.B) {
		svc, err := limiter.NewService(limiter.Config{Policies: []limiter.Policy{base}})
		if err != nil {
			b.Fatal(err)
		}
		run(b, svc, keys)
	})
}
