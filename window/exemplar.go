package window

import (
	"bytes"
	"cmp"
	"math"
	"slices"
)

// Exemplars (StoreConfig.Exemplars): for each slot of a series' ring, the accepted event of
// the largest value that carried a trace id, the slot's slowest span (of equal values, the
// earliest: Exemplar.Before). An SRE who sees a p95 or a peak rise in a window follows one
// of them to its trace: what Prometheus calls an exemplar, and what Grafana draws as a point
// on a latency panel that links to Tempo or Jaeger. The largest, not the latest (client_golang
// keeps the last observation of each bucket): a slot's max is its one value a window reports
// exactly (max, and the peaks of /v1/top), and the span behind it is the one worth opening. One exemplar a slot, kept beside the ring in slots of their own indexed as the
// ring's (slot index = floor(ts / width)), so the exemplars of a slot go when the slot
// goes. The tiers of a long ring keep none.

// Exemplar is one span kept as an example of a series' values: the event's time (unix ms)
// and value, and the trace and span it was read from.
type Exemplar struct {
	TS      int64
	Value   float64
	TraceID [16]byte
	SpanID  [8]byte
}

// exemplarSlot is the exemplar of the slot idx; idx is math.MinInt64 while it holds none.
type exemplarSlot struct {
	idx int64
	Exemplar
}

// ExemplarBytes is what a series' exemplars take with config c (StoreConfig.Exemplars):
// one per slot the ring keeps (the retention and the skew's slots ahead), 48 bytes each and
// up to an eighth more for the allocator's size class, and 128 for the shard's map entry:
// 1,802 for the default ring, where 1,608 were measured (TestExemplarBytesHoldTheirMemory).
// MaxBytes weighs each series this much more when exemplars are on.
func ExemplarBytes(c RingConfig) int {
	d := c.withDefaults()
	n := 48 * (d.Slots + int(d.aheadSlots()))
	return 128 + n + n/8
}

// exemplar keeps ev as the exemplar of its slot in se when it has a trace id and goes
// before the slot's exemplar (or the slot has none); ev has been accepted. The caller holds
// sh.mu.
func (sh *shard) exemplar(se *series, ev *Event) {
	if ev.TraceID == [16]byte{} {
		return
	}
	sh.keepExemplar(se, floorDiv(ev.TS, se.ring.width), Exemplar{TS: ev.TS, Value: ev.Value, TraceID: ev.TraceID, SpanID: ev.SpanID})
}

// keepExemplar keeps x as the exemplar of se's slot idx when it goes before the slot's
// (Exemplar.Before) or the slot has none. The caller holds sh.mu.
func (sh *shard) keepExemplar(se *series, idx int64, x Exemplar) {
	r := &se.ring
	ex := sh.ex[se]
	if !se.exemplar {
		ex = make([]exemplarSlot, r.size)
		for i := range ex {
			ex[i].idx = math.MinInt64
		}
		if sh.ex == nil {
			sh.ex = map[*series][]exemplarSlot{}
		}
		sh.ex[se] = ex
		se.exemplar = true
	}
	e := &ex[r.pos(idx)]
	if e.idx > idx || e.idx == idx && !x.Before(e.Exemplar) {
		return
	}
	*e = exemplarSlot{idx: idx, Exemplar: x}
}

// Before reports whether x is kept before y as a slot's exemplar: the larger value, then
// the earlier time, then the smaller trace id. A total order, so a slot's exemplar does not
// depend on the order its events came in: a replay keeps the same one, and the cluster's
// merge of two instances' exemplars of a slot keeps what one store holding both would.
func (x Exemplar) Before(y Exemplar) bool {
	switch {
	case x.Value != y.Value:
		return x.Value > y.Value
	case x.TS != y.TS:
		return x.TS < y.TS
	}
	return bytes.Compare(x.TraceID[:], y.TraceID[:]) < 0
}

// VisitExemplars calls fn once for each series of metric that sel selects (nil: every
// series) and that part accepts (nil: every partition; a series fed by no partition has
// partition -1), if it holds exemplars in the retention at now: its series string and its
// exemplars, one per slot of the retention up to the slot current at now, oldest first
// (slots ahead of it, inside the skew, are left out, as reads leave them out). fn runs
// under the series' shard lock: it must be quick, must not call the Store, and must copy
// what it keeps of ex. It returns false to stop the visit; stop is asked as ReadKey asks
// it. A store without StoreConfig.Exemplars holds none.
func (s *Store) VisitExemplars(now int64, metric string, sel *Selector, part func(p int32) bool, stop func() bool, fn func(series string, ex []Exemplar) bool) {
	if !s.cfg.Exemplars {
		return
	}
	var out []Exemplar
	s.eachSelected(metric, sel, stop, func(se *series) bool {
		if !se.exemplar || part != nil && !part(se.partition) {
			return true
		}
		sh := &s.shards[s.hash(se.metric, se.key)&s.mask] // held by eachSelected
		r := &se.ring
		cur := r.at(now)
		out = out[:0]
		for _, e := range sh.ex[se] {
			if e.idx > cur-r.n && e.idx <= cur {
				out = append(out, e.Exemplar)
			}
		}
		if len(out) == 0 {
			return true
		}
		slices.SortFunc(out, func(a, b Exemplar) int { return cmp.Compare(a.TS, b.TS) })
		return fn(se.key, out)
	})
}

// appendExemplars appends the exemplars se holds of its slots lo to hi, oldest first: the
// exemplars of a window whose aggregate read those slots of the ring. The caller holds sh.mu.
func (sh *shard) appendExemplars(dst []Exemplar, se *series, lo, hi int64) []Exemplar {
	ex := sh.ex[se]
	lo = max(lo, hi-int64(len(ex))+1) // older slots share positions with these, held no longer
	for i := lo; i <= hi; i++ {
		if e := &ex[se.ring.pos(i)]; e.idx == i {
			dst = append(dst, e.Exemplar)
		}
	}
	return dst
}
