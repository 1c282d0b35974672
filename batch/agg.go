package batch

import (
	"fmt"
	"math"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// aggregator turns rows into window values: out[i] is the value of the window ending at row i
// (ignored by the caller for count windows that are not full yet) and, for time windows,
// start[i] and startTS[i] are the index and timestamp of the window's first row.
type aggregator interface {
	feed(vals []float64, ts []int64, out []float64, start, startTS []int64)
}

// twoSum adds x to the compensated pair (s, c); see window.SumWindow.
func twoSum(s, c, x float64) (float64, float64) {
	t := s + x
	z := t - s
	return t, c + ((s - (t - z)) + (x - z))
}

// statOf is the window.Stat an aggregate names (a name withDefaults has made canonical), as a
// job computes it: quantiles 0 and 1 are the exact min and max, as window.Stat.Value answers
// them (a sketch's p100 is a bin's representative, not the max).
func statOf(agg string) window.Stat {
	st, _ := window.ParseStat(agg)
	switch {
	case st.Kind == window.StatQuantile && st.Q == 0:
		return window.Stat{Kind: window.StatMin}
	case st.Kind == window.StatQuantile && st.Q == 1:
		return window.Stat{Kind: window.StatMax}
	}
	return st
}

// aggregator is the window arithmetic of Agg: the one place a job turns a statistic into
// code, for count windows here and time windows in timeAgg.
func (j Job) aggregator() (aggregator, error) {
	st := statOf(j.Agg)
	var ix sketch.Indexer
	if st.Kind == window.StatQuantile {
		var err error
		if ix, err = j.Sketch.Indexer(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if j.Span > 0 {
		return newTimeAgg(st, j.Span.Milliseconds(), ix), nil
	}
	k := j.Size
	switch st.Kind {
	case window.StatSum, window.StatAvg:
		w, err := window.NewSumWindow(k)
		return &countSum{w: w, avg: st.Kind == window.StatAvg}, err
	case window.StatCount:
		return &countCount{k: k}, nil
	case window.StatMax:
		w, err := window.NewMaxWindow(k)
		return &countMax{w}, err
	case window.StatMin:
		w, err := window.NewMinWindow(k)
		return &countMin{w}, err
	case window.StatRate: // Validate refuses it
		return nil, fmt.Errorf("%w: agg %q needs a time window", ErrConfig, j.Agg)
	}
	mx, err := window.NewMaxWindow(k)
	if err != nil {
		return nil, err
	}
	mn, err := window.NewMinWindow(k)
	if err != nil {
		return nil, err
	}
	return &countQuantile{keys: make([]int32, min(k, countRing0)), k: k, rb: newRankBins(ix), q: st.Q, mx: mx, mn: mn}, nil
}

// ---- count windows: the K most recent rows ----

// countRing0 is the first length of a count window's ring of rows (fixedSum, countQuantile; the
// window package's windows start alike): it doubles as the window fills, up to K. --group-by
// makes a window per group and aggregate, and a group of a few rows must not cost K rows
// (--size 1000 over 181k groups took 1.8 GB for sum, 7.8 GB for p95).
const countRing0 = 8

// growRing returns ring doubled (at most k long), its values copied: a count window's ring
// before it is full, when its rows sit at ring[:len(ring)].
func growRing[T any](ring []T, k int) []T {
	r := make([]T, min(2*len(ring), k))
	copy(r, ring)
	return r
}

type countSum struct {
	w   *window.SumWindow
	avg bool
}

func (a *countSum) feed(vals []float64, _ []int64, out []float64, _, _ []int64) {
	out = a.w.PushAll(out[:0], vals)
	if a.avg {
		k := float64(a.w.Size())
		for i := range out {
			out[i] /= k
		}
	}
}

type countCount struct{ n, k int }

func (a *countCount) feed(vals []float64, _ []int64, out []float64, _, _ []int64) {
	for i := range vals {
		a.n = min(a.n+1, a.k)
		out[i] = float64(a.n)
	}
}

type countMax struct{ w *window.MaxWindow }

func (a *countMax) feed(vals []float64, _ []int64, out []float64, _, _ []int64) {
	for i, v := range vals {
		out[i], _ = a.w.Push(v)
	}
}

type countMin struct{ w *window.MinWindow }

func (a *countMin) feed(vals []float64, _ []int64, out []float64, _, _ []int64) {
	for i, v := range vals {
		out[i], _ = a.w.Push(v)
	}
}

// countQuantile keeps the bin keys of the K most recent values in a ring and their counts
// in rankBins: the newcomer is added and the leaver removed, so a step is O(1) plus one
// quantile read (O(bins the quantile moved)). The ring grows from countRing0 keys to K as the
// window fills (n == len(keys) only once full, as in window.SumWindow).
type countQuantile struct {
	keys    []int32
	i, n, k int
	rb      *rankBins
	q       float64
	mx      *window.MaxWindow
	mn      *window.MinWindow
}

func (a *countQuantile) feed(vals []float64, _ []int64, out []float64, _, _ []int64) {
	for i, v := range vals {
		if a.n == len(a.keys) {
			a.rb.add(int(a.keys[a.i]), -1)
		} else if a.n++; a.n == len(a.keys) && a.n < a.k {
			a.keys = growRing(a.keys, a.k) // before the ring is full: nothing has wrapped
		}
		k := a.rb.key(v)
		a.rb.add(k, 1)
		a.keys[a.i] = int32(k)
		if a.i++; a.i == len(a.keys) {
			a.i = 0
		}
		hi, _ := a.mx.Push(v)
		lo, _ := a.mn.Push(v)
		// A sketch answers a bin's representative value: clamp it to the exact range.
		out[i] = min(max(a.rb.quantile(a.q), lo), hi)
	}
}

// ---- time windows: rows with ts in (now − span, now], now = the row's own ts ----

// timeAgg keeps the rows of the current time window in a ring (they are consecutive rows, so
// the ring's head row index is all it needs to name them) and the running aggregate: a
// compensated sum, the count, max/min deques keyed by timestamp, sketch bins for quantiles
// (rankBins, with the rows' bin keys in a ring beside their values).
type timeAgg struct {
	kind    window.StatKind
	span    int64 // ms
	ts      []int64
	vals    []float64
	head, n int   // ring
	headRow int64 // row index of the oldest row in the window
	row     int64 // row index of the next row
	s, c    float64
	mx, mn  window.Deque
	keys    []int32 // quantiles: the rows' bin keys (rankBins.key)
	rb      *rankBins
	q       float64 // the quantile of StatQuantile
}

// timeRing0 is a time window's first ring size (a power of two): grow doubles it as the window
// fills. Small, since --group-by makes one ring per group and aggregate, and a group of a few
// rows must not cost 16 KiB (1024 rows did).
const timeRing0 = 8

func newTimeAgg(st window.Stat, span int64, ix sketch.Indexer) *timeAgg {
	a := &timeAgg{kind: st.Kind, span: span, q: st.Q,
		ts: make([]int64, timeRing0), vals: make([]float64, timeRing0)}
	if a.kind == window.StatQuantile {
		a.rb, a.keys = newRankBins(ix), make([]int32, timeRing0)
	}
	a.mn = *window.NewMinDeque()
	return a
}

func (a *timeAgg) grow() {
	ts, vals := make([]int64, 2*len(a.ts)), make([]float64, 2*len(a.vals))
	var keys []int32
	if a.keys != nil {
		keys = make([]int32, len(ts))
	}
	mask := len(a.ts) - 1
	for i := 0; i < a.n; i++ {
		j := (a.head + i) & mask
		ts[i], vals[i] = a.ts[j], a.vals[j]
		if keys != nil {
			keys[i] = a.keys[j]
		}
	}
	a.ts, a.vals, a.keys, a.head = ts, vals, keys, 0
}

func (a *timeAgg) feed(vals []float64, ts []int64, out []float64, start, startTS []int64) {
	needSum := a.kind == window.StatSum || a.kind == window.StatAvg
	needExt := a.kind == window.StatMax || a.kind == window.StatMin || a.kind == window.StatQuantile
	needBins := a.kind == window.StatQuantile
	spanSec := float64(a.span) / 1000 // rate: the rows of (now − span, now] per second, as window.Agg.RatePerSec
	for i, v := range vals {
		now := ts[i]
		if a.n == len(a.ts) {
			a.grow()
		}
		mask := len(a.ts) - 1
		j := (a.head + a.n) & mask
		a.ts[j], a.vals[j] = now, v
		a.n++
		a.row++
		if needSum {
			a.s, a.c = twoSum(a.s, a.c, v)
		}
		if needBins {
			k := a.rb.key(v)
			a.rb.add(k, 1)
			a.keys[j] = int32(k)
		}
		// Rows at or before now − span have left the window (it is (now − span, now]). Within
		// span of the earliest int64 time, now − span would wrap around to the far future and
		// every row, the new one too, would "leave" forever: there nothing has left yet.
		cut, leaves := now-a.span, now >= math.MinInt64+a.span
		for leaves && a.ts[a.head] <= cut {
			old := a.vals[a.head]
			if needSum {
				a.s, a.c = twoSum(a.s, a.c, -old)
			}
			if needBins {
				a.rb.add(int(a.keys[a.head]), -1)
			}
			a.head = (a.head + 1) & mask
			a.n--
			a.headRow++
		}
		if needExt {
			a.mx.Push(now, v)
			a.mn.Push(now, v)
			if leaves {
				a.mx.Expire(cut)
				a.mn.Expire(cut)
			}
		}
		var w float64
		switch a.kind {
		case window.StatSum:
			w = a.s + a.c
		case window.StatAvg:
			w = (a.s + a.c) / float64(a.n)
		case window.StatCount:
			w = float64(a.n)
		case window.StatRate:
			w = float64(a.n) / spanSec
		case window.StatMax:
			w, _, _ = a.mx.Front()
		case window.StatMin:
			w, _, _ = a.mn.Front()
		default:
			hi, _, _ := a.mx.Front()
			lo, _, _ := a.mn.Front()
			w = min(max(a.rb.quantile(a.q), lo), hi)
		}
		out[i] = w
		start[i] = a.headRow
		startTS[i] = a.ts[a.head]
	}
}

// finite reports whether v is neither NaN nor ±Inf.
func finite(v float64) bool { return math.Abs(v) <= math.MaxFloat64 }
