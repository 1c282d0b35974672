package window

// Count windows: the k most recent values of a sequence.
//
// A count window of size k ending at value i covers values i−k+1 … i (0-based, both inclusive).
// It is full once k values are in; before that the types below report the aggregate over the
// values seen so far and say full == false, so a caller that wants the n−k+1 complete windows
// of n values keeps only the results with full == true. The time-window counterpart (covering
// (now − span, now]) is Counter; the batch job in package batch does the same for sums,
// extrema and quantiles over timestamped rows.

import (
	"errors"
	"math"
)

// ErrCountSize is returned by the count-window constructors for a size below 1.
var ErrCountSize = errors.New("window: count window size must be at least 1")

// SumWindow is the sliding sum (and mean) of the k most recent values: each Push adds the
// newcomer and subtracts the value that leaves, so a step costs O(1) whatever k is.
//
// Plain add/subtract drifts over millions of steps (every subtraction leaves the rounding error
// of the matching addition behind). SumWindow keeps the sum as an unevaluated pair s + c where c
// collects the exact rounding error of every operation (Knuth's TwoSum, branch-free), so after
// any number of steps the sum agrees with a fresh sum of the window to a few ulps of the
// largest partial sum, not n·ulps.
//
// Memory follows the values held: the buffer starts at 8 values and doubles as the window fills,
// up to k float64 values once full (so a million windows of size 1000 that each saw one value
// cost 8 values each, not 1000). The zero value is not usable: call NewSumWindow. A SumWindow
// is not safe for concurrent use. Push allocates nothing once the window is full.
type SumWindow struct {
	buf  []float64 // the last k values, oldest at buf[i] once full; shorter until then
	i    int       // next write position
	n    int       // values held, ≤ k; n == len(buf) only once full (the buffer grows first)
	k    int       // window size
	s, c float64   // sum = s + c
}

// countWindow0 is a count window's first buffer size, in values: --group-by makes a window per
// group and aggregate, and a group of a few rows must not pay for k of them.
const countWindow0 = 8

// NewSumWindow returns a sliding sum over the k most recent values.
func NewSumWindow(k int) (*SumWindow, error) {
	if k < 1 {
		return nil, ErrCountSize
	}
	return newSumWindow(k, min(k, countWindow0)), nil
}

// newSumWindow returns a window whose buffer starts at c values (c = k: never grows).
func newSumWindow(k, c int) *SumWindow {
	return &SumWindow{buf: make([]float64, c), k: k}
}

// growCount returns buf doubled (at most k values long), its values copied.
func growCount(buf []float64, k int) []float64 {
	nb := make([]float64, min(2*len(buf), k))
	copy(nb, buf)
	return nb
}

// twoSum adds x to the compensated pair (s, c): the new s is the rounded sum and the exact
// rounding error goes into c. Branch-free, unlike Neumaier's |s| ≥ |x| test.
func twoSum(s, c, x float64) (float64, float64) {
	t := s + x
	z := t - s
	return t, c + ((s - (t - z)) + (x - z))
}

// Push adds v as the newest value, drops the oldest once k are held, and returns the sum of
// the window and whether it is full (k values). A NaN or ±Inf poisons the sum until Reset.
func (w *SumWindow) Push(v float64) (sum float64, full bool) {
	if w.n == len(w.buf) {
		w.s, w.c = twoSum(w.s, w.c, -w.buf[w.i])
	} else if w.n++; w.n == len(w.buf) && w.n < w.k {
		// Not full yet, so nothing wraps: values sit at buf[:n] and i == n−1. Grow before the
		// buffer is full, so that n == len(buf) keeps meaning a full window on the path above.
		w.buf = growCount(w.buf, w.k)
	}
	w.s, w.c = twoSum(w.s, w.c, v)
	w.buf[w.i] = v
	if w.i++; w.i == len(w.buf) {
		w.i = 0
	}
	return w.s + w.c, w.n == len(w.buf)
}

