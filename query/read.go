package query

import (
	"context"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/internal/suggest"
	"github.com/slide-metrics/slide/jsonenc"
	"github.com/slide-metrics/slide/window"
)

var nan = math.NaN()

// handleWindow serves GET /v1/window?metric=&key=&match=&by=&window=&q=: one series' window
// aggregate, or the merge of every series a glob key and match= select; with by=, one
// aggregate per group of the selected series ("groups").
func (s *Server) handleWindow(w http.ResponseWriter, r *http.Request) {
	v, metric, sl, allowPartial, err := seriesParams(r.URL.RawQuery, "metric", "key", "match", "by", "window", "q", "partial")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	win, err := parseWindow(v.Get("window"), s.store.RingConfig(metric), metric)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	qs, err := quantilesParam(v, s.cfg.Quantiles)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	now := s.now()
	var agg window.Agg
	var groups []window.Group
	var missing []int32
	if c := s.cluster(); c != nil {
		var p window.Partial
		if sl.match == "" && sl.by == nil {
			missing, err = c.Merge(r.Context(), now, metric, sl.key, win, len(qs) > 0, &p)
		} else {
			missing, groups, err = s.clusterSelected(r.Context(), c, now, metric, sl, win, qs, &p)
		}
		if err == nil && !s.covered(w, c, missing, allowPartial) {
			return
		}
		if err == nil && sl.by == nil {
			if p.Series == 0 {
				err = window.ErrNotFound
			} else {
				agg = p.Agg(s.store.Indexer(metric), qs)
			}
		}
	} else {
		sc := s.scan(r)
		if sl.by != nil {
			groups, err = s.store.ReadGroups(now, metric, sl.sel, sl.by, win, qs, sc.stop)
		} else {
			agg, err = s.store.ReadSelected(now, metric, sl.sel, win, qs, sc.stop)
		}
		if sc.gone() {
			return // the client is gone, or Config.ReadTimeout passed (wrap answers that)
		}
	}
	if r.Context().Err() != nil {
		return // a cluster read stopped early: its answer is partial
	}
	if err != nil {
		s.writeReadErr(w, r, err, metric, sl)
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := appendHead((*bp)[:0], metric, `,"key":`, sl.key, win)
	b = appendSelection(b, sl.match, sl.by)
	if sl.by != nil {
		b = append(b, `,"groups":[`...)
		for i, g := range groups {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLabels(append(b, '{'), g.Labels)
			b = appendAgg(append(b, ','), g.Agg, now, qs)
			b = append(b, '}')
		}
		b = append(b, ']')
		b = appendAbsentBy(b, metric, sl.by, len(groups), func(i int) []window.Label { return groups[i].Labels })
	} else {
		b = append(b, ',')
		b = appendAgg(b, agg, now, qs)
	}
	b = appendPartialFlag(b, missing)
	b = append(b, "}\n"...)
	writeJSON(w, http.StatusOK, b)
	putBuf(bp, b)
}

// clusterSelected is a /v1/window read of match= or by= across instances
// (Cluster.MergeGroups): each instance folds the series it holds into their groups, and the
// groups merge here, into p when the read is not grouped (one group of every selected
// series), else returned with their quantiles qs read. The answer is exactly a single
// store's.
func (s *Server) clusterSelected(ctx context.Context, c Cluster, now int64, metric string, sl selection, win time.Duration, qs []float64, p *window.Partial) ([]int32, []window.Group, error) {
	bins := len(qs) > 0
	g, err := window.NewGroupPartials(sl.by, bins)
	if err != nil {
		return nil, nil, err
	}
	missing, err := c.MergeGroups(ctx, now, metric, sl.key, sl.ms, win, bins, g)
	if err != nil {
		return missing, nil, err
	}
	if sl.by == nil {
		if g.Len() > 0 {
			*p = g.Sorted()[0].Partial
		}
		return missing, nil, nil
	}
	if g.Len() == 0 {
		return missing, nil, window.ErrNotFound
	}
	return missing, g.Groups(s.store.Indexer(metric), qs), nil
}

func quote(s string) string { return string(jsonenc.AppendString(nil, s)) }

// appendHead opens the answer of a window read: {"metric":..,"key":..,"window":".." (member
// is the second member's name, `,"key":` or /v1/top's `,"by":`).
func appendHead(b []byte, metric, member, value string, win time.Duration) []byte {
	b = append(b, `{"metric":`...)
	b = jsonenc.AppendString(b, metric)
	b = append(b, member...)
	b = jsonenc.AppendString(b, value)
	b = append(b, `,"window":`...)
	return jsonenc.AppendString(b, window.FormatDuration(win))
}

// appendSpan writes the members that place an answer (no braces, no leading comma): from,
// to (unix ms) and series, how many series it merges.
func appendSpan(b []byte, from, to int64, series int) []byte {
	b = append(b, `"from":`...)
	b = appendInt(b, from)
	b = append(b, `,"to":`...)
	b = appendInt(b, to)
	b = append(b, `,"series":`...)
	return appendInt(b, int64(series))
}

// appendAgg writes the members of an aggregate (no braces): from, to, series, count, sum,
// avg, min, max, rate_per_s, elapsed_s (rate_per_s's denominator) and quantiles. An empty window has count 0, sum 0, rate 0 and
// null avg, min, max and quantiles, since JSON has no NaN.
func appendAgg(b []byte, a window.Agg, now int64, qs []float64) []byte {
	return appendStats(appendSpan(b, a.From, a.To, a.Series), a, now, qs)
}

// appendStats writes count .. quantiles, each member preceded by a comma.
func appendStats(b []byte, a window.Agg, now int64, qs []float64) []byte {
	return appendStatsKeyed(b, a, now, qs, nil)
}

// quantileKeys holds the member names of quantiles ("0.95":), formatted once for an answer
// of many points, such as /v1/range's.
type quantileKeys struct {
	end [maxQuantiles]int
	buf [maxQuantiles * 8]byte
}

// keysFor formats qs' member names into k and returns it, or nil when they do not fit
// (then appendStatsKeyed formats them as it goes).
func (k *quantileKeys) keysFor(qs []float64) *quantileKeys {
	if len(qs) > maxQuantiles {
		return nil
	}
	n := 0
	for i, q := range qs {
		var one [40]byte
		key := append(formatQuantile(append(one[:0], '"'), q), `":`...)
		if n+len(key) > len(k.buf) {
			return nil
		}
		n += copy(k.buf[n:], key)
		k.end[i] = n
	}
	return k
}

// key returns the member name of the i-th quantile, quote, colon and all.
func (k *quantileKeys) key(i int) []byte {
	from := 0
	if i > 0 {
		from = k.end[i-1]
	}
	return k.buf[from:k.end[i]]
}

// appendStatsKeyed is appendStats with the quantiles' member names from keys (nil: formatted
// here).
func appendStatsKeyed(b []byte, a window.Agg, now int64, qs []float64, keys *quantileKeys) []byte {
	b = append(b, `,"count":`...)
	b = appendUint(b, a.Count)
	b = append(b, `,"sum":`...)
	b = jsonenc.AppendFloat(b, a.Sum)
	b = append(b, `,"avg":`...)
	b = jsonenc.AppendFloat(b, a.Avg())
	mn, mx := a.Min, a.Max
	if a.Count == 0 {
		mn, mx = nan, nan
	}
	b = append(b, `,"min":`...)
	b = jsonenc.AppendFloat(b, mn)
	b = append(b, `,"max":`...)
	b = jsonenc.AppendFloat(b, mx)
	b = append(b, `,"rate_per_s":`...)
	b = jsonenc.AppendFloat(b, a.RatePerSec(now))
	b = append(b, `,"elapsed_s":`...)
	b = jsonenc.AppendFloat(b, a.ElapsedSec(now))
	b = append(b, `,"quantiles":{`...)
	for i, q := range qs {
		if i > 0 {
			b = append(b, ',')
		}
		if keys != nil {
			b = append(b, keys.key(i)...)
		} else {
			b = append(b, '"')
			b = formatQuantile(b, q)
			b = append(b, `":`...)
		}
		b = jsonenc.AppendFloat(b, a.Quantile(i, q))
	}
	return append(b, '}')
}

// cursor encoding: base64url of metric NUL key, the last series of the previous page.
// Pages continue after it by value, so series created or evicted between pages neither
// shift nor repeat the ones already returned.
func encodeCursor(metric, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(metric + "\x00" + key))
}

