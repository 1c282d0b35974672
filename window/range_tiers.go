package window

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// Range reads of a tiered ring (issue #29): the history reaches through the tiers, each
// point from the finest slots that hold its time.
//
// The reach at now is tiled by cells, oldest first: each tier's slots, coarsest tier first,
// then the ring's own slots over its retention. A tier's newest slot ends where the finer
// data begins (it holds only the part of its span that has aged out of them), so the cells
// neither overlap nor leave gaps, and every event a read can reach lies in exactly one.
// A point is the window [e − w, e) with e the end of the current slot and every step
// before it, as for a ring without tiers, rounded to cells: its end down to the nearest
// cell boundary, its start down to the boundary at or before e − w (and at least one cell
// before the end). Its count, sum, min and max are exact over its [From, To); its quantiles
// are those of the union of its cells' bins. Where the cells are coarser than the step,
// several ends round to one boundary, and the point of the newest of them stands for all:
// the points are as far apart as the slots of the tier that holds them. Points go back
// while a whole rounded point lies inside the reach. Within the retention this is exactly
// the history of the ring without tiers.

// rangeCell is one cell of a tiered range read: the span [from, to) in ms.
type rangeCell struct{ from, to int64 }

// tieredCells returns the cells of a ring of config c (defaults filled) at slot cur,
// oldest first.
func tieredCells(c RingConfig, cur int64) []rangeCell {
	w0 := c.Slot.Milliseconds()
	n := int64(c.Slots)
	total := n
	for _, t := range c.Tiers {
		total += int64(t.Slots)
	}
	cells := make([]rangeCell, total)
	i := total - 1
	for j := cur; j > cur-n; j-- {
		cells[i] = rangeCell{j * w0, (j + 1) * w0}
		i--
	}
	b := (cur - n + 1) * w0 // where the finer cells begin
	for _, t := range c.Tiers {
		wt := t.Slot.Milliseconds()
		newest := floorDiv(b-1, wt)
		for k := newest; k > newest-int64(t.Slots); k-- {
			cells[i] = rangeCell{k * wt, min((k+1)*wt, b)}
			i--
		}
		b = (newest - int64(t.Slots) + 1) * wt
	}
	return cells
}

// cellAt is the index of the cell holding ms, or -1 outside the cells.
func cellAt(cells []rangeCell, ms int64) int {
	i := sort.Search(len(cells), func(i int) bool { return cells[i].to > ms })
	if i == len(cells) || cells[i].from > ms {
		return -1
	}
	return i
}

// mergeCells adds every slot r holds, its own and its tiers', into the aggregate of the
// cell holding the slot's start (aggs parallel to cells): the tiered range read's fold of
// one series. Slots outside the cells (newer than the read's slot, or gone at its now) are
// left out. Bins are added into aggs' own unless bins is false.
func (r *Ring) mergeCells(cells []rangeCell, aggs []slotAgg, bins bool) {
	add := func(start int64, count uint64, sum, mn, mx float64, b *sketch.Slot) {
		i := cellAt(cells, start)
		if i < 0 {
			return
		}
		a := &aggs[i]
		a.add(count, sum, mn, mx)
		if bins && b != nil && !b.Empty() {
			if a.bins == nil {
				a.bins = new(sketch.Bins)
			}
			b.AddTo(a.bins)
		}
	}
	v := r.view()
	if v.slots != nil && v.started {
		for i := v.cur - v.n + 1; i <= v.cur+v.size-v.n; i++ {
			if s := &v.slots[v.pos(i)]; s.count > 0 && s.idx == i {
				add(i*v.width, s.count, s.sum, s.min, s.max, &s.bins)
			}
		}
	}
	r.release(v)
	if ts := r.tiers; ts != nil {
		for ti := range ts.t {
			t := &ts.t[ti]
			if t.stats == nil {
				continue
			}
			for k := t.cur - t.n + 1; k <= t.cur; k++ {
				q := t.pos(k)
				if s := &t.stats[q]; s.count > 0 {
					var b *sketch.Slot
					if t.bins != nil {
						b = &t.bins[q]
					}
					add(k*t.width, s.count, s.sum, s.min, s.max, b)
				}
			}
		}
	}
}

