package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// The slot read (opSlots) is what promapi's Queryable reads through the cluster: every
// live slot of each series a selector matches, as window.Store.VisitSlots hands them, for
// PromQL's one sample per slot end. Unlike the other ops it cannot merge on the owner: a
// series' samples are cumulative over its slots, so the asker needs each slot. The answer
// (after the served partitions):
//
//	n (series cur nslots (back count sum min max bins)*nslots)*n
//
// series a string, cur a varint (the slot current at the read's now, the asker's clock), back a uvarint
// (cur − the slot's index; strictly decreasing, so indices ascend), count a uvarint (never
// 0: VisitSlots hands live slots only), sum, min and max 8 bytes each little endian, bins a
// length-prefixed sketch.Bins encoding (the slot's bins, unpacked: the encoding every other
// answer's bins travel in). Only slots up to the one holding the read's instant are sent:
// PromQL never samples a later one. Earlier slots are all sent, whatever the query's start,
// since a series' value at any instant sums every slot of the retention before it.

// maxSlotBack bounds how far back of cur a decoded slot may be, and maxSlotIndex cur
// itself, so index arithmetic cannot overflow whatever a hostile answer says.
const (
	maxSlotBack  = 1 << 32
	maxSlotIndex = 1 << 53
)

// slotSeries is one series of an opSlots answer.
type slotSeries struct {
	series string
	cur    int64
	slots  []window.SlotView
}

// peerInstant reads a slot read's instant (at, unix ms, at most now) and its selector (key
// and the m parameters), for opSlots and opExtents.
func peerInstant(q url.Values, now int64, key string) (int64, *window.Selector, error) {
	at, err := strconv.ParseInt(q.Get("at"), 10, 64)
	if err != nil || at > now {
		return 0, nil, errors.New("bad at: an instant (unix ms) at most now")
	}
	sel, err := peerSelector(q, key)
	return at, sel, err
}

// appendSlots serves an opSlots request: the slots up to the request's at (an instant at
// most its now) of the rings as they stand at its now (a ring no event moved since still
// holds slots the retention at now has evicted, which a past instant must not read) of the series of metric that key and the m parameters select, fed by parts.
func (c *Cluster) appendSlots(ctx context.Context, b []byte, q url.Values, now int64, metric, key string, parts map[int32]bool) ([]byte, error) {
	at, sel, err := peerInstant(q, now, key)
	if err != nil {
		return b, err
	}
	width := c.cfg.Store.RingConfig(metric).Slot.Milliseconds()
	last := window.FloorDiv(at, width)
	var body []byte
	var scratch sketch.Bins
	n := 0
	c.cfg.Store.VisitSlotsIn(now, metric, sel, func(p int32) bool { return p >= 0 && parts[p] }, ctxStop(ctx), func(series string, cur int64, slots []window.SlotView) bool {
		k := 0
		for k < len(slots) && slots[k].Index <= last {
			k++
		}
		if k == 0 {
			return true
		}
		n++
		body = appendSlotSeries(body, series, cur, slots[:k], &scratch)
		return true
	})
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, body...), nil
}

// appendSlotSeries writes one series of an opSlots answer; scratch unpacks packed bins.
func appendSlotSeries(b []byte, series string, cur int64, slots []window.SlotView, scratch *sketch.Bins) []byte {
	b = appendString(b, series)
	b = binary.AppendVarint(b, cur)
	b = binary.AppendUvarint(b, uint64(len(slots)))
	for _, s := range slots {
		b = binary.AppendUvarint(b, uint64(cur-s.Index))
		b = binary.AppendUvarint(b, s.Count)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.Sum))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.Min))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.Max))
		n := len(b)
		b = binary.AppendUvarint(b, 0) // the bins' length, a placeholder while short
		start := len(b)
		b, _ = s.Bins.View(scratch).AppendBinary(b) // never fails
		if l := binary.AppendUvarint(nil, uint64(len(b)-start)); len(l) == 1 {
			b[n] = l[0]
		} else {
			bins := append([]byte(nil), b[start:]...)
			b = append(append(b[:n], l...), bins...)
		}
	}
	return b
}

// ctxStop is a VisitSlots stop that says true once ctx is done, looking every scanCheck
// series (the first included).
func ctxStop(ctx context.Context) func() bool {
	n := 0
	return func() bool {
		n++
		return (n-1)%scanCheck == 0 && ctx.Err() != nil
	}
}

// slotSeriesList decodes an opSlots answer's body.
func (r *reader) slotSeriesList() []slotSeries {
	n := r.count("series")
	out := make([]slotSeries, 0, n)
	for range n {
		s := slotSeries{series: string(r.bytes("series")), cur: r.varint("cur")}
		if r.err == nil && (s.cur > maxSlotIndex || s.cur < -maxSlotIndex) {
			r.fail("slot %d out of range", s.cur)
		}
		k := r.count("slots")
		if r.err != nil {
			return nil
		}
		s.slots = make([]window.SlotView, 0, k)
		for range k {
			back := r.uvarint("slot")
			count := r.uvarint("count")
			sum, mn, mx := r.float("sum"), r.float("min"), r.float("max")
			raw := r.bytes("bins")
			if r.err != nil {
				return nil
			}
			idx := s.cur - int64(min(back, maxSlotBack))
			switch {
			case back > maxSlotBack:
				r.fail("slot %d before the current one", back)
			case len(s.slots) > 0 && idx <= s.slots[len(s.slots)-1].Index:
				r.fail("slot %d after %d: not ascending", idx, s.slots[len(s.slots)-1].Index)
			case count == 0:
				r.fail("slot %d: empty", idx)
			case math.IsNaN(sum) || math.IsNaN(mn) || math.IsNaN(mx) || mn > mx:
				r.fail("slot %d: sum %v, min %v, max %v: not a slot", idx, sum, mn, mx)
			}
			bins := new(sketch.Bins)
			if r.err == nil {
				if err := bins.UnmarshalBinary(raw); err != nil {
					r.fail("slot %d: %v", idx, err)
				} else if c := bins.Count(); c != count {
					r.fail("slot %d: %d values in its bins, count %d", idx, c, count)
				}
			}
			if r.err != nil {
				return nil
			}
			s.slots = append(s.slots, window.SlotView{Index: idx, Count: count, Sum: sum, Min: mn, Max: mx, Bins: sketch.SlotOf(bins)})
		}
		out = append(out, s)
	}
	return out
}

