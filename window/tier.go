package window

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// Tiers (issue #29): a ring keeps fine slots for its retention and folds each slot that ages
// out of it into the slot of the first coarser Tier that holds its start, and each slot that
// ages out of a tier into the next, so a series holds weeks in a few hundred bytes.

// MaxTiers bounds RingConfig.Tiers.
const MaxTiers = 8

// Tier is one coarser ring behind a ring's own slots: Slots slots of Slot width, aligned to
// the epoch as the ring's are. Slot is a multiple of the width before it (the ring's for the
// first tier), so every finer slot folds whole into one coarser slot.
type Tier struct {
	Slot  time.Duration // a multiple of the previous width
	Slots int           // slots kept, in [1, 100000]
}

// validateTiers checks c.Tiers against c's slot width (defaults filled).
func (c RingConfig) validateTiers() error {
	if len(c.Tiers) > MaxTiers {
		return fmt.Errorf("tiers: %d, at most %d", len(c.Tiers), MaxTiers)
	}
	prev := c.Slot
	for i, t := range c.Tiers {
		switch {
		case t.Slot <= prev || t.Slot%prev != 0:
			return fmt.Errorf("tier %d: slot %s must be a multiple of the slot %s before it, and longer", i+1, FormatDuration(t.Slot), FormatDuration(prev))
		case t.Slots < 1 || t.Slots > 100_000:
			return fmt.Errorf("tier %d: slots %d: must be in [1, 100000]", i+1, t.Slots)
		}
		prev = t.Slot
	}
	return nil
}

// Reach is the longest window a ring of config c reads: its retention and, for each tier,
// Slots − 1 of its slots (a tier's newest slot may hold only the part of its span older than
// the slots before it). Without tiers it is the retention.
func (c RingConfig) Reach() time.Duration {
	d := c.withDefaults()
	r := d.Retention()
	for _, t := range d.Tiers {
		r += t.Slot * time.Duration(t.Slots-1)
	}
	return r
}

// tierSlot is a tier's slot: count, sum and exact min and max; its bins sit beside it in
// tier.bins, so a ring without a sketch pays 32 bytes a slot.
type tierSlot struct {
	count    uint64
	sum      float64
	min, max float64
}

// tier is the state of one Tier. It holds the slots (cur−n, cur]; a slot outside them is zero.
type tier struct {
	width, n int64
	cur      int64
	started  bool
	stats    []tierSlot    // n of them, position idx mod n; nil until the first fold
	bins     []sketch.Slot // beside stats, packed; nil for a ring without a sketch
}

// tierSet is a ring's tiers, allocated at the first slot that ages out of it.
type tierSet struct {
	t        []tier
	ix       sketch.Indexer
	noSketch bool
}

// part is what folds into a tier: a slot's count, sum, min and max and its bins (moved, not
// copied), or one raw event of a sparse ring (v, count).
type part struct {
	count    uint64
	sum      float64
	min, max float64
	bins     sketch.Slot
	raw      bool
	v        float64
}

func newTierSet(c *RingConfig, ix sketch.Indexer) *tierSet {
	ts := &tierSet{t: make([]tier, len(c.Tiers)), ix: ix, noSketch: c.NoSketch}
	for i, t := range c.Tiers {
		ts.t[i] = tier{width: t.Slot.Milliseconds(), n: int64(t.Slots)}
	}
	return ts
}

func (t *tier) pos(j int64) int {
	p := j % t.n
	if p < 0 {
		p += t.n
	}
	return int(p)
}