// PushAll pushes every value of vs in order and appends to dst the window sum after each one;
// the first max(0, Size() − Len()) of them (Len before the call) are sums of windows that are not
// full yet. It is Push in a loop with the state kept in registers: the batch job's hot path.
func (w *SumWindow) PushAll(dst, vs []float64) []float64 {
	buf, i, n, s, c := w.buf, w.i, w.n, w.s, w.c
	for _, v := range vs {
		if n == len(buf) {
			s, c = twoSum(s, c, -buf[i])
		} else if n++; n == len(buf) && n < w.k { // as in Push
			buf = growCount(buf, w.k)
		}
		s, c = twoSum(s, c, v)
		buf[i] = v
		if i++; i == len(buf) {
			i = 0
		}
		dst = append(dst, s+c)
	}
	w.buf, w.i, w.n, w.s, w.c = buf, i, n, s, c
	return dst
}

// Sum returns the sum of the values in the window (0 when empty).
func (w *SumWindow) Sum() float64 { return w.s + w.c }

// Avg returns the mean of the values in the window, NaN when it is empty.
func (w *SumWindow) Avg() float64 {
	if w.n == 0 {
		return math.NaN()
	}
	return (w.s + w.c) / float64(w.n)
}

// Len returns how many values the window holds (k once full).
func (w *SumWindow) Len() int { return w.n }

// Size returns k.
func (w *SumWindow) Size() int { return w.k }

// Reset empties the window, keeping its size and memory.
func (w *SumWindow) Reset() { w.i, w.n, w.s, w.c = 0, 0, 0, 0 }

// MaxWindow is the sliding maximum of the k most recent values, in O(1) amortized per Push and
// 2k float64 of memory once full (before that, twice the values held, from 8 up: the first
// block grows by doubling, so a window that saw a few values costs a few).
//
// It uses the van Herk/Gil-Werman block scheme instead of the textbook monotonic deque (see
// Deque): values are cut into blocks of k; the window ending inside block b is the suffix of
// block b−1 plus the prefix of block b, so its maximum is max(suffix max, running prefix max).
// When a block completes, one backward pass turns it into suffix maxima. That is three max
// operations per value with no data-dependent branches, where the deque's pop loop mispredicts
// on real data. The block-completing Push costs O(k); every other Push costs O(1).
//
// A NaN pushed makes every window that contains it NaN. The zero value is not usable: call
// NewMaxWindow. A MaxWindow is not safe for concurrent use. Push allocates nothing once the
// window is full.
type MaxWindow struct{ e extWindow }

// MinWindow is the sliding minimum of the k most recent values; see MaxWindow for the
// algorithm, costs and contract.
type MinWindow struct{ e extWindow }

// NewMaxWindow returns a sliding maximum over the k most recent values.
func NewMaxWindow(k int) (*MaxWindow, error) {
	if k < 1 {
		return nil, ErrCountSize
	}
	w := &MaxWindow{}
	w.e.init(k, min(k, countWindow0), false)
	return w, nil
}

// NewMinWindow returns a sliding minimum over the k most recent values.
func NewMinWindow(k int) (*MinWindow, error) {
	if k < 1 {
		return nil, ErrCountSize
	}
	w := &MinWindow{}
	w.e.init(k, min(k, countWindow0), true)
	return w, nil
}

// Push adds v as the newest value and returns the maximum of the window and whether it is full
// (k values). Before it is full the maximum is over the values pushed so far.
func (w *MaxWindow) Push(v float64) (max float64, full bool) { return w.e.pushMax(v) }

// Push adds v as the newest value and returns the minimum of the window and whether it is full
// (k values). Before it is full the minimum is over the values pushed so far.
func (w *MinWindow) Push(v float64) (min float64, full bool) { return w.e.pushMin(v) }

// Len returns how many values the window holds (k once full).
func (w *MaxWindow) Len() int { return w.e.len() }

// Len returns how many values the window holds (k once full).
func (w *MinWindow) Len() int { return w.e.len() }

// Size returns k.
func (w *MaxWindow) Size() int { return w.e.k }

// Size returns k.
func (w *MinWindow) Size() int { return w.e.k }

// Reset empties the window, keeping its size and memory.
func (w *MaxWindow) Reset() { w.e.reset() }

// Reset empties the window, keeping its size and memory.
func (w *MinWindow) Reset() { w.e.reset() }

