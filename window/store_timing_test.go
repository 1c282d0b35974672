package window

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

func lognormal(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Exp(3.5 + 0.8*rng.NormFloat64()) // median ≈ 33 ms
	}
	return v
}

// BenchmarkObserve: one event into an existing series (count, sum, min, max, DDSketch bins)
// against a bare sketches-go DDSketch.Add of the same values. cpu_ns/op is the process's CPU
// time per event, steadier than wall time when the machine is shared.
func BenchmarkObserve(b *testing.B) {
	vals := lognormal(rand.New(rand.NewPCG(1, 1)), 4096)
	b.Run("ours", func(b *testing.B) {
		s, _ := NewStore(StoreConfig{})
		ev := Event{TS: t0, Metric: "latency_ms", Key: "tenant-42"}
		_ = s.ObserveAt(t0, ev)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		for i := range b.N {
			ev.Value = vals[i&4095]
			_ = s.ObserveAt(t0, ev)
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
	})
	// from is the same event through ObserveFrom, the call ingest makes per event (the
	// record's timestamp judged once, in the ring).
	b.Run("from", func(b *testing.B) {
		s, _ := NewStore(StoreConfig{})
		ev := Event{TS: t0, Metric: "latency_ms", Key: "tenant-42", Feed: FeedOf(3)}
		src := Source{RecordTS: t0}
		_ = s.ObserveFrom(t0, src, &ev)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		for i := range b.N {
			ev.Value = vals[i&4095]
			_ = s.ObserveFrom(t0, src, &ev)
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
	})
	b.Run("anchor", func(b *testing.B) {
		sk, _ := ddsketch.NewDefaultDDSketch(0.01)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		for i := range b.N {
			_ = sk.Add(vals[i&4095])
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
	})
}

// BenchmarkObserveParallel: many goroutines, many series, as the ingest path runs.
func BenchmarkObserveParallel(b *testing.B) {
	vals := lognormal(rand.New(rand.NewPCG(1, 1)), 4096)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "tenant-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
	}
	s, _ := NewStore(StoreConfig{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		ev := Event{TS: t0, Metric: "latency_ms"}
		for pb.Next() {
			ev.Key, ev.Value = keys[i%len(keys)], vals[i&4095]
			_ = s.ObserveAt(t0, ev)
			i++
		}
	})
}

// BenchmarkWindowP95Store: a 5-minute p95 through Store.ReadAt for one series with 30 full
// slots of 1,000 lognormal latencies, against the textbook way: merge the 30 slot sketches
// (sketches-go MergeWith into a fresh sketch) and read the quantile.
func BenchmarkWindowP95Store(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		s, now := fullSeriesStore(b)
		qs := []float64{0.95}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := s.ReadAt(now, "latency_ms", "tenant-42", 5*time.Minute, qs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("anchor", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(2, 2))
		slots := make([]*ddsketch.DDSketch, 30)
		for i := range slots {
			slots[i], _ = ddsketch.NewDefaultDDSketch(0.01)
			for _, v := range lognormal(rng, 1000) {
				_ = slots[i].Add(v)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			m, _ := ddsketch.NewDefaultDDSketch(0.01)
			for _, sk := range slots {
				_ = m.MergeWith(sk)
			}
			if _, err := m.GetValueAtQuantile(0.95); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func fullSeriesStore(b *testing.B) (*Store, int64) {
	s, _ := NewStore(StoreConfig{})
	rng := rand.New(rand.NewPCG(2, 2))
	now := t0 + 299_999
	for slot := range int64(30) {
		for _, v := range lognormal(rng, 1000) {
			_ = s.ObserveAt(now, Event{TS: t0 + slot*10_000, Metric: "latency_ms", Key: "tenant-42", Value: v})
		}
	}
	return s, now
}

// BenchmarkSeriesMemory reports bytes per active latency series with 30 full slots of 1,000
// lognormal latencies, filled in time order (29 slots behind the current one, packed): ours over 100k series, the anchor (30 default sketches-go sketches
// holding the same values) over 10k series, both from heap deltas after a GC.
func BenchmarkSeriesMemory(b *testing.B) {
	const templates = 64
	rng := rand.New(rand.NewPCG(7, 7))
	data := make([][][]float64, templates) // template × slot × values
	for i := range data {
		data[i] = make([][]float64, 30)
		for j := range data[i] {
			data[i][j] = lognormal(rng, 1000)
		}
	}
	b.Run("ours", func(b *testing.B) {
		perSeries := memOnce(&oursMem, func() float64 {
			tmpl := make([]*Ring, templates)
			for i := range tmpl {
				r, _ := NewRing(RingConfig{})
				// In time order, as ingest fills a series: each slot is current while it
				// fills, and the ring packs it once it moves on.
				for j, vs := range data[i] {
					for k, v := range vs {
						ts := t0 + int64(j)*10_000 + int64(k)*10
						_ = r.Add(ts, ts, v, 1)
					}
				}
				tmpl[i] = r
			}
			// Through a real Store, so the map entry, key and series header count too.
			const n = 100_000
			return heapPerItem(n, func(keep []any) {
				s, _ := NewStore(StoreConfig{})
				for i := range keep {
					key := fmt.Sprintf("tenant-%d", i)
					h := s.hash("latency_ms", key)
					s.shards[h&s.mask].series[h] = &series{metric: "latency_ms", key: key, ring: *tmpl[i%templates].clone()}
				}
				keep[0] = s
			})
		})
		for range b.N {
		}
		b.ReportMetric(perSeries, "B/series")
	})
	b.Run("anchor", func(b *testing.B) {
		perSeries := memOnce(&anchorMem, func() float64 {
			tmpl := make([][]*ddsketch.DDSketch, templates)
			for i := range tmpl {
				tmpl[i] = make([]*ddsketch.DDSketch, 30)
				for j, vs := range data[i] {
					sk, _ := ddsketch.NewDefaultDDSketch(0.01)
					for _, v := range vs {
						_ = sk.Add(v)
					}
					tmpl[i][j] = sk
				}
			}
			const n = 10_000
			return heapPerItem(n, func(keep []any) {
				for i := range keep {
					ss := make([]*ddsketch.DDSketch, 30)
					for j := range ss {
						ss[j] = tmpl[i%templates][j].Copy()
					}
					keep[i] = ss
				}
			})
		})
		for range b.N {
		}
		b.ReportMetric(perSeries, "B/series")
	})
}

var oursMem, anchorMem struct {
	once sync.Once
	v    float64
}

func memOnce(m *struct {
	once sync.Once
	v    float64
}, f func() float64) float64 {
	m.once.Do(func() { m.v = f() })
	return m.v
}

// heapPerItem fills n items and returns the heap growth per item.
func heapPerItem(n int, fill func(keep []any)) float64 {
	keep := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fill(keep)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}
