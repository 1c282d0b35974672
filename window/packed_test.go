package window

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/slide-metrics/slide/sketch"
)

// TestPackedSlotsMatchOracle is the oracle test over the compact slot encoding: dense
// series (200 events every 7 s, up to 40 s out of order, so past slots reopen and are packed
// again) of every sketch kind, read over 10 s, 1 m and 5 m windows and as a range. Every
// answer is within the kind's relative accuracy of the exact quantile, the slots behind the
// current one are packed, and the kept aggregate equals one rebuilt from the slots.
func TestPackedSlotsMatchOracle(t *testing.T) {
	kinds := []sketch.Kind{{}, {Name: sketch.NameHDR, SigFigs: 3}, {Name: sketch.NameNative}}
	qs := []float64{0.5, 0.95, 0.99}
	windows := []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute}
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			s := newTestStore(t, StoreConfig{Ring: RingConfig{Sketch: k}})
			ix, _ := k.Indexer()
			tol := ix.RelativeAccuracy() + 1e-9
			rng := rand.New(rand.NewPCG(19, uint64(len(k.Name))))
			var evs []Event
			for now := t0; now < t0+8*60_000; now += 7_000 {
				for range 200 {
					v := math.Floor(math.Exp(3+rng.NormFloat64())) + 1 // integers: HDR records them exactly
					e := Event{TS: now - rng.Int64N(40_000), Metric: "latency_ms", Key: "k", Value: v}
					if err := s.ObserveAt(now, e); err != nil {
						t.Fatal(err)
					}
					evs = append(evs, e)
				}
				for _, w := range windows {
					a, err := s.ReadAt(now, "latency_ms", "k", w, qs)
					if err != nil {
						t.Fatal(err)
					}
					var o oracle
					count, _, lo, hi, sorted := o.exact(a.From, a.To, evs)
					if a.Count != count || a.Min != lo || a.Max != hi {
						t.Fatalf("window %v at %d: count %d min %v max %v, want %d %v %v", w, now, a.Count, a.Min, a.Max, count, lo, hi)
					}
					for i, q := range qs {
						if count == 0 {
							continue
						}
						want := exactQuantile(sorted, q)
						if rel := math.Abs(a.Quantiles[i]-want) / want; rel > tol {
							t.Fatalf("window %v at %d: p%v = %v, exact %v (rel err %.4f > %.4f)", w, now, q*100, a.Quantiles[i], want, rel, tol)
						}
					}
				}
				pts, err := s.ReadRangeAt(now, "latency_ms", "k", time.Minute, 10*time.Second, qs)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range pts {
					var o oracle
					count, _, _, _, sorted := o.exact(p.From, p.To, evs)
					if p.Count != count {
						t.Fatalf("range point [%d, %d): count %d, want %d", p.From, p.To, p.Count, count)
					}
					for i, q := range qs {
						if count == 0 {
							continue
						}
						want := exactQuantile(sorted, q)
						if rel := math.Abs(p.Quantiles[i]-want) / want; rel > tol {
							t.Fatalf("range point [%d, %d): p%v = %v, exact %v", p.From, p.To, q*100, p.Quantiles[i], want)
						}
					}
				}
			}
			// Move on one slot (the sweep does; a read would not): the late events' slots are
			// packed again.
			now := t0 + 8*60_000 + 10_000
			if n := s.Evict(now); n != 0 {
				t.Fatalf("%d series evicted", n)
			}
			if _, err := s.ReadAt(now, "latency_ms", "k", 5*time.Minute, qs); err != nil {
				t.Fatal(err)
			}
			h := s.hash("latency_ms", "k")
			r := &s.shards[h&s.mask].lookup(h, "latency_ms", "k").ring
			var rebuilt sketch.Bins
			packed := 0
			for _, sl := range r.slots {
				if sl.count == 0 {
					continue
				}
				if sl.idx < r.cur {
					if !sl.bins.IsPacked() {
						t.Fatalf("slot %d behind the current %d is not packed", sl.idx, r.cur)
					}
					packed++
				}
				if sl.idx < r.cur || sl.idx == r.cur && r.curInAgg {
					sl.bins.AddTo(&rebuilt)
				}
			}
			got, _ := r.agg.MarshalBinary()
			want, _ := rebuilt.MarshalBinary()
			if !bytes.Equal(got, want) {
				t.Fatal("the kept aggregate differs from one rebuilt from the slots")
			}
			if packed < 25 {
				t.Fatalf("%d packed slots, want the retention's", packed)
			}
		})
	}
}

