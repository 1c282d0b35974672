package window

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// Sentinel errors. Ingest counts refused events by these reasons.
var (
	ErrLate         = errors.New("window: event older than retention")
	ErrFuture       = errors.New("window: event ahead of now beyond the allowed skew")
	ErrInvalidValue = errors.New("window: value is NaN or infinite")
	ErrSeriesCap    = errors.New("window: series cap reached")
	ErrEmptyKey     = errors.New("window: empty metric or key")
	ErrBadWindow    = errors.New("window: window must be a positive multiple of the slot width, at most the retention")
	ErrBadQuantile  = errors.New("window: quantile must be in [0, 1]")
	ErrNotFound     = errors.New("window: series not found")
	ErrNotCovered   = errors.New("window: the level index keeps no prefix that deep")
)

// Defaults of RingConfig.
const (
	DefaultSlot  = 10 * time.Second
	DefaultSlots = 30
)

// RingConfig is the shape of a ring. The zero value means 30 slots of 10 s (5 minutes of
// retention), a skew of one slot, and DDSketch at 1% relative accuracy.
type RingConfig struct {
	Slot   time.Duration // slot width, a whole number of milliseconds; default 10s
	Slots  int           // slots kept; retention = Slot × Slots; default 30
	Skew   time.Duration // how far ahead of now an event may be; default one slot
	Sketch sketch.Kind   // quantile sketch of every slot; zero = DDSketch 1%
	// NoSketch keeps no quantile bins (a sum-only metric such as cost): count, sum, min and
	// max as before, 48 bytes a slot and 32 a tier slot, quantiles NaN.
	NoSketch bool
	// Tiers are coarser rings the slots fold into as they age out (issue #29), finest
	// first: reads of windows up to Reach use them. None by default.
	Tiers []Tier
}

// withDefaults fills the zero fields.
func (c RingConfig) withDefaults() RingConfig {
	if c.Slot == 0 {
		c.Slot = DefaultSlot
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.Skew == 0 {
		c.Skew = c.Slot
	}
	return c
}

// Validate reports a config that cannot make a ring. Zero fields are valid (defaults).
func (c RingConfig) Validate() error {
	d := c.withDefaults()
	switch {
	case d.Slot < time.Millisecond || d.Slot%time.Millisecond != 0:
		return fmt.Errorf("slot %v: must be a positive whole number of milliseconds", c.Slot)
	case d.Slots < 1 || d.Slots > 100_000:
		return fmt.Errorf("slots %d: must be in [1, 100000]", c.Slots)
	case d.Skew < 0:
		return fmt.Errorf("skew %v: must not be negative", c.Skew)
	}
	if err := d.Sketch.Validate(); err != nil {
		return fmt.Errorf("sketch: %w", err)
	}
	return d.validateTiers()
}

// Retention is how far back the ring keeps events: Slot × Slots.
func (c RingConfig) Retention() time.Duration {
	d := c.withDefaults()
	return d.Slot * time.Duration(d.Slots)
}

// slot is one time bucket. bins is empty while the slot is empty: empty slots hold no sketch.
// They are open (a sketch.Bins that Add fills) while the slot is current or ahead of it, and
// packed (read-only, about a third of the bytes) once the ring has moved past it: a dense
// series of 30 full slots keeps 29 of them packed (issue #19). A past slot that takes a late
// event reopens and is packed again at the ring's next advance.
type slot struct {
	idx      int64 // absolute slot index (floor(ts / width)); meaningful only when count > 0
	count    uint64
	sum      float64
	min, max float64
	bins     sketch.Slot
}

// note counts n events of value v in the slot's count, sum, min and max (its bins are the
// caller's: insert and addCurrent reach them differently).
func (s *slot) note(v float64, n uint64) {
	s.count += n
	s.sum += v * float64(n)
	if v < s.min {
		s.min = v
	}
	if v > s.max {
		s.max = v
	}
}

// Ring is the sliding window of one series: slots of a fixed width aligned to the epoch
// (slot index = floor(ts / width)), each with count, sum, exact min and max, and quantile bins.
//
// The ring also keeps agg, the bins of every completed live slot, updated by adding the
// slot that stops being current and subtracting the one that leaves, so a full-retention
// quantile reads one set of bins instead of merging every slot. The current slot joins agg
// lazily: at the first full-window read in that slot (after which its events update both),
// so a series nobody reads updates one set of bins per event.
//
// Time only moves forward, and only writes move it: Add (and the store's ObserveAt and
// ObserveFrom), Empty (Evict's sweep) and the snapshot code advance "now" to max(now, the
// latest now seen). Reads never do (issue #25): a read at a now past the current slot
// answers what the ring would hold there, computed from the slots as they are, so no read,
// at any now, changes what a later read or a later event sees.
// A Ring is not safe for concurrent use; the Store guards each ring with its shard's lock.
type Ring struct {
	// Fields in the order the hot paths touch them (Add in the current slot, the sweep's
	// Empty, a sparse read): they share the series header's first three cache lines, the
	// aggregate and the config come after. The small fields sit together so that a series
	// (header and ring) fits the allocator's 320-byte size class.
	ringShape
	cur    int64  // current slot index: floor(now / width)
	curLo  int64  // cur × width: [curLo, curLo+width) is the current slot, a division-free fast path
	slots  []slot // nil while the ring is sparse (raw); else size slots, position = idx mod size
	size   int64  // slots a dense ring keeps: n for the window plus enough for skew
	raw    []rawEvent
	ix     sketch.Indexer
	curPos int32 // pos(cur), so the common case needs no modulo either
	live   int32 // slots holding data
	// openPast counts the slots before the current one that were opened (created or
	// reopened by a late event) since the last advance, which packs them again.
	openPast int32
	// curInAgg is true once a read has folded the current slot into agg (later adds then go
	// to both). Every live slot before the current one is in agg, none after it is.
	curInAgg bool
	// started is false until the first call fixes cur.
	started  bool
	noSketch bool // cfg.NoSketch: slots open no bins
	agg      sketch.Bins
	cfg      *RingConfig // defaults filled; shared by the store's rings of one metric
	tiers    *tierSet    // nil until a slot ages out of a tiered ring
}

// ringShape is what a ring's config makes of time, in ms: enough to judge an event's time
// against a source before the ring exists (observeNewFrom).
type ringShape struct {
	width  int64 // slot width, ms
	n      int64 // slots in a full window (retention)
	skewMs int64
}

func shapeOf(c RingConfig) ringShape {
	return ringShape{width: c.Slot.Milliseconds(), n: int64(c.Slots), skewMs: c.Skew.Milliseconds()}
}

// NewRing returns an empty ring. It fails only on an invalid config.
func NewRing(cfg RingConfig) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Ring{}
	c := cfg.withDefaults()
	r.init(&c)
	return r, nil
}