// add folds p, whose span starts at start (ms), into tier i, moving the tier on (and its
// leaving slots into tier i+1) when p is newer than its current slot. A part older than
// tier i holds goes on to the next tier; past the last it is gone.
func (ts *tierSet) add(i int, start int64, p *part) {
	if i >= len(ts.t) {
		return
	}
	t := &ts.t[i]
	j := floorDiv(start, t.width)
	if !t.started {
		t.started, t.cur = true, j
	}
	if j > t.cur {
		ts.advance(i, j)
	}
	if j <= t.cur-t.n {
		ts.add(i+1, start, p)
		return
	}
	if t.stats == nil {
		t.stats = make([]tierSlot, t.n)
		if !ts.noSketch {
			t.bins = make([]sketch.Slot, t.n)
		}
	}
	q := t.pos(j)
	s := &t.stats[q]
	if s.count == 0 {
		*s = tierSlot{count: p.count, sum: p.sum, min: p.min, max: p.max}
	} else {
		s.count += p.count
		s.sum += p.sum
		s.min, s.max = min(s.min, p.min), max(s.max, p.max)
	}
	if t.bins != nil {
		ts.mergeBins(&t.bins[q], p)
	}
}

// mergeBins adds p's bins into dst and leaves dst packed. A slot's bins move when dst is empty.
func (ts *tierSet) mergeBins(dst *sketch.Slot, p *part) {
	switch {
	case p.raw:
		dst.Open().Add(ts.ix, p.v, p.count)
	case p.bins.Empty():
		return
	case dst.Empty():
		*dst = p.bins
	default:
		p.bins.AddTo(dst.Open())
	}
	dst.Pack()
}

// advance makes j tier i's current slot: the slots leaving (cur−n, j−n], oldest first, fold
// into tier i+1.
func (ts *tierSet) advance(i int, j int64) {
	t := &ts.t[i]
	lo, hi := t.cur-t.n+1, min(j-t.n, t.cur)
	t.cur = j
	if t.stats == nil {
		return
	}
	for k := lo; k <= hi; k++ {
		q := t.pos(k)
		s := &t.stats[q]
		if s.count == 0 {
			continue
		}
		p := part{count: s.count, sum: s.sum, min: s.min, max: s.max}
		if t.bins != nil {
			p.bins, t.bins[q] = t.bins[q], sketch.Slot{}
		}
		*s = tierSlot{}
		ts.add(i+1, k*t.width, &p)
	}
}

// retire folds a fine slot leaving the ring into its tiers; its bins move with it. The
// caller clears the slot.
func (r *Ring) retire(s *slot) {
	if r.tiers == nil {
		r.tiers = newTierSet(r.cfg, r.ix)
	}
	p := part{count: s.count, sum: s.sum, min: s.min, max: s.max}
	if !r.noSketch {
		p.bins, s.bins = s.bins, sketch.Slot{}
		p.bins.Pack()
	}
	r.tiers.add(0, s.idx*r.width, &p)
}

// retireRaw folds a sparse ring's raw event leaving it into its tiers.
func (r *Ring) retireRaw(e rawEvent) {
	if r.tiers == nil {
		r.tiers = newTierSet(r.cfg, r.ix)
	}
	p := part{count: e.n, sum: e.v * float64(e.n), min: e.v, max: e.v, raw: !r.noSketch, v: e.v}
	r.tiers.add(0, e.idx*r.width, &p)
}

// tiered reports whether r's config has tiers, for the paths where slots leave.
func (r *Ring) tiered() bool { return len(r.cfg.Tiers) > 0 }

// tiersEmpty reports whether r's tiers hold nothing a read at now can reach, dropping them
// when so: the sweep's question (Empty), as a tier moves only when a slot folds into it.
func (r *Ring) tiersEmpty(now int64) bool {
	if r.tiers == nil {
		return true
	}
	reach := r.cfg.Reach().Milliseconds()
	for i := range r.tiers.t {
		t := &r.tiers.t[i]
		if t.stats == nil {
			continue
		}
		for k := t.cur - t.n + 1; k <= t.cur; k++ {
			// A read at now starts no earlier than now − reach, rounded down by at most one
			// slot of the coarsest tier, which is at most reach.
			if t.stats[t.pos(k)].count > 0 && (k+1)*t.width > now-2*reach {
				return false
			}
		}
	}
	r.tiers = nil
	return true
}

