package window

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// articleOrders is the article's 100,000 generated orders: ((i·7919) mod 1000) + 1.
func articleOrders(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64((i*7919)%1000 + 1)
	}
	return xs
}

// jsObject prints {best, ops} the way console.log does in the article.
func jsObject(best float64, ops int) string {
	return fmt.Sprintf("{ best: %v, ops: %d }", best, ops)
}

// jsArray prints a number array the way console.log does in the article.
func jsArray(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[ " + strings.Join(parts, ", ") + " ]"
}

func TestArticleMaxSum(t *testing.T) {
	orders := articleOrders(100_000)
	nb, nops := MaxSumNaive(orders, 1_000)
	kb, kops := MaxSumK(orders, 1_000)
	got := jsObject(nb, nops) + " " + jsObject(kb, kops)
	const want = "{ best: 500500, ops: 99001000 } { best: 500500, ops: 100000 }"
	if got != want {
		t.Fatalf("article line:\n got %s\nwant %s", got, want)
	}
}

// windowMaxArticle is the article's windowMax, ported line for line onto Deque.
func windowMaxArticle(xs []float64, k int) []float64 {
	var dq Deque
	var out []float64
	for i, x := range xs {
		dq.Push(int64(i), x)    // smaller ones can never be max again
		dq.Expire(int64(i - k)) // front fell out of the window
		if i >= k-1 {
			v, _, _ := dq.Front()
			out = append(out, v)
		}
	}
	return out
}

func TestArticleWindowMax(t *testing.T) {
	latency := []float64{120, 80, 300, 90, 95, 40, 500, 60}
	const want = "[ 300, 300, 300, 95, 500, 500 ]"
	wantXs := []float64{300, 300, 300, 95, 500, 500}

	var streamed []float64
	w, err := NewMaxWindow(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range latency {
		if m, full := w.Push(x); full {
			streamed = append(streamed, m)
		}
	}
	for name, got := range map[string][]float64{
		"deque (article port)": windowMaxArticle(latency, 3),
		"SlidingMax":           SlidingMax(nil, latency, 3),
		"MaxWindow":            streamed,
	} {
		if s := jsArray(got); s != want {
			t.Errorf("%s prints %s, want %s", name, s, want)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantXs) {
			t.Errorf("%s = %v, want %v", name, got, wantXs)
		}
	}
}

func TestCountSizeErrors(t *testing.T) {
	if _, err := NewSumWindow(0); !errors.Is(err, ErrCountSize) {
		t.Errorf("NewSumWindow(0) err = %v", err)
	}
	if _, err := NewMaxWindow(-1); !errors.Is(err, ErrCountSize) {
		t.Errorf("NewMaxWindow(-1) err = %v", err)
	}
	if _, err := NewMinWindow(0); !errors.Is(err, ErrCountSize) {
		t.Errorf("NewMinWindow(0) err = %v", err)
	}
	if got := SlidingMax(nil, []float64{1, 2}, 3); len(got) != 0 {
		t.Errorf("SlidingMax with k > n = %v, want empty", got)
	}
	if got := SlidingMin(nil, []float64{1, 2}, 0); len(got) != 0 {
		t.Errorf("SlidingMin with k = 0 = %v, want empty", got)
	}
	if b, ops := MaxSumK([]float64{1}, 2); !math.IsInf(b, -1) || ops != 0 {
		t.Errorf("MaxSumK with k > n = %v, %d", b, ops)
	}
	if b, ops := MaxSumNaive([]float64{1}, 2); !math.IsInf(b, -1) || ops != 0 {
		t.Errorf("MaxSumNaive with k > n = %v, %d", b, ops)
	}
}

// naiveExt is the O(n·k) oracle for sliding extrema.
func naiveExt(xs []float64, k int, isMin bool) []float64 {
	var out []float64
	for i := 0; i+k <= len(xs); i++ {
		m := xs[i]
		for _, x := range xs[i+1 : i+k] {
			if isMin {
				m = min(m, x)
			} else {
				m = max(m, x)
			}
		}
		out = append(out, m)
	}
	return out
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSlidingExtremaMatchNaive checks every implementation (block array, block stream, deque)
// against the naive scan over lengths and window sizes that hit every block boundary case.
func TestSlidingExtremaMatchNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 8, 9, 16, 31, 64, 100, 257} {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(rng.IntN(50)) // small range: plenty of ties
		}
		for k := 1; k <= n+1; k++ {
			for _, isMin := range []bool{false, true} {
				want := naiveExt(xs, k, isMin)
				var arr []float64
				if isMin {
					arr = SlidingMin(nil, xs, k)
				} else {
					arr = SlidingMax(nil, xs, k)
				}
				if !equalFloats(arr, want) {
					t.Fatalf("n=%d k=%d min=%v: array %v, want %v", n, k, isMin, arr, want)
				}
				if k > n {
					continue
				}
				var stream []float64
				var dq *Deque
				var push func(float64) (float64, bool)
				if isMin {
					w, _ := NewMinWindow(k)
					push, dq = w.Push, NewMinDeque()
				} else {
					w, _ := NewMaxWindow(k)
					push, dq = w.Push, NewMaxDeque()
				}
				var deq []float64
				for i, x := range xs {
					m, full := push(x)
					if full != (i >= k-1) {
						t.Fatalf("n=%d k=%d: full=%v at i=%d", n, k, full, i)
					}
					if !full && m != naiveExt(xs[:i+1], i+1, isMin)[0] {
						t.Fatalf("n=%d k=%d: partial window at i=%d = %v", n, k, i, m)
					}
					if full {
						stream = append(stream, m)
					}
					dq.Push(int64(i), x)
					dq.Expire(int64(i - k))
					if i >= k-1 {
						v, pos, ok := dq.Front()
						if !ok || xs[pos] != v || int(pos) <= i-k {
							t.Fatalf("deque front (%v, %d, %v) at i=%d k=%d", v, pos, ok, i, k)
						}
						deq = append(deq, v)
					}
				}
				if !equalFloats(stream, want) {
					t.Fatalf("n=%d k=%d min=%v: stream %v, want %v", n, k, isMin, stream, want)
				}
				if !equalFloats(deq, want) {
					t.Fatalf("n=%d k=%d min=%v: deque %v, want %v", n, k, isMin, deq, want)
				}
			}
		}
	}
}