// init shapes r by c (defaults filled, validated), which r keeps and must not change.
func (r *Ring) init(c *RingConfig) {
	ix, _ := c.Sketch.Indexer() // validated
	r.cfg = c
	r.noSketch = c.NoSketch
	r.ringShape = shapeOf(*c)
	r.ix = ix
	extra := (r.skewMs + r.width - 1) / r.width
	r.size = r.n + extra
}

// floorDiv is floor(a / b) for b > 0, correct for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func (r *Ring) pos(idx int64) int {
	l := r.size
	p := idx % l
	if p < 0 {
		p += l
	}
	return int(p)
}

// advance moves the current slot to floor(now / width): slots that become current join agg,
// slots older than the retention leave it and are cleared.
func (r *Ring) advance(now int64) {
	if r.started && now >= r.curLo && now < r.curLo+r.width {
		return // still in the current slot: the common case costs two compares
	}
	next := floorDiv(now, r.width)
	if !r.started {
		r.started, r.cur, r.curLo, r.curPos = true, next, next*r.width, int32(r.pos(next))
		return
	}
	if next <= r.cur {
		return // time does not go backwards
	}
	old, oldInAgg := r.cur, r.curInAgg
	r.cur, r.curLo, r.curPos, r.curInAgg = next, next*r.width, int32(r.pos(next)), false
	if r.slots == nil {
		if next-old >= r.size {
			if r.tiered() {
				for _, e := range r.raw {
					r.retireRaw(e)
				}
			}
			r.raw = nil // every event is older than the retention: no need to read them
			return
		}
		r.pruneRaw()
		return
	}
	if r.live == 0 {
		r.slots, r.openPast = nil, 0
		return
	}
	if next-old >= r.size {
		// Jumped past everything the ring holds.
		if r.tiered() {
			for i := old - r.n + 1; i <= old+r.size-r.n; i++ { // oldest first
				if s := &r.slots[r.pos(i)]; s.count > 0 && s.idx == i {
					r.retire(s)
				}
			}
		}
		for i := range r.slots {
			if r.slots[i].count > 0 {
				r.clear(&r.slots[i])
			}
		}
		r.agg.Reset()
		r.slots, r.openPast = nil, 0 // back to raw events: an idle series holds no slots
		return
	}
	// The old current slot, and any slot accepted ahead of now under the skew that is now
	// in the past, join agg and are packed.
	for i := old; i < next; i++ {
		if s := &r.slots[r.pos(i)]; s.count > 0 && s.idx == i {
			if i != old || !oldInAgg {
				s.bins.AddTo(&r.agg)
			}
			s.bins.Pack()
		}
	}
	// Slots older than the window leave: every live slot has idx > old-n, so they are among (old-n, next-n].
	for i := old - r.n + 1; i <= next-r.n; i++ {
		if s := &r.slots[r.pos(i)]; s.count > 0 && s.idx == i {
			s.bins.SubFrom(&r.agg)
			if r.tiered() {
				r.retire(s)
			}
			r.clear(s)
		}
	}
	if r.openPast > 0 {
		// Past slots opened by late events since the last advance: pack them again.
		for i := range r.slots {
			if s := &r.slots[i]; s.count > 0 && s.idx < r.cur {
				s.bins.Pack()
			}
		}
		r.openPast = 0
	}
	if r.live == 0 {
		r.agg.Reset() // nothing live: release the aggregate's and the slots' memory too
		r.slots = nil
	}
}