// extWindow is the block state shared by MaxWindow and MinWindow.
//
// Until the first block is complete (the window is full) cur and suf may be shorter than k:
// suf holds only the identity then, so the first block can grow by doubling (grow) when it
// fills its cur, in the block-done branch, which a full window takes once every k values.
type extWindow struct {
	cur  []float64 // values of the current block, cur[:j] filled
	suf  []float64 // suffix extrema of the previous block: suf[t] = ext(prev[t:]); ±Inf before one exists
	j    int       // position in the current block
	run  float64   // extremum of cur[:j]
	full bool      // k values seen
	min  bool
	k    int
}

// init makes a window of size k whose first block starts at c values (c = k: never grows).
func (e *extWindow) init(k, c int, min bool) {
	buf := make([]float64, 2*c)
	e.cur, e.suf, e.min, e.k = buf[:c:c], buf[c:], min, k
	e.reset()
}

func (e *extWindow) identity() float64 {
	if e.min {
		return math.Inf(1)
	}
	return math.Inf(-1)
}

func (e *extWindow) reset() {
	// The identity element makes the "no previous block" case branch-free.
	id := e.identity()
	for i := range e.suf {
		e.suf[i] = id
	}
	e.j, e.run, e.full = 0, id, false
}

// grow doubles the first block (at most k), keeping cur[:j] and j, with an identity suf.
func (e *extWindow) grow() {
	c := min(2*len(e.cur), e.k)
	buf := make([]float64, 2*c)
	copy(buf, e.cur[:e.j])
	e.cur, e.suf = buf[:c:c], buf[c:]
	id := e.identity()
	for i := range e.suf {
		e.suf[i] = id
	}
}

func (e *extWindow) len() int {
	if e.full {
		return e.k
	}
	return e.j
}

// pushMax and pushMin are one algorithm written twice on purpose: each has its built-in
// (max, min) inline in its loops (BenchmarkSlidingMax: 1.08× a plain sum loop), where a
// shared version through a function value or a flag would call or branch per value.
func (e *extWindow) pushMax(v float64) (float64, bool) {
	k := len(e.cur)
	e.cur[e.j] = v
	e.run = max(e.run, v)
	m := e.run
	if e.j+1 < k {
		// The window ending here is prev[j+1:] followed by cur[:j+1].
		m = max(e.suf[e.j+1], m)
	}
	if e.j++; e.j == k {
		if k < e.k { // the first block is not full: give it room (rare, predictable)
			e.grow()
			return m, false
		}
		// Block done: turn it into suffix maxima in place; it becomes the previous block.
		s := e.cur[k-1]
		for t := k - 2; t >= 0; t-- {
			s = max(s, e.cur[t])
			e.cur[t] = s
		}
		e.cur, e.suf = e.suf, e.cur
		e.j, e.run, e.full = 0, math.Inf(-1), true
	}
	return m, e.full
}

func (e *extWindow) pushMin(v float64) (float64, bool) {
	k := len(e.cur)
	e.cur[e.j] = v
	e.run = min(e.run, v)
	m := e.run
	if e.j+1 < k {
		m = min(e.suf[e.j+1], m)
	}
	if e.j++; e.j == k {
		if k < e.k {
			e.grow()
			return m, false
		}
		s := e.cur[k-1]
		for t := k - 2; t >= 0; t-- {
			s = min(s, e.cur[t])
			e.cur[t] = s
		}
		e.cur, e.suf = e.suf, e.cur
		e.j, e.run, e.full = 0, math.Inf(1), true
	}
	return m, e.full
}

// SlidingMax appends to dst[:0] the maximum of every window of k consecutive values of xs,
// len(xs)−k+1 values in order (window i covers xs[i : i+k]), and returns it. It returns dst[:0]
// when k < 1 or k > len(xs). dst must not overlap xs.
//
// It runs the van Herk/Gil-Werman block algorithm in one fused pass per block: while the
// running prefix maximum of block b+1 combines with the suffix maxima of block b into the
// outputs, the suffix maxima of block b+1 are built backwards in the same loop (two independent
// dependency chains, so the CPU overlaps them). The suffix maxima are stored in the output
// itself, so the only memory is the result; it reuses dst when cap(dst) ≥ len(xs) and then
// allocates nothing. About 3 max operations per value, no data-dependent branches.
func SlidingMax(dst, xs []float64, k int) []float64 {
	return sliding(dst, xs, k, false)
}

// SlidingMin is SlidingMax for minima.
func SlidingMin(dst, xs []float64, k int) []float64 {
	return sliding(dst, xs, k, true)
}