func TestSlidingMaxReusesDst(t *testing.T) {
	xs := articleOrders(5000)
	dst := make([]float64, 0, len(xs))
	got := SlidingMax(dst, xs, 100)
	if &got[0] != &dst[:1][0] {
		t.Fatal("SlidingMax did not reuse a dst with enough capacity")
	}
	if !equalFloats(got, naiveExt(xs, 100, false)) {
		t.Fatal("SlidingMax with reused dst differs from naive")
	}
	allocs := testing.AllocsPerRun(20, func() { dst = SlidingMax(dst, xs, 100) })
	if allocs != 0 {
		t.Fatalf("SlidingMax with a big enough dst: %v allocs, want 0", allocs)
	}
}

func TestMaxWindowResetAndNaN(t *testing.T) {
	w, _ := NewMaxWindow(2)
	w.Push(math.NaN())
	if m, _ := w.Push(1); !math.IsNaN(m) {
		t.Errorf("window holding NaN = %v, want NaN", m)
	}
	if m, _ := w.Push(3); m != 3 {
		t.Errorf("after NaN left: %v, want 3", m)
	}
	w.Reset()
	if w.Len() != 0 || w.Size() != 2 {
		t.Fatalf("after Reset Len=%d Size=%d", w.Len(), w.Size())
	}
	if m, full := w.Push(-5); m != -5 || full {
		t.Errorf("first push after Reset = %v, %v", m, full)
	}
	mn, _ := NewMinWindow(3)
	for _, x := range []float64{4, 2, 8} {
		mn.Push(x)
	}
	if m, _ := mn.Push(9); m != 2 || mn.Len() != 3 {
		t.Errorf("min of [2 8 9] = %v (len %d)", m, mn.Len())
	}
}

func TestSumWindow(t *testing.T) {
	w, err := NewSumWindow(3)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(w.Avg()) {
		t.Errorf("empty Avg = %v, want NaN", w.Avg())
	}
	steps := []struct {
		v, sum float64
		full   bool
	}{{1, 1, false}, {2, 3, false}, {3, 6, true}, {4, 9, true}, {-10, -3, true}}
	for _, s := range steps {
		sum, full := w.Push(s.v)
		if sum != s.sum || full != s.full {
			t.Fatalf("Push(%v) = %v, %v; want %v, %v", s.v, sum, full, s.sum, s.full)
		}
	}
	if w.Avg() != -1 || w.Len() != 3 || w.Size() != 3 || w.Sum() != -3 {
		t.Errorf("Avg=%v Len=%d Size=%d Sum=%v", w.Avg(), w.Len(), w.Size(), w.Sum())
	}
	w.Reset()
	if sum, full := w.Push(7); sum != 7 || full {
		t.Errorf("after Reset Push(7) = %v, %v", sum, full)
	}
	// PushAll is Push in a loop.
	a, _ := NewSumWindow(4)
	b, _ := NewSumWindow(4)
	xs := articleOrders(50)
	got := a.PushAll(nil, xs[:3])
	got = a.PushAll(got, xs[3:])
	for i, x := range xs {
		if s, _ := b.Push(x); s != got[i] {
			t.Fatalf("PushAll[%d] = %v, Push = %v", i, got[i], s)
		}
	}
	if a.Sum() != b.Sum() || a.Len() != b.Len() {
		t.Fatalf("after PushAll: sum %v len %d, Push: %v %d", a.Sum(), a.Len(), b.Sum(), b.Len())
	}
}