func decodeCursor(c string) (metric, key string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", badParam("cursor", "not a cursor returned by this API")
	}
	m, k, ok := strings.Cut(string(raw), "\x00")
	if !ok {
		return "", "", badParam("cursor", "not a cursor returned by this API")
	}
	return m, k, nil
}

// handleSeries serves GET /v1/series?metric=&prefix=&match=&limit=&cursor=: the series of
// metric (or of every metric when absent) whose key starts with prefix and that match=
// selects, sorted by metric then series string, limit at a time. "next" is the cursor of
// the following page, absent on the last one. A series' "key" is its key, followed by
// "labels" when it has labels.
func (s *Server) handleSeries(w http.ResponseWriter, r *http.Request) {
	v, err := parseParams(r.URL.RawQuery, "metric", "prefix", "match", "limit", "cursor", "partial")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	allowPartial, err := parsePartial(v)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	sel, ms, err := selectorParam(v, "")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	limit, err := parseInt(v, "limit", min(DefaultSeriesLimit, s.cfg.MaxSeriesLimit), 1, s.cfg.MaxSeriesLimit)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	var afterM, afterK string
	hasCursor := false
	if c := v.Get("cursor"); c != "" {
		if afterM, afterK, err = decodeCursor(c); err != nil {
			s.writeErr(w, r, err)
			return
		}
		hasCursor = true
	}
	metric, prefix := v.Get("metric"), v.Get("prefix")
	type entry struct{ metric, key string }
	page := make([]entry, 0, min(limit, 256))
	more := false
	var missing []int32
	// The page and one more (to know whether another follows), strictly after the cursor:
	// chosen while the series are scanned (window.SeriesPage), not by sorting them all; in
	// a cluster each instance sends at most that many.
	var after *window.SeriesID
	if hasCursor {
		after = &window.SeriesID{Metric: afterM, Key: afterK}
	}
	var ids []window.SeriesID
	sc := s.scan(r)
	c := s.cluster()
	if c != nil {
		ids, missing, err = c.Keys(r.Context(), metric, prefix, ms, after, limit+1)
	} else {
		sp := window.NewSeriesPage(after, limit+1)
		s.store.EachSeries(func(m, k string, _ int32) {
			if !sc.stop() && (metric == "" || m == metric) && strings.HasPrefix(k, prefix) && sel.Match(k) {
				sp.Offer(m, k)
			}
		})
		ids = sp.IDs()
	}
	if sc.gone() {
		return // the client is gone: nobody reads an answer
	}
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if c != nil && !s.covered(w, c, missing, allowPartial) {
		return
	}
	for _, id := range ids {
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, entry{id.Metric, id.Key})
	}
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], `{"metric":`...)
	b = jsonenc.AppendString(b, metric)
	b = append(b, `,"prefix":`...)
	b = jsonenc.AppendString(b, prefix)
	b = appendSelection(b, v.Get("match"), nil)
	b = append(b, `,"series":[`...)
	for i, e := range page {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":`...)
		b = jsonenc.AppendString(b, e.metric)
		b = appendSeriesKey(append(b, ','), e.key)
		b = append(b, '}')
	}
	b = append(b, ']')
	if more {
		last := page[len(page)-1]
		b = append(b, `,"next":`...)
		b = jsonenc.AppendString(b, encodeCursor(last.metric, last.key))
	}
	b = appendPartialFlag(b, missing)
	b = append(b, "}\n"...)
	writeJSON(w, http.StatusOK, b)
	putBuf(bp, b)
}