func sliding(dst, xs []float64, k int, isMin bool) []float64 {
	n := len(xs)
	if k < 1 || k > n {
		return dst[:0]
	}
	m := n - k + 1
	// The suffix maxima of the last full block may sit past m: keep len(xs) of room.
	out := dst[:0]
	if cap(out) < n {
		out = make([]float64, n)
	} else {
		out = out[:n]
	}
	if k == 1 {
		copy(out, xs)
		return out[:m]
	}
	if isMin {
		slideMin(out, xs, k)
	} else {
		slideMax(out, xs, k)
	}
	return out[:m]
}

// slideMax fills out[:len(xs)−k+1] with window maxima; len(out) == len(xs), k ≥ 2.
func slideMax(out, xs []float64, k int) {
	n := len(xs)
	// Suffix maxima of block 0 go where the windows starting in block 0 are written.
	s := xs[k-1]
	out[k-1] = s
	for t := k - 2; t >= 0; t-- {
		s = max(s, xs[t])
		out[t] = s
	}
	b := 0 // start of the current block; out[b:b+k] holds its suffix maxima
	for ; b+2*k <= n; b += k {
		next := xs[b+k : b+2*k]
		cur := out[b+1 : b+k]    // windows b+1 … b+k−1: suffix part, combined in place
		nsuf := out[b+k : b+2*k] // suffix maxima of the next block, built backwards
		run, suf := math.Inf(-1), math.Inf(-1)
		for j := range cur {
			run = max(run, next[j])
			cur[j] = max(cur[j], run)
			r := k - 1 - j
			suf = max(suf, next[r])
			nsuf[r] = suf
		}
		nsuf[0] = max(suf, next[0])
	}
	// Last, partial next block of L < k values: windows b … b+L.
	tail := xs[b+k:]
	run := math.Inf(-1)
	for j, x := range tail {
		run = max(run, x)
		out[b+1+j] = max(out[b+1+j], run)
	}
}

// slideMin is slideMax with min.
func slideMin(out, xs []float64, k int) {
	n := len(xs)
	s := xs[k-1]
	out[k-1] = s
	for t := k - 2; t >= 0; t-- {
		s = min(s, xs[t])
		out[t] = s
	}
	b := 0
	for ; b+2*k <= n; b += k {
		next := xs[b+k : b+2*k]
		cur := out[b+1 : b+k]
		nsuf := out[b+k : b+2*k]
		run, suf := math.Inf(1), math.Inf(1)
		for j := range cur {
			run = min(run, next[j])
			cur[j] = min(cur[j], run)
			r := k - 1 - j
			suf = min(suf, next[r])
			nsuf[r] = suf
		}
		nsuf[0] = min(suf, next[0])
	}
	tail := xs[b+k:]
	run := math.Inf(1)
	for j, x := range tail {
		run = min(run, x)
		out[b+1+j] = min(out[b+1+j], run)
	}
}

// MaxSumNaive is the article's O(n·k) reference: the best (largest) sum of k consecutive
// values, recomputing every window from scratch, and the number of additions it made,
// (n−k+1)·k. It returns (−Inf, 0) when there is no window (k < 1 or k > len(xs)). Use it as an
// oracle in tests; MaxSumK gives the same best in n additions.
func MaxSumNaive(xs []float64, k int) (best float64, ops int) {
	best = math.Inf(-1)
	if k < 1 {
		return best, 0
	}
	for i := 0; i+k <= len(xs); i++ {
		s := 0.0
		for _, x := range xs[i : i+k] {
			s += x
			ops++
		}
		best = max(best, s)
	}
	return best, ops
}

// MaxSumK is the article's O(n) sliding sum: the best (largest) sum of k consecutive values and
// the number of window updates it made, one per value (n). It returns (−Inf, 0) when there is
// no window (k < 1 or k > len(xs)). It runs on SumWindow, so long inputs do not drift.
func MaxSumK(xs []float64, k int) (best float64, ops int) {
	best = math.Inf(-1)
	if k < 1 || k > len(xs) {
		return best, 0
	}
	w := newSumWindow(k, k) // k ≤ len(xs): it fills, so no growing
	for _, x := range xs {
		s, full := w.Push(x)
		ops++
		if full {
			best = max(best, s)
		}
	}
	return best, ops
}
