package window

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// ErrBadStep is returned by range reads for a step that is not a positive multiple of the
// slot width, at most the retention.
var ErrBadStep = fmt.Errorf("%w (step)", ErrBadWindow)

// rangeShape is a range read resolved against a ring config: k slots per window, a point
// every s slots, p points.
type rangeShape struct {
	k, s, p int64
	width   int64
}

// shapeFor checks window and step against c (defaults filled) and counts the points: the
// windows ending at the current slot and at every step before it whose window still lies
// inside the retention, so no point covers less than its window.
func shapeFor(c RingConfig, w, step time.Duration) (rangeShape, error) {
	k, err := slotsFor(c, w)
	if err != nil {
		return rangeShape{}, err
	}
	s, err := slotsFor(c, step)
	if err != nil {
		return rangeShape{}, fmt.Errorf("%w: %v with %v slots × %d", ErrBadStep, step, c.Slot, c.Slots)
	}
	n := int64(c.Slots)
	return rangeShape{k: k, s: s, p: (n-k)/s + 1, width: c.Slot.Milliseconds()}, nil
}

// slotAgg is one slot's aggregate as a range read composes it: count, sum, min, max and
// its bins: the ring's own slot while the shard lock is held (one series), or a merge of
// several series' (bins).
type slotAgg struct {
	count    uint64
	sum      float64
	min, max float64
	slot     sketch.Slot
	bins     *sketch.Bins
}

// view returns the slot's bins, decoded into scratch when they are packed.
func (a *slotAgg) view(scratch *sketch.Bins) *sketch.Bins {
	if a.bins != nil {
		return a.bins
	}
	return a.slot.View(scratch)
}

// composeScratch holds the Bins compose decodes packed slots into.
var composeScratch sync.Pool

func (a *slotAgg) add(count uint64, sum, mn, mx float64) {
	addPart(&a.count, &a.sum, &a.min, &a.max, count, sum, mn, mx)
}

// compose turns the per-slot aggregates of the retention (aggs[0] is slot cur-n+1,
// aggs[n-1] the current slot cur) into the range's points, oldest first, appended to dst.
// Each point is exactly what Read of the window would have answered with the ring at that
// slot: count, sum, min and max are folded, quantiles come from the union of the window's
// slot bins, clamped to [min, max].
func compose(dst []Agg, aggs []slotAgg, cur int64, sh rangeShape, ix sketch.Indexer, qs []float64, series int) []Agg {
	n := int64(len(aggs))
	// Each slot's bins at most once, however many points' windows share the slot: a point
	// of one slot (the usual per-slot history) reads a packed slot's quantiles straight from
	// its encoding; points of several decode each packed slot they need once, into pooled
	// scratch, and scan the union.
	var sp *[]sketch.Bins
	if sh.k > 1 {
		sp, _ = composeScratch.Get().(*[]sketch.Bins)
		if sp == nil {
			sp = new([]sketch.Bins)
		}
		if len(*sp) < len(aggs) {
			*sp = make([]sketch.Bins, len(aggs))
		}
		defer func() {
			for p := range aggs {
				(*sp)[p].Clear()
			}
			composeScratch.Put(sp)
		}()
	}
	var vstack [64]*sketch.Bins
	views := vstack[:0]
	if len(aggs) <= len(vstack) {
		views = vstack[:len(aggs)]
	} else {
		views = make([]*sketch.Bins, len(aggs))
	}
	ix = sketch.ReadIndexer(ix) // ~90 Value calls: the relative accuracy once, not in each
	var stack [32]*sketch.Bins
	qbuf := make([]float64, 0, int(sh.p)*len(qs)) // every point's quantiles in one allocation
	for i := sh.p - 1; i >= 0; i-- {
		end := n - 1 - i*sh.s // position of the point's last slot in aggs
		j := cur - i*sh.s     // its absolute slot index
		a := Agg{From: (j - sh.k + 1) * sh.width, To: (j + 1) * sh.width, Series: series}
		bins := stack[:0]
		one := int64(-1) // the position of the point's only live slot, if it has one
		for p := end - sh.k + 1; p <= end; p++ {
			if sa := &aggs[p]; sa.count > 0 {
				a.add(sa.count, sa.sum, sa.min, sa.max)
				if one == -1 {
					one = p
				} else {
					one = -2 // several
				}
			}
		}
		if one == -2 {
			for p := end - sh.k + 1; p <= end; p++ {
				if sa := &aggs[p]; sa.count > 0 {
					if views[p] == nil {
						views[p] = sa.view(&(*sp)[p])
					}
					bins = append(bins, views[p])
				}
			}
		}
		at := len(qbuf)
		qbuf = qbuf[:at+len(qs)]
		a.Quantiles = qbuf[at : at : at+len(qs)]
		if a.Count == 0 {
			for range qs {
				a.Quantiles = append(a.Quantiles, math.NaN())
			}
		} else {
			if one >= 0 {
				// One slot (the usual per-slot history): scan its bins directly, without the
				// union's summing buffer, a packed slot's straight from its encoding; the
				// same ranks and values as QuantilesOf.
				switch sa := &aggs[one]; {
				case sa.bins != nil:
					a.Quantiles = sa.bins.Quantiles(ix, qs, a.Quantiles)
				case views[one] != nil:
					a.Quantiles = views[one].Quantiles(ix, qs, a.Quantiles)
				default:
					a.Quantiles = sa.slot.Quantiles(ix, qs, a.Quantiles)
				}
			} else {
				a.Quantiles = sketch.QuantilesOf(ix, qs, a.Quantiles, bins...)
			}
			a.clampQuantiles()
		}
		dst = append(dst, a)
	}
	return dst
}