// foldTiered adds into a the window of wms ms ending with slot cur, reaching into the tiers,
// and sets a.From and a.To to the span it covers: the window's start, rounded down to the
// start of a tier slot holding it when one does (a tier slot is read whole), so [From, To)
// holds every event counted and no event of it is left out. bins (nil: none) gets the bins.
// It returns the slots [lo, hi] it read from the ring's own slots (none when lo > hi).
func (r *Ring) foldTiered(a *Agg, cur, wms int64, bins *sketch.Bins) (lo, hi int64) {
	to := (cur + 1) * r.width
	from := r.roundFrom(cur, to-wms)
	if ts := r.tiers; ts != nil {
		for i := len(ts.t) - 1; i >= 0; i-- { // oldest first: sums add in time order
			t := &ts.t[i]
			if t.stats == nil {
				continue
			}
			for k := max(t.cur-t.n+1, -floorDiv(-from, t.width)); k <= t.cur; k++ {
				q := t.pos(k)
				if s := &t.stats[q]; s.count > 0 {
					a.add(s.count, s.sum, s.min, s.max)
					if bins != nil && t.bins != nil {
						t.bins[q].AddTo(bins)
					}
				}
			}
		}
	}
	a.From, a.To = from, to
	v := r.view()
	lo, hi = max(-floorDiv(-from, v.width), v.cur-v.n+1), min(cur, v.cur+v.size-v.n)
	if v.slots != nil {
		for i := lo; i <= hi; i++ {
			if s := &v.slots[v.pos(i)]; s.count > 0 && s.idx == i {
				a.add(s.count, s.sum, s.min, s.max)
				if bins != nil {
					s.bins.AddTo(bins)
				}
			}
		}
	}
	r.release(v)
	return lo, hi
}

// roundFrom rounds the start of a window ending with slot cur down to the start of the tier
// slot holding it, when a tier holds one, finest tier first. The tiers are taken as an
// advance to cur would leave them (the fine slots it would fold, stats only, into a scratch
// copy), so a read ahead of the ring rounds as the ring moved there would (issue #25).
func (r *Ring) roundFrom(cur, from int64) int64 {
	ts := r.tiers
	if cur > r.cur {
		v := r.view()
		var scratch *tierSet
		for i := v.cur - v.n + 1; v.slots != nil && i <= min(cur-v.n, v.cur+v.size-v.n); i++ {
			s := &v.slots[v.pos(i)]
			if s.count == 0 || s.idx != i {
				continue
			}
			if scratch == nil {
				scratch = ts.statsCopy(r)
			}
			scratch.add(0, i*r.width, &part{count: s.count, sum: s.sum, min: s.min, max: s.max})
		}
		r.release(v)
		if scratch != nil {
			ts = scratch
		}
	}
	if ts == nil {
		return from
	}
	for i := range ts.t {
		t := &ts.t[i]
		if j := floorDiv(from, t.width); t.started && from != j*t.width && j > t.cur-t.n && j <= t.cur {
			from = j * t.width
		}
	}
	return from
}

// statsCopy is a copy of ts (nil: r's empty tiers) without bins, for roundFrom.
func (ts *tierSet) statsCopy(r *Ring) *tierSet {
	c := newTierSet(r.cfg, r.ix)
	c.noSketch = true
	if ts != nil {
		for i, t := range ts.t {
			c.t[i] = t
			c.t[i].stats, c.t[i].bins = append([]tierSlot(nil), t.stats...), nil
			if t.stats == nil {
				c.t[i].stats = nil
			}
		}
	}
	return c
}

// readTiered is read of a window longer than the ring's retention (k slots of its width).
func (r *Ring) readTiered(cur, k int64, qs []float64) Agg {
	var a Agg
	a.Series = 1
	a.Quantiles = make([]float64, len(qs))
	if len(qs) == 0 || r.noSketch {
		r.foldTiered(&a, cur, k*r.width, nil)
		a.nanQuantiles()
		return a
	}
	b := scratchBins.Get().(*sketch.Bins)
	r.foldTiered(&a, cur, k*r.width, b)
	a.readQuantiles(b, r.ix, qs)
	b.Clear()
	scratchBins.Put(b)
	return a
}

