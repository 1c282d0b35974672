package cluster

import (
	"cmp"
	"context"
	"encoding/binary"
	"maps"
	"math"
	"net/url"
	"slices"

	"github.com/slide-metrics/slide/window"
)

// The exemplar read (opExemplars) is what promapi's query_exemplars reads through the
// cluster: each series a selector matches, with its exemplars (window.Store.VisitExemplars:
// each slot's slowest span), of the partitions the owner serves. The answer (after the
// served partitions):
//
//	n (series nex (ts value trace span)*nex)*n
//
// series a string, nex a uvarint (never 0), ts a varint (unix ms, ascending), value 8 bytes
// little endian (never NaN), trace 16 bytes (never all zero) and span 8. An older peer
// answers "unknown op": its partitions count as missing, as for any peer that does not answer.

// exemplarSeries is one series of an opExemplars answer.
type exemplarSeries struct {
	series string
	ex     []window.Exemplar
}

// appendExemplars serves an opExemplars request: the exemplars at now of the series of
// metric that key and the m parameters select, fed by parts.
func (c *Cluster) appendExemplars(ctx context.Context, b []byte, q url.Values, now int64, metric, key string, parts map[int32]bool) ([]byte, error) {
	sel, err := peerSelector(q, key)
	if err != nil {
		return b, err
	}
	var body []byte
	n := 0
	c.cfg.Store.VisitExemplars(now, metric, sel, func(p int32) bool { return p >= 0 && parts[p] }, ctxStop(ctx), func(series string, ex []window.Exemplar) bool {
		n++
		body = appendExemplarSeries(body, series, ex)
		return true
	})
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, body...), nil
}

// appendExemplarSeries writes one series of an opExemplars answer.
func appendExemplarSeries(b []byte, series string, ex []window.Exemplar) []byte {
	b = appendString(b, series)
	b = binary.AppendUvarint(b, uint64(len(ex)))
	for _, e := range ex {
		b = binary.AppendVarint(b, e.TS)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.Value))
		b = append(b, e.TraceID[:]...)
		b = append(b, e.SpanID[:]...)
	}
	return b
}

// exemplarSeriesList decodes an opExemplars answer's body.
func (r *reader) exemplarSeriesList() []exemplarSeries {
	n := r.count("series")
	out := make([]exemplarSeries, 0, n)
	for range n {
		s := exemplarSeries{series: string(r.bytes("series"))}
		k := r.count("exemplars")
		if r.err == nil && k == 0 {
			r.fail("series %q: no exemplars", clip(s.series))
		}
		if r.err != nil {
			return nil
		}
		s.ex = make([]window.Exemplar, 0, min(k, len(r.p)/33))
		for range k {
			var e window.Exemplar
			e.TS = r.varint("ts")
			e.Value = r.float("value")
			if r.err == nil && len(r.p) < 24 {
				r.fail("reading exemplar ids: short input")
			}
			if r.err != nil {
				return nil
			}
			copy(e.TraceID[:], r.p)
			copy(e.SpanID[:], r.p[16:])
			r.p = r.p[24:]
			switch {
			case math.IsNaN(e.Value):
				r.fail("exemplar at %d: value NaN", e.TS)
			case e.TraceID == [16]byte{}:
				r.fail("exemplar at %d: no trace id", e.TS)
			case len(s.ex) > 0 && e.TS < s.ex[len(s.ex)-1].TS:
				r.fail("exemplar at %d after %d: not ascending", e.TS, s.ex[len(s.ex)-1].TS)
			}
			if r.err != nil {
				return nil
			}
			s.ex = append(s.ex, e)
		}
		out = append(out, s)
	}
	return out
}

// VisitExemplars calls fn once for each series of metric that the label matchers ms
// select, held by any instance, with its exemplars at wall (the clock's now), oldest first,
// as window.Store.VisitExemplars hands them: this instance's series of the partitions it
// serves (and those fed by no partition) under the series' lock (fn must copy what it
// keeps), and the peers' series of the others (opExemplars), asked in parallel before the
// local visit. A series string two sources hold (a key spread over partitions) keeps, per
// slot, the one exemplar of the two that one store holding both would keep
// (window.Exemplar.Before). fn returns false to stop. missing lists the partitions
// no instance served; err is the selector's or ctx's.
func (c *Cluster) VisitExemplars(ctx context.Context, wall int64, metric string, ms []window.Matcher, fn func(series string, ex []window.Exemplar) bool) (missing []int32, err error) {
	sel, err := window.CompileSelector("", ms)
	if err != nil {
		return nil, err
	}
	local, gen := c.localSet()
	remote := map[string][]window.Exemplar{}
	r := request{op: opExemplars, metric: metric, ms: ms, now: wall}
	missing = c.fanout(ctx, r, local, func(a *answer) {
		for _, s := range a.exemplars {
			remote[s.series] = append(remote[s.series], s.ex...)
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	width := c.cfg.Store.RingConfig(metric).Slot.Milliseconds()
	stopped := false
	c.cfg.Store.VisitExemplars(wall, metric, sel, func(p int32) bool { return p < 0 || local[p] }, ctxStop(ctx), func(series string, ex []window.Exemplar) bool {
		if q, ok := remote[series]; ok {
			delete(remote, series)
			ex = mergeExemplars(append(slices.Clone(ex), q...), width)
		}
		stopped = !fn(series, ex)
		return !stopped
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !stopped {
		for _, k := range slices.Sorted(maps.Keys(remote)) {
			if !fn(k, mergeExemplars(remote[k], width)) {
				break
			}
		}
	}
	return c.settle(gen, local, missing), nil
}

// mergeExemplars keeps, of ex (one series' exemplars from several sources), the one of each
// slot of width ms that Exemplar.Before puts first, in time order.
func mergeExemplars(ex []window.Exemplar, width int64) []window.Exemplar {
	slot := func(e window.Exemplar) int64 { return window.FloorDiv(e.TS, width) }
	slices.SortFunc(ex, func(a, b window.Exemplar) int {
		if c := cmp.Compare(slot(a), slot(b)); c != 0 {
			return c
		}
		switch {
		case a.Before(b):
			return -1
		case b.Before(a):
			return 1
		}
		return 0
	})
	out := ex[:0]
	for i, e := range ex {
		if i == 0 || slot(e) != slot(ex[i-1]) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b window.Exemplar) int { return cmp.Compare(a.TS, b.TS) })
	return out
}
