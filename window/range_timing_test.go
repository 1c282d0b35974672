package window

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkReadRange: ReadRangeAt of one full series in process (no HTTP), the work behind
// BenchmarkHTTPRange (#15): 30 one-slot points (every slot of the retention, 29 of them
// packed) and 25 points of one-minute windows every 10 s, p50/p95/p99 each, over the
// HTTP benchmark's series (100 integer values a slot) and over lognormal latencies (1,000
// a slot, about 300 bins each).
func BenchmarkReadRange(b *testing.B) {
	qs := []float64{0.5, 0.95, 0.99}
	rng := rand.New(rand.NewPCG(15, 7))
	series := []struct {
		name  string
		every int64
		value func(ts int64) float64
	}{
		{"ints", 100, func(ts int64) float64 { return float64(1 + (ts/100)%997) }},
		{"lognormal", 10, func(int64) float64 { return math.Exp(math.Log(50) + rng.NormFloat64()) }},
	}
	for _, se := range series {
		s := newTestStore(b, StoreConfig{})
		end := t0 + 5*60_000
		for ts := t0; ts < end; ts += se.every {
			if err := s.ObserveAt(ts, Event{TS: ts, Metric: "latency_ms", Key: "k", Value: se.value(ts)}); err != nil {
				b.Fatal(err)
			}
		}
		now := end - 1
		for _, sh := range []struct {
			name    string
			w, step time.Duration
		}{{"slots", 10 * time.Second, 10 * time.Second}, {"1m", time.Minute, 10 * time.Second}} {
			b.Run(se.name+"_"+sh.name, func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := processCPU() // the machine is shared: CPU time is steadier than wall time
				for b.Loop() {
					if _, err := s.ReadRangeAt(now, "latency_ms", "k", sh.w, sh.step, qs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
			})
		}
	}
}