// slotAggs fills aggs (len n) with the ring's slots [cur-n+1, cur], pointing at the ring's
// own bins: valid only while the caller holds the ring's lock.
func (r *Ring) slotAggs(cur int64, aggs []slotAgg) {
	if r.slots == nil {
		return // a sparse ring reads through view
	}
	base := cur - r.n + 1
	for i := base; i <= cur; i++ {
		s := &r.slots[r.pos(i)]
		if s.count == 0 || s.idx != i {
			continue
		}
		a := &aggs[i-base]
		a.add(s.count, s.sum, s.min, s.max)
		a.slot = s.bins
	}
}

// mergeSlots adds the ring's slots at now into aggs, whose last element is slot cur of the
// caller's clock; slots outside aggs are skipped. Bins are added into aggs' own.
func (r *Ring) mergeSlots(now, cur int64, aggs []slotAgg) {
	if r.slots == nil {
		if len(r.raw) > 0 {
			t := r.view()
			t.mergeSlots(now, cur, aggs)
			r.release(t)
		}
		return
	}
	base := cur - int64(len(aggs)) + 1
	rc := r.at(now)
	for i := rc - r.n + 1; i <= rc; i++ {
		s := &r.slots[r.pos(i)]
		if s.count == 0 || s.idx != i || i < base || i > cur {
			continue
		}
		aggs[i-base].addSlot(s.count, s.sum, s.min, s.max, s.bins)
	}
}

// addSlot adds one slot of a series into a, its bins into a's own: the slot-by-slot merge of
// several series (mergeSlots, RangeSlots).
func (a *slotAgg) addSlot(count uint64, sum, mn, mx float64, bins sketch.Slot) {
	a.add(count, sum, mn, mx)
	if a.bins == nil {
		a.bins = new(sketch.Bins)
	}
	bins.AddTo(a.bins)
}