// mergeSlots merges two series' slots (each ascending) slot by slot: counts and sums add,
// min and max compare, bins add. Slots before the retention of cur (n slots) are left out.
func mergeSlots(a, b []window.SlotView, cur, n int64) []window.SlotView {
	out := make([]window.SlotView, 0, len(a)+len(b))
	lo := cur - n + 1
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var s window.SlotView
		switch {
		case j == len(b) || i < len(a) && a[i].Index < b[j].Index:
			s = a[i]
			i++
		case i == len(a) || b[j].Index < a[i].Index:
			s = b[j]
			j++
		default:
			x, y := a[i], b[j]
			i, j = i+1, j+1
			bins := new(sketch.Bins)
			x.Bins.AddTo(bins)
			y.Bins.AddTo(bins)
			s = window.SlotView{Index: x.Index, Count: x.Count + y.Count, Sum: x.Sum + y.Sum,
				Min: min(x.Min, y.Min), Max: max(x.Max, y.Max), Bins: sketch.SlotOf(bins)}
		}
		if s.Index >= lo {
			out = append(out, s)
		}
	}
	return out
}

// VisitSlots calls fn once for each series of metric that the label matchers ms select
// (the key label among them), held by any instance, with its live slots at the instant at
// (unix ms, at most wall) as window.Store.VisitSlots hands them at wall, cut after the
// slot holding at: this instance's series of
// the partitions it serves (and those fed by no partition) straight from its store, under
// the series' lock (fn must copy what it keeps), and the peers' series of the others
// (opSlots), asked in parallel before the local visit. A series string two sources hold is
// merged slot by slot. wall is the clock's now, which the peers hold within the ring's skew
// of theirs; only slots up to the one holding at are handed. fn returns false to stop.
// missing lists the partitions no instance served; err is the selector's or ctx's.
func (c *Cluster) VisitSlots(ctx context.Context, wall, at int64, metric string, ms []window.Matcher, fn func(series string, cur int64, slots []window.SlotView) bool) (missing []int32, err error) {
	return c.VisitSlotsKey(ctx, wall, at, metric, "", ms, fn)
}

// VisitSlotsKey is VisitSlots with the key parameter of the query API beside the matchers:
// an exact key, a glob or "" (every key), which each owner applies as window.CompileSelector
// does (query.Cluster: /v1/range's history of every partition).
func (c *Cluster) VisitSlotsKey(ctx context.Context, wall, at int64, metric, key string, ms []window.Matcher, fn func(series string, cur int64, slots []window.SlotView) bool) (missing []int32, err error) {
	sel, err := window.CompileSelector(key, ms)
	if err != nil {
		return nil, err
	}
	if at > wall {
		return nil, fmt.Errorf("cluster: slot read at %d, after now %d", at, wall)
	}
	local, gen := c.localSet()
	remote := map[string]*slotSeries{}
	n := int64(c.cfg.Store.RingConfig(metric).Slots)
	r := request{op: opSlots, metric: metric, key: key, ms: ms, now: wall, at: at}
	missing = c.fanout(ctx, r, local, func(a *answer) {
		for i := range a.slots {
			s := &a.slots[i]
			if q, ok := remote[s.series]; ok {
				q.cur = max(q.cur, s.cur)
				q.slots = mergeSlots(q.slots, s.slots, q.cur, n)
				continue
			}
			remote[s.series] = s
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	width := c.cfg.Store.RingConfig(metric).Slot.Milliseconds()
	last := window.FloorDiv(at, width)
	stopped := false
	c.cfg.Store.VisitSlotsIn(wall, metric, sel, func(p int32) bool { return p < 0 || local[p] }, ctxStop(ctx), func(series string, cur int64, slots []window.SlotView) bool {
		k := len(slots)
		for k > 0 && slots[k-1].Index > last {
			k--
		}
		slots = slots[:k]
		if q, ok := remote[series]; ok {
			delete(remote, series)
			cur = max(cur, q.cur)
			slots = mergeSlots(slots, q.slots, cur, n)
		}
		stopped = !fn(series, cur, slots)
		return !stopped
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !stopped {
		keys := make([]string, 0, len(remote))
		for k := range remote {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s := remote[k]; !fn(s.series, s.cur, s.slots) {
				break
			}
		}
	}
	return c.settle(gen, local, missing), nil
}

// Metrics lists the metrics any instance holds, sorted: this store's and each peer's
// (opMetrics). missing lists the partitions no instance answered for.
func (c *Cluster) Metrics(ctx context.Context) (metrics []string, missing []int32) {
	local, gen := c.localSet()
	metrics = c.cfg.Store.Metrics()
	missing = c.fanout(ctx, request{op: opMetrics}, local, func(a *answer) {
		metrics = append(metrics, a.names...)
	})
	slices.Sort(metrics)
	return slices.Compact(metrics), c.settle(gen, local, missing)
}