// handleMetrics serves GET /v1/metrics?partial=: every metric with live series, its series
// count and its ring (slot width, slots, retention). The dashboard starts here, every 5 s,
// with partial=allow: an instance of the group down must not blank the page of the others.
// It costs one pass over the series (window.Store.MetricSeries), not one per metric (8.1 s
// at 20,000 metrics before), and stops when the client goes.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	v, err := parseParams(r.URL.RawQuery, "partial")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	allowPartial, err := parsePartial(v)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	var list []window.MetricCount
	var missing []int32
	if c := s.cluster(); c != nil {
		var ids []window.SeriesID
		ids, missing, err = c.Keys(r.Context(), "", "", nil, nil, 0)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if !s.covered(w, c, missing, allowPartial) {
			return
		}
		counts := map[string]int{}
		for _, id := range ids {
			counts[id.Metric]++
		}
		for m, n := range counts {
			list = append(list, window.MetricCount{Metric: m, Series: n})
		}
		slices.SortFunc(list, func(a, b window.MetricCount) int { return strings.Compare(a.Metric, b.Metric) })
	} else if list, err = s.store.MetricSeries(r.Context()); err != nil {
		return // the client has gone: nobody reads an answer
	}
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], `{"metrics":[`...)
	var shape window.RingConfig
	var ring []byte // the ring's fields, as last written
	for i, mc := range list {
		if i%1024 == 1023 && r.Context().Err() != nil {
			putBuf(bp, b)
			return
		}
		m := mc.Metric
		rc := s.store.RingConfig(m)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = jsonenc.AppendString(b, m)
		b = append(b, `,"series":`...)
		b = appendInt(b, int64(mc.Series))
		if i == 0 || rc.Slot != shape.Slot || rc.Slots != shape.Slots { // most metrics share the default ring
			shape = rc
			ring = append(ring[:0], `,"slot":`...)
			ring = jsonenc.AppendString(ring, window.FormatDuration(rc.Slot))
			ring = append(ring, `,"slots":`...)
			ring = appendInt(ring, int64(rc.Slots))
			ring = append(ring, `,"retention":`...)
			ring = jsonenc.AppendString(ring, window.FormatDuration(rc.Retention()))
			ring = append(ring, '}')
		}
		b = append(b, ring...)
	}
	b = append(b, ']')
	b = appendPartialFlag(b, missing)
	b = append(b, "}\n"...)
	writeJSON(w, http.StatusOK, b)
	putBuf(bp, b)
}