// TestSumWindowNoDrift runs a million steps of values that cancel badly in plain float64
// (large and tiny magnitudes, decimals that are not binary fractions) and checks the sliding sum
// against a fresh exact-as-possible sum of the window. The 10M-step version is
// BenchmarkSumWindowDrift.
func TestSumWindowNoDrift(t *testing.T) {
	const steps, k = 1_000_000, 1000
	relErr, naiveErr := sumDrift(steps, k)
	if relErr > 1e-12 {
		t.Fatalf("after %d steps the sliding sum is off by %.3g relative (naive add/sub: %.3g)", steps, relErr, naiveErr)
	}
	// The data must be hard enough that the naive way fails, or the check above proves nothing.
	if naiveErr < 1e-9 {
		t.Fatalf("plain add/sub drifted only %.3g: the test data no longer exercises drift", naiveErr)
	}
}

// sumDrift returns the relative error of SumWindow and of a plain add/sub sum after steps
// pushes, each compared with a compensated fresh sum of the final window.
func sumDrift(steps, k int) (ours, naive float64) {
	rng := rand.New(rand.NewPCG(42, 7))
	w, _ := NewSumWindow(k)
	ring := make([]float64, k)
	plain := 0.0
	for i := 0; i < steps; i++ {
		v := float64(rng.IntN(1_000_000)) / 100 // cents
		if i%97 == 0 && i < steps-k {
			v *= 1e9 // occasional huge value; all have left the final window
		}
		if i >= k {
			plain -= ring[i%k]
		}
		ring[i%k] = v
		plain += v
		w.Push(v)
	}
	var s, c float64
	for _, x := range ring {
		s, c = twoSum(s, c, x)
	}
	fresh := s + c
	return math.Abs(w.Sum()-fresh) / math.Abs(fresh), math.Abs(plain-fresh) / math.Abs(fresh)
}

func TestCountWindowsAllocateNothing(t *testing.T) {
	sw, _ := NewSumWindow(64)
	mx, _ := NewMaxWindow(64)
	mn, _ := NewMinWindow(64)
	for i := range 64 { // a window's buffer grows until it is full
		sw.Push(float64(i))
		mx.Push(float64(i))
		mn.Push(float64(i))
	}
	var dq Deque
	for i := 0; i < 1000; i++ { // let the deque ring reach its size
		dq.Push(int64(i), float64(-i))
		dq.Expire(int64(i - 64))
	}
	i := 1000
	allocs := testing.AllocsPerRun(1000, func() {
		v := float64(i%101) * 1.5
		sw.Push(v)
		mx.Push(v)
		mn.Push(v)
		dq.Push(int64(i), float64(-i))
		dq.Expire(int64(i - 64))
		i++
	})
	if allocs != 0 {
		t.Fatalf("Push: %v allocs per step, want 0", allocs)
	}
}

// A count window's memory follows the values it holds: --group-by makes one per group and
// aggregate, and slide batch --size 1000 over 181k groups of a few rows each took 1.8 GB for
// sum, 4 GB for max and 7.8 GB for p95 while every window held k values from the start.
func TestCountWindowsGrowWithValues(t *testing.T) {
	const n, k = 2000, 1000
	sws := make([]*SumWindow, n)
	mxs := make([]*MaxWindow, n)
	mns := make([]*MinWindow, n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		sws[i], _ = NewSumWindow(k)
		mxs[i], _ = NewMaxWindow(k)
		mns[i], _ = NewMinWindow(k)
		sws[i].Push(1)
		mxs[i].Push(1)
		mns[i].Push(1)
	}
	runtime.ReadMemStats(&after)
	// The three structs (about 180 bytes) and their first buffers (8 and 2×8 values).
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 1<<10 {
		t.Errorf("a sum, max and min window of size %d holding one value: %d bytes, want at most 1 KiB", k, per)
	}
	for i := range n { // and they still work
		if s, full := sws[i].Push(2); s != 3 || full || sws[i].Size() != k {
			t.Fatalf("SumWindow after 2 pushes: %v, %v, size %d", s, full, sws[i].Size())
		}
		if m, _ := mxs[i].Push(2); m != 2 || mxs[i].Len() != 2 || mxs[i].Size() != k {
			t.Fatalf("MaxWindow after 2 pushes: %v, len %d, size %d", m, mxs[i].Len(), mxs[i].Size())
		}
		if m, _ := mns[i].Push(2); m != 1 || mns[i].Size() != k {
			t.Fatalf("MinWindow after 2 pushes: %v, size %d", m, mns[i].Size())
		}
	}
}