func (r *Ring) clear(s *slot) {
	s.bins.Reset()
	*s = slot{}
	r.live--
}

// Add records n observations of v at time ts (unix ms), with now as the current time.
// It returns ErrLate for ts older than the retention, ErrFuture for ts beyond now + skew,
// and ErrInvalidValue for NaN or ±Inf. n == 0 counts as 1. No allocation once the slot
// and its bins exist.
func (r *Ring) Add(now, ts int64, v float64, n uint64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ErrInvalidValue
	}
	if n == 0 {
		n = 1
	}
	if !r.started || now < r.curLo || now >= r.curLo+r.width {
		r.advance(now) // the common case, still in the current slot, makes no call
	}
	return r.place(now, ts, v, n, ErrLate)
}

// place puts n observations of v at ts into its slot once time has advanced to now and the
// value is checked: ErrFuture beyond now + skew, late (ErrLate for Add, ErrExpired for the
// source-judged path) before the retention. Add and addFrom share it.
func (r *Ring) place(now, ts int64, v float64, n uint64, late error) error {
	var idx int64
	var p int
	switch {
	case ts > now+r.skewMs:
		return ErrFuture
	case ts >= r.curLo && ts < r.curLo+r.width:
		idx, p = r.cur, int(r.curPos) // the common case needs no division
	default:
		idx = floorDiv(ts, r.width)
		if idx <= r.cur-r.n {
			return late
		}
		p = r.pos(idx)
	}
	if r.slots == nil {
		if len(r.raw) < RawEvents {
			r.raw = append(r.raw, rawEvent{idx: idx, v: v, n: n})
			return nil
		}
		r.upgrade()
	}
	r.insert(idx, p, v, n)
	return nil
}

// insert adds n observations of v into slot idx at position p of a dense ring; the caller
// has checked idx against the window.
func (r *Ring) insert(idx int64, p int, v float64, n uint64) {
	s := &r.slots[p]
	if s.count == 0 {
		*s = slot{idx: idx, min: v, max: v}
		r.live++
	}
	if r.noSketch {
		s.note(v, n)
		return
	}
	b := s.bins.Bins()
	if b == nil {
		if idx < r.cur {
			r.openPast++ // a late event: the next advance packs the slot again
		}
		b = s.bins.Open()
	}
	s.note(v, n)
	b.Add(r.ix, v, n)
	if idx < r.cur || idx == r.cur && r.curInAgg {
		r.agg.Add(r.ix, v, n) // out of order, or the current slot already folded in by a read
	}
}

