package window

import (
	"math/rand/v2"
	"sync"
	"testing"
)

const (
	benchN = 10_000_000 // values in the in-memory array
	benchK = 1000       // window size
	// naiveN is the array length for the O(n·k) scan: 10M × 1000 would take a minute, so
	// /naive runs on a prefix and reports the same per-element metric (ns/elem) to compare.
	naiveN = 200_000
)

var (
	benchOnce sync.Once
	benchXs   []float64
)

// benchValues returns 10M pseudo-random latencies (ms, log-normal-ish), generated once.
func benchValues() []float64 {
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(2024, 11))
		benchXs = make([]float64, benchN)
		for i := range benchXs {
			benchXs[i] = float64(20+rng.IntN(80)) * (1 + rng.ExpFloat64())
		}
	})
	return benchXs
}

var sinkF float64

// BenchmarkSlidingMax: sliding max over 10M in-memory values with k = 1000.
//
//	ours   SlidingMax, the fused van Herk/Gil-Werman block pass
//	anchor a plain sum loop over the same values (the floor for one pass over the data)
//	deque  the textbook monotonic deque (Deque) over the same values
//	naive  the O(n·k) rescan of every window, on the first 200,000 values only
//
// Compare by ns/elem (reported by each): ns/op of /naive covers a shorter array.
func BenchmarkSlidingMax(b *testing.B) {
	xs := benchValues()
	perElem := func(b *testing.B, n int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
	}
	b.Run("ours", func(b *testing.B) {
		dst := make([]float64, 0, len(xs))
		b.ReportAllocs()
		b.SetBytes(int64(8 * len(xs)))
		for b.Loop() {
			dst = SlidingMax(dst, xs, benchK)
		}
		sinkF = dst[len(dst)-1]
		perElem(b, len(xs))
	})
	b.Run("anchor", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(8 * len(xs)))
		for b.Loop() {
			s := 0.0
			for _, x := range xs {
				s += x
			}
			sinkF = s
		}
		perElem(b, len(xs))
	})
	b.Run("deque", func(b *testing.B) {
		dst := make([]float64, 0, len(xs))
		var dq Deque
		b.ReportAllocs()
		b.SetBytes(int64(8 * len(xs)))
		for b.Loop() {
			dst = dst[:0]
			dq.Reset()
			for i, x := range xs {
				dq.Push(int64(i), x)
				dq.Expire(int64(i - benchK))
				if i >= benchK-1 {
					v, _, _ := dq.Front()
					dst = append(dst, v)
				}
			}
		}
		sinkF = dst[len(dst)-1]
		perElem(b, len(xs))
	})
	b.Run("naive", func(b *testing.B) {
		small := xs[:naiveN]
		dst := make([]float64, 0, naiveN)
		b.ReportAllocs()
		b.SetBytes(int64(8 * len(small)))
		for b.Loop() {
			dst = dst[:0]
			for i := 0; i+benchK <= len(small); i++ {
				m := small[i]
				for _, x := range small[i+1 : i+benchK] {
					m = max(m, x)
				}
				dst = append(dst, m)
			}
		}
		sinkF = dst[len(dst)-1]
		perElem(b, len(small))
	})
}

// BenchmarkMaxWindow: the streaming MaxWindow (block scheme, 2k buffer) against the textbook
// deque, one Push per value over the same 10M values.
func BenchmarkMaxWindow(b *testing.B) {
	xs := benchValues()
	b.Run("ours", func(b *testing.B) {
		w, _ := NewMaxWindow(benchK)
		b.ReportAllocs()
		b.SetBytes(int64(8 * len(xs)))
		for b.Loop() {
			w.Reset()
			s := 0.0
			for _, x := range xs {
				m, _ := w.Push(x)
				s += m
			}
			sinkF = s
		}
	})
	b.Run("anchor", func(b *testing.B) {
		var dq Deque
		b.ReportAllocs()
		b.SetBytes(int64(8 * len(xs)))
		for b.Loop() {
			dq.Reset()
			s := 0.0
			for i, x := range xs {
				dq.Push(int64(i), x)
				dq.Expire(int64(i - benchK))
				v, _, _ := dq.Front()
				s += v
			}
			sinkF = s
		}
	})
}

// BenchmarkSumWindowDrift pushes 10M cents values (with huge values that later leave) through
// SumWindow and fails unless the sliding sum equals a fresh sum of the final window within
// 1e-9 relative. It reports the relative error it measured.
func BenchmarkSumWindowDrift(b *testing.B) {
	var rel, naive float64
	for b.Loop() {
		rel, naive = sumDrift(10_000_000, benchK)
	}
	if rel > 1e-9 {
		b.Fatalf("after 10M steps the sliding sum is off by %.3g relative", rel)
	}
	b.ReportMetric(rel, "rel-err")
	b.ReportMetric(naive, "naive-rel-err")
}
