package window

import (
	"sync"

	"github.com/slide-metrics/slide/sketch"
)

// The sparse form of a ring (issue #19): up to RawEvents raw events instead of slots, and
// the reads that fold them as a dense ring would.

// rawEvent is one event of a sparse ring: its slot index, value and count.
type rawEvent struct {
	idx int64
	v   float64
	n   uint64
}

// RawEvents is how many events a ring keeps as raw events before it allocates its slots and
// bins (a sparse series costs 24 bytes per event instead of a ring of slots). A ring whose
// slots all empty returns to raw events.
const RawEvents = 16

// upgrade allocates the slots of a sparse ring and replays its raw events into them, in
// arrival order, so every sum is the one a dense ring would have accumulated.
func (r *Ring) upgrade() {
	r.slots = make([]slot, r.size)
	for _, e := range r.raw {
		r.insert(e.idx, r.pos(e.idx), e.v, e.n)
	}
	r.raw = nil
}

// ringPool holds the scratch rings that reads of sparse rings materialize.
var ringPool sync.Pool

// view returns a ring with slots holding what r holds: r itself when it is dense, else a
// scratch ring materialized from r's raw events, which the caller hands back with release.
// Reads go through view so that a sparse ring answers bit for bit what a dense one would.
func (r *Ring) view() *Ring {
	if r.slots != nil {
		return r
	}
	t, _ := ringPool.Get().(*Ring)
	if t == nil {
		t = new(Ring)
	}
	slots := t.slots
	*t = *r
	t.raw = nil
	t.agg = sketch.Bins{}
	t.live = 0
	if int64(cap(slots)) >= r.size {
		slots = slots[:r.size]
		clear(slots)
	} else {
		slots = make([]slot, r.size)
	}
	t.slots = slots
	for _, e := range r.raw {
		t.insert(e.idx, t.pos(e.idx), e.v, e.n)
	}
	return t
}

// release returns a ring view gave, unless it is r itself.
func (r *Ring) release(t *Ring) {
	if t != r {
		ringPool.Put(t)
	}
}

// pruneRaw drops the raw events older than the retention at cur.
func (r *Ring) pruneRaw() {
	keep := r.raw[:0]
	for _, e := range r.raw {
		if e.idx > r.cur-r.n {
			keep = append(keep, e)
		} else if r.tiered() {
			r.retireRaw(e)
		}
	}
	clear(r.raw[len(keep):])
	if len(keep) == 0 {
		keep = nil // release the events' array
	}
	r.raw = keep
}

// scratchBins holds the Bins that reads of sparse rings fill and clear.
var scratchBins = sync.Pool{New: func() any { return new(sketch.Bins) }}

// readRaw is read of a sparse ring: its raw events in the window of k slots up to cur go
// into one scratch Bins, which has the counts of the slots' union, so the quantiles are a
// dense ring's.
func (r *Ring) readRaw(cur, k int64, qs []float64) Agg {
	var a Agg
	a.From, a.To = r.span(cur, k)
	a.Series = 1
	a.Quantiles = make([]float64, len(qs))
	b := scratchBins.Get().(*sketch.Bins)
	r.foldRaw(&a, cur, k, b)
	a.readQuantiles(b, r.ix, qs)
	b.Clear()
	scratchBins.Put(b)
	return a
}

// foldRaw is fold of a sparse ring's k slots up to cur, adding their events into bins (nil:
// none). Sums are accumulated slot by slot in slot order, each slot's in arrival order, as
// fold of a dense ring does, so the answers agree to the bit.
func (r *Ring) foldRaw(a *Agg, cur, k int64, bins *sketch.Bins) {
	var buf [RawEvents]rawEvent
	evs := buf[:0]
	for _, e := range r.raw {
		if e.idx > cur-k && e.idx <= cur {
			// Insertion sort by slot, stable: arrival order within a slot.
			j := len(evs)
			evs = append(evs, e)
			for ; j > 0 && evs[j-1].idx > e.idx; j-- {
				evs[j] = evs[j-1]
			}
			evs[j] = e
		}
	}
	for i := 0; i < len(evs); {
		e := evs[i]
		count, sum, mn, mx := e.n, e.v*float64(e.n), e.v, e.v
		if bins != nil {
			bins.Add(r.ix, e.v, e.n)
		}
		for i++; i < len(evs) && evs[i].idx == e.idx; i++ {
			f := evs[i]
			count += f.n
			sum += f.v * float64(f.n)
			mn, mx = min(mn, f.v), max(mx, f.v)
			if bins != nil {
				bins.Add(r.ix, f.v, f.n)
			}
		}
		a.add(count, sum, mn, mx)
	}
}