// cloneTiers is a deep copy of ts (Ring.clone).
func (ts *tierSet) clone() *tierSet {
	if ts == nil {
		return nil
	}
	c := &tierSet{t: make([]tier, len(ts.t)), ix: ts.ix, noSketch: ts.noSketch}
	for i, t := range ts.t {
		c.t[i] = t
		c.t[i].stats = append([]tierSlot(nil), t.stats...)
		if t.bins != nil {
			c.t[i].bins = make([]sketch.Slot, len(t.bins))
			for j, b := range t.bins {
				c.t[i].bins[j] = b.Clone()
			}
		}
	}
	return c
}

// Spec writes c as --rings takes it after "METRIC=": SLOT:SLOTS[:SKETCH] then +SLOT:SLOTS
// for each tier, e.g. "1m:60+1h:48+1d:36"; SKETCH is "none" for NoSketch and is left out
// for the default sketch.
func (c RingConfig) Spec() string {
	d := c.withDefaults()
	var b strings.Builder
	b.WriteString(specDuration(d.Slot) + ":" + strconv.Itoa(d.Slots))
	switch {
	case d.NoSketch:
		b.WriteString(":none")
	case !d.Sketch.Equal(sketch.Kind{}):
		b.WriteString(":" + d.Sketch.String())
	}
	for _, t := range d.Tiers {
		b.WriteString("+" + specDuration(t.Slot) + ":" + strconv.Itoa(t.Slots))
	}
	return b.String()
}

// specDuration is FormatDuration with whole days as days (1d, not 24h), as --rings is written.
func specDuration(d time.Duration) string {
	if day := 24 * time.Hour; d >= day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return FormatDuration(d)
}

// Serving returns a config like c that reads a window of w (CheckWindow): c itself when it
// does; else, for w not a multiple of c's slot, c's retention in slots of a width dividing
// both; for w up to 6 hours (or a slot that no hour divides), one ring of w; else c's ring
// followed by tiers of 1 h (48 of them) and 1 d, with as many slots in the last as w needs.
// It is the hint of a refusal ("--rings cost=1m:60+1h:48+1d:31"); w must be positive.
func (c RingConfig) Serving(w time.Duration) RingConfig {
	d := c.withDefaults()
	if w <= 0 || d.CheckWindow(w, "", "") == nil {
		return d
	}
	if w%d.Slot != 0 {
		f := time.Duration(gcd(int64(w/time.Millisecond), int64(d.Slot/time.Millisecond))) * time.Millisecond
		d.Slots, d.Slot, d.Tiers = int(min(d.Retention()/f, 100_000)), f, nil
		if d.CheckWindow(w, "", "") == nil {
			return d
		}
	}
	if w <= 6*time.Hour || time.Hour%d.Slot != 0 && d.Slot < time.Hour || d.Slot > 24*time.Hour {
		d.Tiers = nil
		d.Slots = int(min(max(int64(w/d.Slot), int64(d.Slots)), 100_000))
		return d
	}
	d.Tiers = nil
	if d.Slot < time.Hour {
		d.Tiers = append(d.Tiers, Tier{Slot: time.Hour, Slots: 48})
	}
	if d.Reach() < w && d.Slot < 24*time.Hour {
		d.Tiers = append(d.Tiers, Tier{Slot: 24 * time.Hour, Slots: 1})
	}
	if need := w - d.Reach(); need > 0 {
		if len(d.Tiers) == 0 {
			d.Slots += int((need + d.Slot - 1) / d.Slot)
		} else {
			t := &d.Tiers[len(d.Tiers)-1]
			t.Slots += int((need + t.Slot - 1) / t.Slot)
		}
	}
	return d
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