// tieredShape checks a tiered range read's window and step against c (defaults filled):
// multiples of the slot width, at most the reach.
func tieredShape(c RingConfig, w, step time.Duration) error {
	if _, err := readSlots(c, w); err != nil {
		return err
	}
	if _, err := readSlots(c, step); err != nil {
		return fmt.Errorf("%w: %v with %s", ErrBadStep, step, c.Spec())
	}
	return nil
}

// composeCells turns the cells' aggregates into the points of a tiered range read, oldest
// first (see the rule above): cur is the read's slot, w and step in ms.
func composeCells(cells []rangeCell, aggs []slotAgg, cur, width, w, step int64, ix sketch.Indexer, qs []float64, series int) []Agg {
	if len(cells) == 0 {
		return nil
	}
	spans := tieredSpans(cells, cur, width, w, step)
	ix = sketch.ReadIndexer(ix)
	out := make([]Agg, 0, len(spans))
	qbuf := make([]float64, 0, len(spans)*len(qs))
	var bins []*sketch.Bins
	for i := len(spans) - 1; i >= 0; i-- {
		lo, hi := spans[i][0], spans[i][1]
		a := Agg{From: cells[lo].from, To: cells[hi-1].to, Series: series}
		bins = bins[:0]
		for c := lo; c < hi; c++ {
			if sa := &aggs[c]; sa.count > 0 {
				a.add(sa.count, sa.sum, sa.min, sa.max)
				if sa.bins != nil {
					bins = append(bins, sa.bins)
				}
			}
		}
		at := len(qbuf)
		qbuf = qbuf[:at+len(qs)]
		a.Quantiles = qbuf[at : at : at+len(qs)]
		if a.Count == 0 || len(bins) == 0 {
			for range qs {
				a.Quantiles = append(a.Quantiles, math.NaN())
			}
		} else {
			a.Quantiles = sketch.QuantilesOf(ix, qs, a.Quantiles, bins...)
			a.clampQuantiles()
		}
		out = append(out, a)
	}
	return out
}

// tieredSpans returns the cell index ranges [lo, hi) of a tiered range read's points,
// newest first (the rule above): cur is the read's slot, w and step in ms. It reads no
// slot, so the size of an answer is known before any series is read.
func tieredSpans(cells []rangeCell, cur, width, w, step int64) [][2]int {
	e0 := (cur + 1) * width
	start := cells[0].from
	// boundary is the cell boundary at or before ms, or -1 before the cells.
	boundary := func(ms int64) int {
		if ms >= cells[len(cells)-1].to {
			return len(cells) // the end of the last cell
		}
		return cellAt(cells, ms)
	}
	var spans [][2]int // cell index ranges [lo, hi) of the points, newest first
	for e := e0; e-w >= start; {
		hi, lo := boundary(e), boundary(e-w) // the point's end and start, rounded down to cells
		if hi <= 0 || lo < 0 {
			break
		}
		if lo >= hi {
			lo = hi - 1 // a window shorter than the cell before its end: that cell
		}
		spans = append(spans, [2]int{lo, hi})
		// The next end that rounds to another boundary is the first before this point's end.
		e -= step * ((e-cells[hi-1].to)/step + 1)
	}
	return spans
}

// readRangeTiered is a tiered range read at slot cur: fold adds every series read into the
// cells' aggregates and returns how many there were (0: ErrNotFound).
func readRangeTiered(rc RingConfig, cur int64, w, step time.Duration, qs []float64, fold func(cells []rangeCell, aggs []slotAgg, bins bool) int) ([]Agg, error) {
	if err := checkQuantiles(qs); err != nil {
		return nil, err
	}
	if err := tieredShape(rc, w, step); err != nil {
		return nil, err
	}
	cells := tieredCells(rc, cur)
	aggs := make([]slotAgg, len(cells))
	n := fold(cells, aggs, len(qs) > 0 && !rc.NoSketch)
	if n == 0 {
		return nil, ErrNotFound
	}
	ix, _ := rc.Sketch.Indexer() // validated by NewStore
	return composeCells(cells, aggs, cur, rc.Slot.Milliseconds(), w.Milliseconds(), step.Milliseconds(), ix, qs, n), nil
}