// denseBytesPerSeries returns the heap bytes per series of n series, each a copy of one of
// 16 rings filled in time order with 30 slots × 1,000 lognormal latencies, kept in a Store.
func denseBytesPerSeries(n int) float64 {
	rng := rand.New(rand.NewPCG(7, 7))
	tmpl := make([]*Ring, 16)
	for i := range tmpl {
		tmpl[i], _ = NewRing(RingConfig{})
		for j := range 30 {
			for k, v := range lognormal(rng, 1000) {
				ts := t0 + int64(j)*10_000 + int64(k)*10
				_ = tmpl[i].Add(ts, ts, v, 1)
			}
		}
	}
	return heapPerItem(n, func(keep []any) {
		s, _ := NewStore(StoreConfig{})
		for i := range keep {
			key := fmt.Sprintf("tenant-%d", i)
			h := s.hash("latency_ms", key)
			s.shards[h&s.mask].series[h] = &series{metric: "latency_ms", key: key, ring: *tmpl[i%len(tmpl)].clone()}
		}
		keep[0] = s
	})
}

// TestDenseSeriesMemoryBudget holds issue #19's dense goal: a latency series of 30 full
// slots × 1,000 values costs at most 0.1× the bytes of 30 sketches-go sketches of the same
// values (both measured here, heap after GC).
func TestDenseSeriesMemoryBudget(t *testing.T) {
	if sz := unsafe.Sizeof(series{}); sz > 320 {
		t.Fatalf("series header and ring: %d bytes, past the 320-byte size class the figures assume", sz)
	}
	ours := denseBytesPerSeries(5_000)
	rng := rand.New(rand.NewPCG(7, 7))
	tmpl := make([]*ddsketch.DDSketch, 30)
	for j := range tmpl {
		tmpl[j], _ = ddsketch.NewDefaultDDSketch(0.01)
		for _, v := range lognormal(rng, 1000) {
			_ = tmpl[j].Add(v)
		}
	}
	anchor := heapPerItem(500, func(keep []any) {
		for i := range keep {
			ss := make([]*ddsketch.DDSketch, 30)
			for j := range ss {
				ss[j] = tmpl[j].Copy()
			}
			keep[i] = ss
		}
	})
	runtime.GC()
	t.Logf("ours %.0f B/series, 30 sketches-go sketches %.0f B: %.3f×", ours, anchor, ours/anchor)
	if ours > 0.1*anchor {
		t.Fatalf("dense series: %.0f B, more than 0.1× the %.0f B of 30 sketches-go sketches", ours, anchor)
	}
	if ours > float64(DenseSeriesBytes(30)) {
		t.Fatalf("dense series: %.0f B, more than the documented DenseSeriesBytes(30) = %d", ours, DenseSeriesBytes(30))
	}
}

// TestSortKeysAsSlicesSort: the prefix-keyed sort orders keys exactly as slices.Sort,
// ties within the 8 bytes, shorter keys and NUL bytes included.
func TestSortKeysAsSlicesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, gen := range []func(int) string{
		func(i int) string { return fmt.Sprintf("tenant-%d", rng.IntN(100_000)) },
		func(i int) string { return fmt.Sprintf("x/%08d/%d", rng.IntN(50), rng.IntN(1000)) },
		func(i int) string {
			b := make([]byte, rng.IntN(12))
			for j := range b {
				b[j] = byte(rng.IntN(3))
			}
			return "p" + string(b)
		},
		func(i int) string { return string(rune('a' + rng.IntN(26))) },
	} {
		keys := make([]string, 5000)
		for i := range keys {
			keys[i] = gen(i)
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		sortKeys(keys)
		if !slices.Equal(keys, want) {
			t.Fatalf("sortKeys differs from slices.Sort: %q…", keys[:5])
		}
	}
}