// writeReadErr answers the error of a read of metric and the selection sl: 404 when it found
// no series (for a pattern, match= or by=: "no series matches"), which /v1/window and
// /v1/range say the same way, else as writeErr.
func (s *Server) writeReadErr(w http.ResponseWriter, r *http.Request, err error, metric string, sl selection) {
	if !errors.Is(err, window.ErrNotFound) {
		s.writeErr(w, r, err)
		return
	}
	if msg, ok := s.unknownMetric(r.Context(), metric); ok {
		httperr.Write(w, httperr.NotFound, "", msg)
		return
	}
	what := "no series"
	if window.IsKeyPattern(sl.key) || sl.match != "" || sl.by != nil {
		what = "no series matches"
	}
	msg := what + " metric=" + quote(clip(metric)) + " key=" + quote(clip(sl.key))
	if sl.match != "" {
		msg += " match=" + quote(clip(sl.match)) + s.absentLabel(r.Context(), metric, sl.ms)
	}
	httperr.Write(w, httperr.NotFound, "", msg)
}

// unknownMetric says, when metric has no series at all here, which metrics there are, the
// closest to it first (metric=latency: "known metrics: latency_ms, cost"), at most 10 of
// them; ok is false when metric has series (the key or selection found none). One pass over
// the store's series, taken only on this 404.
func (s *Server) unknownMetric(ctx context.Context, metric string) (msg string, ok bool) {
	counts, err := s.store.MetricSeries(ctx)
	if err != nil {
		return "", false
	}
	names := make([]string, 0, len(counts))
	for _, c := range counts {
		if c.Metric == metric {
			return "", false
		}
		names = append(names, c.Metric)
	}
	msg = "no metric " + quote(clip(metric))
	if len(names) == 0 {
		return msg + "; this instance holds no series yet", true
	}
	ordered, near := names, 0
	if len(metric) <= 256 { // no metric is longer (event.Config.MaxKeyLen's default): no distance to take
		ordered, near = suggest.Closest(metric, names)
	}
	if near > 0 {
		msg += " (did you mean " + quote(ordered[0]) + "?)"
	}
	if len(ordered) > 10 {
		ordered = append(ordered[:10], "…")
	}
	return msg + "; known metrics: " + strings.Join(ordered, ", "), true
}
