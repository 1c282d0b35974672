package query

import (
	"cmp"
	"container/heap"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/jsonenc"
	"github.com/slide-metrics/slide/window"
)

// topEntry is one ranked series.
type topEntry struct {
	key   string
	value float64
	agg   window.Agg
}

// less orders entries by value, then by key descending, so that the heap's minimum is the
// entry to drop and the final order is value descending, key ascending.
func (e topEntry) less(o topEntry) bool {
	if e.value != o.value {
		return e.value < o.value
	}
	return e.key > o.key
}

// topHeap is a min-heap of the k best entries so far.
type topHeap []topEntry

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h topHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topHeap) Push(x any)        { *h = append(*h, x.(topEntry)) }
func (h *topHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// handleTop serves GET /v1/top?metric=&by=&window=&k=&q=&key=&match=: the k series of metric
// with the largest value of by over the window. Series with an empty window are skipped.
// Ties are broken by key (the series string), ascending. key (a glob) and match= (label
// matchers) narrow the series considered; q adds quantiles to each entry. An entry's "key"
// is its series' key, followed by "labels" when the series has labels. The cost is one
// window read per series of the metric.
func (s *Server) handleTop(w http.ResponseWriter, r *http.Request) {
	v, err := parseParams(r.URL.RawQuery, "metric", "by", "window", "k", "q", "key", "match", "partial")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	allowPartial, err := parsePartial(v)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	metric, err := required(v, "metric")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	// byName is echoed as the client wrote it (lowercased): "0.95" stays "0.95", "p95" "p95".
	by, byName := window.Stat{Kind: window.StatCount}, "count"
	if b := v.Get("by"); b != "" {
		var ok bool
		if by, ok = window.ParseStat(b); !ok {
			s.writeErr(w, r, badParam("by", "%q is not one of %s or a percentile such as p95", clip(b), window.StatNames))
			return
		}
		byName = strings.ToLower(strings.TrimSpace(b))
	}
	win, err := parseWindow(v.Get("window"), s.store.RingConfig(metric), metric)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	k, err := parseInt(v, "k", DefaultTopK, 1, s.cfg.MaxTopK)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	qs, err := quantilesParam(v, nil)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	// The ranking quantile is read with the others; it is always first.
	readQs := qs
	if by.Kind == window.StatQuantile {
		readQs = append([]float64{by.Q}, slices.DeleteFunc(slices.Clone(qs), func(q float64) bool { return q == by.Q })...)
	}
	pattern := v.Get("key")
	if err := checkKeyPattern("key", pattern); err != nil {
		s.writeErr(w, r, err)
		return
	}
	sel, _, err := selectorParam(v, pattern)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	now := s.now()
	var h topHeap
	matched := 0
	var from, to int64
	spanKnown := false
	consider := func(key string, a window.Agg) {
		matched++
		if !spanKnown {
			from, to, spanKnown = a.From, a.To, true
		}
		if a.Count == 0 {
			return
		}
		e := topEntry{key: key, value: by.Value(a, now, 0), agg: a}
		if math.IsNaN(e.value) {
			return
		}
		if len(h) < k {
			heap.Push(&h, e)
		} else if h[0].less(e) {
			h[0] = e
			heap.Fix(&h, 0)
		}
	}
	var missing []int32
	sc := s.scan(r)
	cl := s.cluster() // once: a rebalance between two calls must not read both ways
	if c := cl; c != nil {
		ix := s.store.Indexer(metric)
		missing, err = c.Each(r.Context(), now, metric, pattern, win, len(readQs) > 0, func(key string, p *window.Partial) {
			if !sc.stop() && sel.Match(key) {
				consider(key, p.Agg(ix, readQs))
			}
		})
		if sc.gone() {
			return // the client is gone: stop reading
		}
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if !s.covered(w, c, missing, allowPartial) {
			return
		}
	}
	var keys []string
	if cl == nil {
		keys = s.store.Keys(metric, window.KeyPatternPrefix(pattern))
		h = make(topHeap, 0, min(k, len(keys)))
	}
	for _, key := range keys {
		if sc.stop() {
			return // the client is gone, or Config.ReadTimeout passed (wrap answers that)
		}
		if !sel.Match(key) {
			continue
		}
		a, err := s.store.ReadAt(now, metric, key, win, readQs)
		if errors.Is(err, window.ErrNotFound) {
			continue // evicted since Keys
		}
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		consider(key, a)
	}
	if matched == 0 {
		// A metric with no series anywhere is a mistake to name (metric=latency for
		// latency_ms); one that has series but none selected is an empty ranking.
		if msg, ok := s.unknownMetric(r.Context(), metric); ok {
			httperr.Write(w, httperr.NotFound, "", msg)
			return
		}
	}
	if !spanKnown {
		from, to = s.store.RingConfig(metric).Span(now, win)
	}
	slices.SortFunc(h, func(a, b topEntry) int {
		if c := cmp.Compare(b.value, a.value); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})

	bp := bufPool.Get().(*[]byte)
	b := appendHead((*bp)[:0], metric, `,"by":`, byName, win)
	b = appendSelection(b, v.Get("match"), nil)
	b = appendSpan(append(b, ','), from, to, matched)
	b = append(b, `,"top":[`...)
	for i, e := range h {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSeriesKey(append(b, '{'), e.key)
		b = append(b, `,"value":`...)
		b = jsonenc.AppendFloat(b, e.value)
		b = appendStats(b, e.agg, now, readQs)
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendPartialFlag(b, missing)
	b = append(b, "}\n"...)
	writeJSON(w, http.StatusOK, b)
	putBuf(bp, b)
}
