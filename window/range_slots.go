package window

import (
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// RangeSlots composes a range read from the slots of series handed to it one at a time, as
// VisitSlots hands them (from this store, or from other instances: package cluster's
// VisitSlots merges them): a cluster member's history of every partition. Its points are
// those ReadRangeSelected (with by, ReadRangeGroups) gives on one store holding the same
// slots: the slots are merged and composed by the same code, so count, sum, min and max
// are equal exactly, and quantiles too (the merged bins are the same counts).
//
// It reads the ring's own slots only: a tiered ring's tiers are not handed by VisitSlots,
// so the window is at most the retention even on a tiered ring (ErrBadWindow), and a step
// past the retention gives the one point that lies within it. Those points are the tiered
// read's within the retention.
//
// It holds one aggregate per slot of the retention for each group (with by) or for the
// merge, each with its bins: the groups are bounded as ReadRangeGroups bounds them. Not
// safe for concurrent use.
type RangeSlots struct {
	cur int64 // the read's slot
	shp rangeShape
	ix  sketch.Indexer
	qs  []float64
	g   *rangeGroups
}

// NewRangeSlots returns an empty range read at now of a ring of config rc (defaults
// filled: Store.RingConfig's), windows of w every step, quantiles qs, grouped by by (nil:
// one merged history). It returns CheckBy's errors, ErrBadWindow, ErrBadStep or
// ErrBadQuantile.
func NewRangeSlots(rc RingConfig, now int64, w, step time.Duration, qs []float64, by []string) (*RangeSlots, error) {
	if err := checkQuantiles(qs); err != nil {
		return nil, err
	}
	if err := CheckBy(by); err != nil {
		return nil, err
	}
	if len(rc.Tiers) > 0 {
		if err := tieredShape(rc, w, step); err != nil {
			return nil, err
		}
		// Steps past the retention reach only the newest point within it, which a step of
		// the retention gives too.
		step = min(step, rc.Retention())
		rc.Tiers = nil
	}
	shp, err := shapeFor(rc, w, step)
	if err != nil {
		return nil, err
	}
	ix, err := rc.Sketch.Indexer()
	if err != nil {
		return nil, err
	}
	return &RangeSlots{cur: floorDiv(now, shp.width), shp: shp, ix: ix, qs: qs, g: newRangeGroups(by, rc.Slots)}, nil
}

// Add folds the slots of one series (series string series, slots ascending as VisitSlots
// hands them) into its group; the slots outside the retention at the read's now are left
// out. The bins are copied: slots may be the ring's own, valid only inside the visit. It
// returns ErrTooManyGroups (and adds nothing more) once the series fall in too many groups.
func (r *RangeSlots) Add(series string, slots []SlotView) error {
	rg := r.g.of(series)
	if rg == nil {
		return r.g.tooMany()
	}
	base := r.cur - int64(len(rg.aggs)) + 1
	for i := range slots {
		s := &slots[i]
		if s.Count > 0 && s.Index >= base && s.Index <= r.cur {
			rg.aggs[s.Index-base].addSlot(s.Count, s.Sum, s.Min, s.Max, s.Bins)
		}
	}
	rg.series++
	return nil
}

// Read composes the points of every series added: one RangeGroup per group, sorted as
// ReadRangeGroups sorts them, or without by one RangeGroup without labels holding
// ReadRangeSelected's points. It returns ErrNotFound when no series was added, and
// ErrTooManyGroups when Add did. Call it once.
func (r *RangeSlots) Read() ([]RangeGroup, error) {
	return r.g.compose(func(aggs []slotAgg, series int) []Agg {
		return compose(make([]Agg, 0, r.shp.p), aggs, r.cur, r.shp, r.ix, r.qs, series)
	})
}