// ReadRange returns the history of the ring at now: the windows of length w ending at the
// current slot and at every step before it, oldest first, as many as fit inside the
// retention (retention/slot − w/slot) / (step/slot) + 1 points; a window of one slot with a
// step of one slot gives every slot of the retention. Each point is what Read(w) answered
// when that slot was current, with RatePerSec over the part of its span elapsed at now.
// w and step must be positive multiples of the slot width, at most the retention
// (ErrBadWindow, ErrBadStep). Cost: one pass over the retention's slots plus one union scan
// of a window's bins per point; it allocates the points.
//
// A ring with tiers reads through them (range_tiers.go): w and step may reach as far as
// Reach, and the points go back as far as the tiers hold, the points older than the
// retention each rounded out to whole slots of the tier that holds its time, so its count,
// sum, min and max are exact over its [From, To) and the points are as far apart as that
// tier's slots when the step is finer. Within the retention the points are those above.
func (r *Ring) ReadRange(now int64, w, step time.Duration, qs []float64) ([]Agg, error) {
	if len(r.cfg.Tiers) > 0 {
		return readRangeTiered(*r.cfg, r.at(now), w, step, qs, func(cells []rangeCell, aggs []slotAgg, bins bool) int {
			r.mergeCells(cells, aggs, bins)
			return 1
		})
	}
	if err := checkQuantiles(qs); err != nil {
		return nil, err
	}
	sh, err := shapeFor(*r.cfg, w, step)
	if err != nil {
		return nil, err
	}
	var stack [64]slotAgg
	aggs := stack[:0]
	if r.n <= int64(len(stack)) {
		aggs = stack[:r.n]
	} else {
		aggs = make([]slotAgg, r.n)
	}
	cur := r.at(now)
	t := r.view()
	defer r.release(t)
	t.slotAggs(cur, aggs)
	return compose(make([]Agg, 0, sh.p), aggs, cur, sh, t.ix, qs, 1), nil
}

// ReadRangeAt is Ring.ReadRange of one series at now. It returns ErrNotFound for an
// unknown series, ErrBadWindow, ErrBadStep or ErrBadQuantile. The series' shard is locked
// for the whole read.
func (s *Store) ReadRangeAt(now int64, metric, key string, w, step time.Duration, qs []float64) (points []Agg, err error) {
	err = s.withSeries(metric, key, func(se *series) error {
		points, err = se.ring.ReadRange(now, w, step, qs)
		return err
	})
	return points, err
}

// ReadRangeMerged is ReadRangeAt over every series of metric whose key satisfies match:
// slot by slot, the series' counts, sums, min, max and bins are merged, then composed into
// windows, so each point equals ReadMerged of the window at that slot. Agg.Series says how
// many series matched. It returns ErrNotFound when none did. Like ReadMerged it visits
// one shard at a time, and it holds one merged Bins per slot of the retention.
func (s *Store) ReadRangeMerged(now int64, metric string, match func(key string) bool, w, step time.Duration, qs []float64) ([]Agg, error) {
	if err := checkQuantiles(qs); err != nil {
		return nil, err
	}
	rc := s.RingConfig(metric)
	if len(rc.Tiers) > 0 {
		return readRangeTiered(rc, floorDiv(now, rc.Slot.Milliseconds()), w, step, qs, func(cells []rangeCell, aggs []slotAgg, bins bool) int {
			matched := 0
			s.scanMetric(metric, byKey(match), func(se *series) {
				se.ring.mergeCells(cells, aggs, bins)
				matched++
			})
			return matched
		})
	}
	shp, err := shapeFor(rc, w, step)
	if err != nil {
		return nil, err
	}
	ix, _ := rc.Sketch.Indexer() // validated by NewStore
	aggs := make([]slotAgg, rc.Slots)
	cur := floorDiv(now, shp.width)
	matched := 0
	s.scanMetric(metric, byKey(match), func(se *series) {
		se.ring.mergeSlots(now, cur, aggs)
		matched++
	})
	if matched == 0 {
		return nil, ErrNotFound
	}
	return compose(make([]Agg, 0, shp.p), aggs, cur, shp, ix, qs, matched), nil
}
