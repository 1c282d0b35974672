package promapi

import (
	"math"
	"sort"

	"github.com/slide-metrics/slide/window"
)

// An instant pushdown's read of one series: its window's two samples found among the
// series' sample times and read, with the slots between them, straight from the slots
// the store visits (pushdown.go has the rest).

// instantWindow is where an instant query's window (lo, t] falls among a series' points
// (builder.pointsAt): the first point after lo and the last at or before t (a rate when
// they are two or more), and the gaps between them as the engine's rate counts them.
type instantWindow struct {
	any  bool // a point lies in [lo, t]: Select would hand the engine the series
	i, j int
	gaps int
}

// windowOf finds the window (lo, t] among points ts (ascending). The engine's Select hands
// it the samples thinned (see thinned): the first and the last alone when that keeps the
// answer, which makes the rate's average gap one gap.
func windowOf(ts []int64, lo, t int64) instantWindow {
	k := sort.Search(len(ts), func(k int) bool { return ts[k] >= lo })
	w := instantWindow{any: k < len(ts) && ts[k] <= t}
	w.i = sort.Search(len(ts), func(i int) bool { return ts[i] > lo })
	w.j = sort.Search(len(ts), func(j int) bool { return ts[j] > t }) - 1
	w.gaps = w.j - w.i
	if n := w.j - w.i + 1; n >= 3 {
		first, last := ts[w.i], ts[w.j]
		gap := float64(last-first) / float64(n-1)
		if float64(first-lo) <= gap && float64(t-last) <= gap {
			w.gaps = 1
		}
	}
	return w
}

// addInstant adds a series' rate (or increase) over the instant query's window w to group
// gi straight from its slots: the counts of the window's two samples, the buckets of the
// slots between them. It reports false when the slots' sum is NaN (the engine's).
func (rd *pdRead) addInstant(b *builder, gi int, series string, slots []window.SlotView, w instantWindow) bool {
	rate := w.j-w.i >= 1
	from, through := int64(math.MinInt64), int64(math.MinInt64)
	if rate {
		from, through = b.through[w.i], b.through[w.j]
	}
	var cnt, firstCount, lastCount, sum float64
	a, e := len(slots), len(slots) // the slots in (from, through]
	for k := range slots {
		s := &slots[k]
		sum += s.Sum
		if s.Index > from && a == len(slots) {
			firstCount, a = cnt, k
		}
		if s.Index > through && e == len(slots) {
			lastCount, e = cnt, k
		}
		cnt += float64(s.Count)
	}
	if a == len(slots) {
		firstCount = cnt
	}
	if e == len(slots) {
		lastCount = cnt
	}
	if math.IsNaN(sum) {
		return false // NaN observations: see pdSelect
	}
	if !rate {
		return true
	}
	posLo, pw, negLo, nw := b.lookSlots(series, slots)
	dc := lastCount - firstCount
	sh := rd.sh
	factor := extrapolation(b.ts[w.i], b.ts[w.j], rd.t-sh.rng, rd.t, w.gaps, firstCount, dc, sh.isRate, sh.rangeSec)
	d := &rd.delta
	d.load(posLo, pw, negLo, nw)
	var zero float64
	for k := a; k < e; k++ {
		zero += d.add(&b.looks[k].c)
	}
	g := &rd.groups[gi]
	d.addTo(&rd.arena, g, dc, zero, factor)
	if !g.has {
		g.has = true
		rd.touched = append(rd.touched, gi)
	}
	return true
}
