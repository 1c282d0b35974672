package window

import (
	"errors"
	"fmt"
	"time"
)

// The size of a range read's answer is known before any slot is read: its points per
// series or group follow from the ring's config, now, the window and the step alone. A
// caller bounding its answers (query's /v1/range) checks the bound first, and passes
// what is left of it as a cap on groups, so a read it would refuse stops at the first
// group too many instead of reading every series and composing every point.

// ErrGroupLimit is returned by grouped range reads whose series fall in more groups than
// the caller's cap (ReadRangeGroups' maxGroups, RangeSlots.LimitGroups) when that cap is
// below the read's own bound (ErrTooManyGroups).
var ErrGroupLimit = errors.New("window: more groups than the caller's cap")

// RangeEnds returns the end (Agg.To, unix ms) of each point a range read at now of a ring
// of config rc (defaults filled: Store.RingConfig's) answers for one series or group,
// oldest first, without reading a slot: the points of ReadRangeSelected and of each group
// of ReadRangeGroups. It returns ErrBadWindow or ErrBadStep as those reads do.
func RangeEnds(rc RingConfig, now int64, w, step time.Duration) ([]int64, error) {
	width := rc.Slot.Milliseconds()
	cur := floorDiv(now, width)
	if len(rc.Tiers) > 0 {
		if err := tieredShape(rc, w, step); err != nil {
			return nil, err
		}
		cells := tieredCells(rc, cur)
		spans := tieredSpans(cells, cur, width, w.Milliseconds(), step.Milliseconds())
		ends := make([]int64, len(spans))
		for i, sp := range spans { // newest first
			ends[len(spans)-1-i] = cells[sp[1]-1].to
		}
		return ends, nil
	}
	shp, err := shapeFor(rc, w, step)
	if err != nil {
		return nil, err
	}
	return shp.ends(cur), nil
}

// ends returns the end of each of the shape's points with cur current, oldest first, as
// compose sets them.
func (sh rangeShape) ends(cur int64) []int64 {
	ends := make([]int64, sh.p)
	for i := range ends {
		j := cur - (sh.p-1-int64(i))*sh.s // the point's last slot
		ends[i] = (j + 1) * sh.width
	}
	return ends
}

// Ends returns the end of each point Read answers for one group, oldest first, as
// RangeEnds does for the store's reads.
func (r *RangeSlots) Ends() []int64 { return r.shp.ends(r.cur) }

// LimitGroups caps the groups the read takes at n when n is positive and below its own
// bound: Add returns ErrGroupLimit at the first series of a group past it.
func (r *RangeSlots) LimitGroups(n int) { r.g.limitTo(n) }

// limitTo lowers the groups' limit to the caller's n (when positive and lower).
func (g *rangeGroups) limitTo(n int) {
	if n > 0 && n < g.limit {
		g.limit, g.capped = n, true
	}
}

func (g *rangeGroups) tooMany() error {
	if g.capped {
		return fmt.Errorf("%w: more than %d groups", ErrGroupLimit, g.limit)
	}
	return fmt.Errorf("%w: more than %d by %s over %d slots", ErrTooManyGroups, g.limit, joinBy(g.by), g.n)
}