// addCurrent is Add and addFrom's fast path (issue #19): an event of the current slot of a
// dense ring, at a now in that slot, into the slot's open bins. It does what place and
// insert would and returns true, or does nothing and returns false for the caller to take
// the full path. v must be finite (the callers check it first).
func (r *Ring) addCurrent(now, ts int64, v float64, n uint64) bool {
	lo, hi := r.curLo, r.curLo+r.width
	if r.slots == nil || !r.started || now < lo || now >= hi || ts < lo || ts >= hi || ts > now+r.skewMs {
		return false
	}
	s := &r.slots[r.curPos]
	b := s.bins.Bins()
	if s.count == 0 || b == nil {
		if r.noSketch && s.count > 0 { // a sum-only ring's slots never open bins
			s.note(v, max(n, 1))
			return true
		}
		return false
	}
	if n == 0 {
		n = 1
	}
	s.note(v, n)
	b.Add(r.ix, v, n)
	if r.curInAgg {
		r.agg.Add(r.ix, v, n) // the current slot already folded in by a read
	}
	return true
}

// Empty reports whether the ring holds no event at now, advancing it to now: the sweep's
// call (Store.Evict), on the owner's clock, not a read.
func (r *Ring) Empty(now int64) bool {
	r.advance(now)
	return r.live == 0 && len(r.raw) == 0 && r.tiersEmpty(now)
}

// foldCurrent makes agg cover the current slot too.
func (r *Ring) foldCurrent() {
	if r.slots == nil {
		return
	}
	if s := &r.slots[r.pos(r.cur)]; s.count > 0 && s.idx == r.cur && !r.curInAgg {
		s.bins.AddTo(&r.agg)
		r.curInAgg = true
	}
}

// at is the current slot a read at now sees, without moving the ring: the ring's own while
// now is in it or before it (time does not go backwards), floor(now / width) once now is
// past it. Every read takes its slots from at instead of advancing (issue #25); the common
// case, now in the current slot, costs one compare.
func (r *Ring) at(now int64) int64 {
	if r.started && now < r.curLo+r.width {
		return r.cur
	}
	return floorDiv(now, r.width)
}

// span returns the span a window of k slots covers with cur current: [cur-k+1, cur] in ms.
func (r *Ring) span(cur, k int64) (from, to int64) {
	return (cur - k + 1) * r.width, (cur + 1) * r.width
}

// readSlots is slotsFor for a read that can reach into the tiers: a window longer than the
// retention, up to Reach, is k > Slots slots of the ring's width.
func readSlots(c RingConfig, w time.Duration) (int64, error) {
	width, ms := c.Slot.Milliseconds(), w.Milliseconds()
	if len(c.Tiers) > 0 && w > c.Retention() && w <= c.Reach() && w%time.Millisecond == 0 && ms%width == 0 {
		return ms / width, nil
	}
	return slotsFor(c, w)
}

// slotsFor converts a window to a slot count of a ring of config c (defaults filled), or ErrBadWindow.
func slotsFor(c RingConfig, w time.Duration) (int64, error) {
	width, ms := c.Slot.Milliseconds(), w.Milliseconds()
	if w <= 0 || w%time.Millisecond != 0 || ms%width != 0 || ms/width > int64(c.Slots) {
		return 0, fmt.Errorf("%w: %v with %v slots × %d", ErrBadWindow, w, c.Slot, c.Slots)
	}
	return ms / width, nil
}

// windowSlots is slotsFor of r's config from the fields the hot paths already load (width,
// n), so a read touches none of the config's cache lines.
func (r *Ring) windowSlots(w time.Duration) (int64, error) {
	ms := w.Milliseconds()
	if w <= 0 || w%time.Millisecond != 0 || ms%r.width != 0 || ms/r.width > r.n {
		return readSlots(*r.cfg, w) // a tiered window, or the error, worded once
	}
	return ms / r.width, nil
}

func checkQuantiles(qs []float64) error {
	for _, q := range qs {
		if !(q >= 0 && q <= 1) {
			return fmt.Errorf("%w: %v", ErrBadQuantile, q)
		}
	}
	return nil
}

// clone returns a deep copy of r (tests and memory benchmarks).
func (r *Ring) clone() *Ring {
	c := *r
	c.raw = append([]rawEvent(nil), r.raw...)
	c.tiers = r.tiers.clone()
	if r.slots == nil {
		c.agg = sketch.Bins{}
		return &c
	}
	c.slots = make([]slot, len(r.slots))
	for i, s := range r.slots {
		c.slots[i] = s
		c.slots[i].bins = s.bins.Clone()
	}
	c.agg = *r.agg.Clone()
	c.tiers = r.tiers.clone()
	return &c
}
