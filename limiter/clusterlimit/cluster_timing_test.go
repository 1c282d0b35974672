package clusterlimit

import (
	"context"
	"fmt"
	"runtime"
	"slices"
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
// owns (ours: forwarded as a MACed frame over the owner's signed loopback stream, batched
// with the others in flight) against the same decision of a memory policy (anchor), 64 goroutines per core,
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
		b.ReportMetric(float64(ins[0].b.sent.Load())/float64(b.N), "trips/op")
	})
	b.Run("anchor", func(b *testing.B) {
		svc, err := limiter.NewService(limiter.Config{Policies: []limiter.Policy{base}})
		if err != nil {
			b.Fatal(err)
		}
		run(b, svc, keys)
	})
}

// BenchmarkClusterFewCallers is the latency of a forwarded decision at low load: one
// caller deciding in a loop (1), or one per core (2), over the same signed loopback stream
// as BenchmarkClusterDecision; ns/op is the round trip a caller waits. A slot held until
// the answers are taken (peer.hold) must not make it longer.
func BenchmarkClusterFewCallers(b *testing.B) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Capacity: 1 << 30, RefillPerSecond: 1000}, limiter.FailClosed, 5*time.Second)
	auth, err := cluster.NewAuth(cluster.AuthConfig{Key: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		b.Fatal(err)
	}
	tp, ins := startSigned(b, auth, 2, p)
	var remote []string
	for i := 0; len(remote) < 1000; i++ {
		if k := "tenant-" + strconv.Itoa(i); tp.truth[partitionOf(k, tp.parts)] == ins[1].g.self {
			remote = append(remote, k)
		}
	}
	svc := ins[0].svc
	decide := func(ctx context.Context, i int) {
		if d, err := svc.Allow(ctx, "p", remote[i%len(remote)]); err != nil || !d.Allowed || d.Degraded {
			panic(fmt.Sprintf("decision %+v, %v", d, err))
		}
	}
	b.Run("1", func(b *testing.B) {
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			decide(ctx, i)
		}
	})
	b.Run("2", func(b *testing.B) {
		b.SetParallelism(1)
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				decide(ctx, int(next.Add(1)))
			}
		})
	})
}

// BenchmarkClusterCheckpoint is the decisions/s of an owner of 100,000 live keys (token
// bucket) with checkpoints every second (ours) against none (anchor). A checkpoint's cost
// is what the owner's CPU pays: exporting and encoding every key of its partitions (the
// write is the broker's); ours measures such a round (the median of three, each reusing
// the last one's buffers as every second's does) and charges it once per second of
// decisions, as --limiter-checkpoint-interval 1s would. decisions/cpu_s counts both the
// decisions and the round in the process's CPU time, which a loaded machine's waits do
// not inflate (the goal's unit); decisions/s is the same in wall time.
func BenchmarkClusterCheckpoint(b *testing.B) {
	const keys = 100_000
	// Keys stay live (a bucket of 10,000 refilling one token in 1,000 s): each is exported.
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Capacity: 10_000, RefillPerSecond: 0.001}, limiter.FailClosed, time.Second)
	_, ins := startGroup(b, 1, p)
	be, svc := ins[0].b, ins[0].svc
	names := make([]string, keys)
	ctx := context.Background()
	for i := range names {
		names[i] = "tenant-" + strconv.Itoa(i)
		if _, err := svc.Allow(ctx, "p", names[i]); err != nil {
			b.Fatal(err)
		}
	}
	all := make([]int32, 6)
	for i := range all {
		all[i] = int32(i)
	}
	decide := func(b *testing.B) (cpu time.Duration) {
		b.ReportAllocs()
		// The sizing round's garbage is not the steady state's: collected before, uncharged
		// (a steady round allocates nothing; one of main's allocated ~37 MB, whose collection
		// this leaves out).
		runtime.GC()
		cpu0 := processCPU()
		for i := 0; b.Loop(); i++ {
			if _, err := svc.Allow(ctx, "p", names[i%keys]); err != nil {
				b.Fatal(err)
			}
		}
		return processCPU() - cpu0
	}
	b.Run("anchor", func(b *testing.B) {
		cpu := decide(b)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "decisions/cpu_s")
	})
	b.Run("ours", func(b *testing.B) {
		// A round in the steady state (every second reuses the last round's buffers): the
		// median of three after a first that sizes them, in wall and in CPU time.
		parts, heads := be.records(all, 1, false, time.Now())
		var rounds, cpus [3]time.Duration
		for i := range rounds {
			start, cpu0 := time.Now(), processCPU()
			parts, heads = be.records(all, 1, false, time.Now())
			rounds[i], cpus[i] = time.Since(start), processCPU()-cpu0
		}
		slices.Sort(rounds[:])
		slices.Sort(cpus[:])
		round, roundCPU := rounds[1], cpus[1]
		n := 0
		for _, m := range append(parts, heads...) {
			n += len(m.Value)
		}
		if n < keys*8 {
			b.Fatalf("a checkpoint of %d keys took %d bytes", keys, n)
		}
		cpu := decide(b)
		spent := b.Elapsed()
		charged := spent + time.Duration(float64(round)*spent.Seconds()) // one round per second of decisions
		chargedCPU := cpu + time.Duration(float64(roundCPU)*spent.Seconds())
		b.ReportMetric(float64(b.N)/charged.Seconds(), "decisions/s")
		b.ReportMetric(float64(b.N)/chargedCPU.Seconds(), "decisions/cpu_s")
		b.ReportMetric(float64(round.Microseconds())/1000, "ms/checkpoint")
		b.ReportMetric(float64(roundCPU.Microseconds())/1000, "cpu_ms/checkpoint")
	})
}