// A window that grows answers every Push exactly as one allocated at k from the start, across
// every doubling and past the full boundary, and after a Reset mid-way (which keeps the grown
// buffer) too. Values include NaN, ±Inf and magnitudes that cancel, so the compensated sum's
// bits are compared, not just rounded values.
func TestCountWindowsGrowSameAsFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	value := func() float64 {
		switch r := rng.IntN(200); {
		case r == 0:
			return math.NaN()
		case r == 1:
			return math.Inf(1 - 2*rng.IntN(2))
		case r < 20:
			return rng.NormFloat64() * 1e15
		case r < 40:
			return float64(rng.IntN(5)) // ties
		}
		return float64(rng.IntN(1_000_000)) / 100
	}
	same := func(a, b float64) bool { return a == b || a != a && b != b }
	for _, k := range []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 257, 1000} {
		for _, finite := range []bool{true, false} {
			g, _ := NewSumWindow(k)
			f := newSumWindow(k, k)
			gp, _ := NewSumWindow(k) // PushAll in runs of random length
			fp := newSumWindow(k, k)
			gmx, _ := NewMaxWindow(k)
			fmx := &MaxWindow{}
			fmx.e.init(k, k, false)
			gmn, _ := NewMinWindow(k)
			fmn := &MinWindow{}
			fmn.e.init(k, k, true)
			steps := 3*k + 20
			resetAt := k/2 + 3
			var xs []float64
			for step := range steps {
				if step == resetAt {
					for _, r := range []interface{ Reset() }{g, f, gmx, fmx, gmn, fmn} {
						r.Reset()
					}
				}
				v := value()
				if finite && !(math.Abs(v) <= math.MaxFloat64) {
					v = 1.25
				}
				xs = append(xs, v)
				gs, gfull := g.Push(v)
				fs, ffull := f.Push(v)
				if !same(gs, fs) || gfull != ffull || g.Len() != f.Len() || g.Size() != k || !same(g.Avg(), f.Avg()) {
					t.Fatalf("k %d step %d: SumWindow growing %v %v (len %d), full-size %v %v (len %d)", k, step, gs, gfull, g.Len(), fs, ffull, f.Len())
				}
				gm, gfull := gmx.Push(v)
				fm, ffull := fmx.Push(v)
				if !same(gm, fm) || gfull != ffull || gmx.Len() != fmx.Len() || gmx.Size() != k {
					t.Fatalf("k %d step %d: MaxWindow growing %v %v (len %d), full-size %v %v (len %d)", k, step, gm, gfull, gmx.Len(), fm, ffull, fmx.Len())
				}
				gm, gfull = gmn.Push(v)
				fm, ffull = fmn.Push(v)
				if !same(gm, fm) || gfull != ffull || gmn.Len() != fmn.Len() || gmn.Size() != k {
					t.Fatalf("k %d step %d: MinWindow growing %v %v (len %d), full-size %v %v (len %d)", k, step, gm, gfull, gmn.Len(), fm, ffull, fmn.Len())
				}
			}
			var got, want []float64
			for len(xs) > 0 {
				m := min(len(xs), 1+rng.IntN(2*k))
				got, want = gp.PushAll(got, xs[:m]), fp.PushAll(want, xs[:m])
				xs = xs[m:]
			}
			for i := range want {
				if !same(got[i], want[i]) {
					t.Fatalf("k %d: PushAll[%d] growing %v, full-size %v", k, i, got[i], want[i])
				}
			}
			if gp.Len() != fp.Len() || !same(gp.Sum(), fp.Sum()) {
				t.Fatalf("k %d: after PushAll growing len %d sum %v, full-size %d %v", k, gp.Len(), gp.Sum(), fp.Len(), fp.Sum())
			}
		}
	}
}
