package window

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSparseSeriesMemory reports heap bytes per sparse series (10 events spread over
// the retention, through ObserveAt): ours over 1M series as they are kept (raw events), the
// anchor over 100k series with the same events forced into slots and bins up front, as every
// series was kept before issue #19.
func BenchmarkSparseSeriesMemory(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		per := memOnce(&sparseMem, func() float64 { return sparseBytesPerSeries(b, 1_000_000, 10) })
		for range b.N {
		}
		b.ReportMetric(per, "B/series")
	})
	b.Run("anchor", func(b *testing.B) {
		per := memOnce(&sparseDenseMem, func() float64 {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s, _ := fillSparse(b, 100_000, 10)
			for se := range s.eachSeries() {
				se.ring.upgrade()
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(s)
			return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / 100_000
		})
		for range b.N {
		}
		b.ReportMetric(per, "B/series")
	})
}

var sparseMem, sparseDenseMem struct {
	once sync.Once
	v    float64
}

// eachSeries yields every series without locking (single-goroutine benchmarks only).
func (s *Store) eachSeries() func(func(*series) bool) {
	return func(yield func(*series) bool) {
		for i := range s.shards {
			for se := range s.shards[i].all() {
				if !yield(se) {
					return
				}
			}
		}
	}
}

var scaleStores sync.Map // series count → *scaleStore

type scaleStore struct {
	once sync.Once
	s    *Store
	now  int64
	keys []string
}

// scaleFor returns a store of n sparse series (3 events each), built once per process.
func scaleFor(b *testing.B, n int) *scaleStore {
	v, _ := scaleStores.LoadOrStore(n, &scaleStore{})
	st := v.(*scaleStore)
	st.once.Do(func() {
		st.s, st.now = fillSparse(b, n, 3)
		st.keys = make([]string, n)
		for i := range st.keys {
			st.keys[i] = fmt.Sprintf("tenant-%d", i)
		}
	})
	return st
}

// processCPU is the CPU time the process has used (user and system, every thread): on a
// machine shared with other work it varies much less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScale compares, per series, a 5-minute p95 read of one series, a top over the
// metric (every key, then a p95 read of each, as /v1/top does on one instance) and the
// idle-series sweep, at 1M series against 10k: the goal is that a million series cost each
// no more than twice what ten thousand do.
func BenchmarkScale(b *testing.B) {
	qs := []float64{0.95}
	for _, c := range []struct {
		name string
		n    int
	}{{"1M", 1_000_000}, {"10k", 10_000}} {
		b.Run("p95_"+c.name, func(b *testing.B) {
			st := scaleFor(b, c.n)
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				if _, err := st.s.ReadAt(st.now, "latency_ms", st.keys[rng.IntN(c.n)], 5*time.Minute, qs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
		})
		b.Run("top_"+c.name, func(b *testing.B) {
			st := scaleFor(b, c.n)
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				for _, k := range st.s.Keys("latency_ms", "") {
					if _, err := st.s.ReadAt(st.now, "latency_ms", k, 5*time.Minute, qs); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.n), "ns/series")
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N)/float64(c.n), "cpu_ns/series")
		})
		b.Run("sweep_"+c.name, func(b *testing.B) {
			var total, cpu time.Duration
			for range b.N {
				b.StopTimer()
				s, now := fillSparse(b, c.n, 3)
				runtime.GC() // the fill's garbage is not the sweep's cost
				b.StartTimer()
				t, cpu0 := time.Now(), processCPU()
				if n := s.Evict(now + 10*60_000); n != c.n {
					b.Fatalf("swept %d of %d", n, c.n)
				}
				total += time.Since(t)
				cpu += processCPU() - cpu0
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/float64(c.n), "ns/series")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(c.n), "cpu_ns/series")
		})
	}
}
