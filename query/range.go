package query

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/slide-metrics/slide/jsonenc"
	"github.com/slide-metrics/slide/window"
)

// handleRange serves GET /v1/range?metric=&key=&match=&by=&window=&step=&span=&q=: the
// history of one series (or of the merge of every series a glob key and match= select; with
// by=, of each group of them) from its rings alone: the window ending at the current slot
// and at every step before it, oldest first, as far back as span (default the retention, or
// the window when it is longer; at most the reach of a tiered ring). window and step default
// to the slot width (every slot of the retention, one point each). Each point within the
// retention is what /v1/window answered when that slot was current; older points come from
// the tiers, rounded to their slots (window.Ring.ReadRange states the rule); rate_per_s
// divides by the part of the point's span elapsed now.
//
// An instance holding only some partitions reads every partition's slots through the
// cluster (Cluster.VisitSlotsKey: its own and its peers', merged slot by slot, as PromQL
// reads them) and composes them as one store holding them all would (window.RangeSlots).
// Tiers do not travel between instances, so there the history covers the ring's own slots:
// a window past the retention is refused, and a span past it answers the retention with a
// warning saying so. Partitions no instance served are a 503, or flagged with partial=allow.
func (s *Server) handleRange(w http.ResponseWriter, r *http.Request) {
	v, metric, sl, allowPartial, err := seriesParams(r.URL.RawQuery, "metric", "key", "match", "by", "window", "step", "span", "q", "partial")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	rc := s.store.RingConfig(metric)
	win, err := parseSpan(v.Get("window"), "window", rc, metric)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	step, err := parseSpan(v.Get("step"), "step", rc, metric)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	span := max(rc.Retention(), win)
	if v.Get("span") != "" {
		if span, err = parseSpan(v.Get("span"), "span", rc, metric); err == nil && span < win {
			err = badParam("span", "%s is shorter than the window %s", clip(v.Get("span")), window.FormatDuration(win))
		}
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
	}
	qs, err := quantilesParam(v, s.cfg.Quantiles)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	now := s.now()
	var points []window.Agg
	var groups []window.RangeGroup
	var missing []int32
	var warnings []string
	if c := s.cluster(); c != nil {
		if ret := rc.Retention(); win > ret {
			s.writeErr(w, r, badParam("window", "%s reaches past the retention %s into the tiers, which are not read across instances: on an instance holding only some partitions a range window is at most %s",
				window.FormatDuration(win), window.FormatDuration(ret), window.FormatDuration(ret)))
			return
		}
		if ret := rc.Retention(); span > ret {
			warnings = append(warnings, "span "+window.FormatDuration(span)+" reaches past the retention "+window.FormatDuration(ret)+
				" into the tiers, which are not read across instances: this instance holds only some partitions, so the points cover the last "+
				window.FormatDuration(ret)+" (ask an instance holding every partition for the tiers)")
			span = ret
		}
		var rs *window.RangeSlots
		if rs, err = window.NewRangeSlots(rc, now, win, step, qs, sl.by); err != nil {
			s.writeErr(w, r, err)
			return
		}
		bound, ok := s.rangeBound(w, r, rs.Ends(), win, span, len(qs))
		if !ok {
			return
		}
		rs.LimitGroups(bound.groups)
		var addErr error
		missing, err = c.VisitSlotsKey(r.Context(), now, now, metric, sl.key, sl.ms, func(series string, _ int64, slots []window.SlotView) bool {
			addErr = rs.Add(series, slots)
			return addErr == nil
		})
		if err == nil && !s.covered(w, c, missing, allowPartial) {
			return
		}
		if err == nil {
			groups, err = rs.Read() // addErr, if any, is Read's ErrTooManyGroups or ErrGroupLimit
		}
		if err == nil && sl.by == nil {
			points, groups = groups[0].Points, nil
		}
		if r.Context().Err() != nil {
			return // the client is gone, or the read stopped early: its answer is partial
		}
		if errors.Is(err, window.ErrGroupLimit) {
			bound.refuse(s, w, r)
			return
		}
	} else {
		var ends []int64
		if ends, err = window.RangeEnds(rc, now, win, step); err != nil {
			s.writeErr(w, r, err)
			return
		}
		bound, ok := s.rangeBound(w, r, ends, win, span, len(qs))
		if !ok {
			return
		}
		sc := s.scan(r)
		if sl.by != nil {
			groups, err = s.store.ReadRangeGroups(now, metric, sl.sel, sl.by, win, step, qs, bound.groups, sc.stop)
		} else {
			points, err = s.store.ReadRangeSelected(now, metric, sl.sel, win, step, qs, sc.stop)
		}
		if sc.gone() {
			return // the client is gone, or Config.ReadTimeout passed (wrap answers that)
		}
		if errors.Is(err, window.ErrGroupLimit) {
			bound.refuse(s, w, r)
			return
		}
	}
	if err != nil {
		s.writeReadErr(w, r, err, metric, sl)
		return
	}
	points = withinSpan(points, win, span)
	n := len(points)
	for i := range groups {
		groups[i].Points = withinSpan(groups[i].Points, win, span)
		n += len(groups[i].Points)
	}
	if n*len(qs) > maxRangeQuantiles { // rangeBound's estimate missed (it should not)
		s.writeErr(w, r, badParam("q", "%d points × %d quantiles is %d quantile values, at most %d in one answer: ask for fewer quantiles, a longer step, or fewer groups (narrow the series with key= or match=)",
			n, len(qs), n*len(qs), maxRangeQuantiles))
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := appendRange((*bp)[:0], metric, sl, win, step, points, groups, now, qs, warnings)
	if len(missing) > 0 {
		b = append(appendPartialFlag(b[:len(b)-2], missing), "}\n"...) // before the closing brace
	}
	// Answers are several kB: with a length, net/http sends them in one piece instead of
	// chunked.
	w.Header()["Content-Length"] = []string{strconv.Itoa(len(b))}
	writeJSON(w, http.StatusOK, b)
	putBuf(bp, b)
}

// maxRangeQuantiles bounds the quantile values (points × quantiles) of one /v1/range answer.
// The store bounds a grouped read's points (groups × slots, 2^18 at most), and each quantile
// adds about 30 bytes to every point: 32 quantiles over that many points made a 120 MB
// answer, built in memory whole. The bound lets the default 3 quantiles over the most points
// the store answers, and about 25 MB of JSON at any count of quantiles.
const maxRangeQuantiles = 3 << 18

// rangeQuantileBound is the bound of maxRangeQuantiles applied to one range read before it
// reads a slot: each series or group answers perGroup points (RangeEnds within the span),
// so the groups it may answer are known, and a read past them stops at the first series of
// a group too many instead of reading every series and composing every point first (a
// refused by=key over 8,000 series cost 2.8 s and 70 MB).
type rangeQuantileBound struct {
	perGroup, qs int
	groups       int // the most groups the bound lets through; 0: no cap of the bound's
}

// rangeBound works out the bound of a range read whose points end at ends (one series or
// group, before the span is applied), with qs quantiles. It answers the 400 itself and
// reports false when one series or group alone is past the bound.
func (s *Server) rangeBound(w http.ResponseWriter, r *http.Request, ends []int64, win, span time.Duration, qs int) (rangeQuantileBound, bool) {
	b := rangeQuantileBound{perGroup: keptWithin(ends, win, span), qs: qs}
	if per := b.perGroup * qs; per > 0 {
		if per > maxRangeQuantiles {
			s.writeErr(w, r, badParam("q", "%d points × %d quantiles is %d quantile values, at most %d in one answer: ask for fewer quantiles or a longer step",
				b.perGroup, qs, per, maxRangeQuantiles))
			return b, false
		}
		b.groups = maxRangeQuantiles / per
	}
	return b, true
}

// refuse answers the 400 of a grouped read that met more groups than the bound lets through.
func (b rangeQuantileBound) refuse(s *Server, w http.ResponseWriter, r *http.Request) {
	s.writeErr(w, r, badParam("q", "more than %d groups × %d points × %d quantiles: over %d quantile values, the most one answer holds: ask for fewer quantiles, a longer step, or fewer groups (narrow the series with key= or match=)",
		b.groups, b.perGroup, b.qs, maxRangeQuantiles))
}

// appendRange writes the /v1/range answer:
//
//	{"metric":..,"key":..,"window":"1m","step":"10s","from":..,"to":..,"series":n,
//	 "points":[{"from":..,"to":..,"count":..,"sum":..,"avg":..,"min":..,"max":..,
//	            "rate_per_s":..,"quantiles":{..}},...]}
//
// from and to span every point; series is how many series were merged. "match" follows
// "step" when given; a grouped read (by=) answers "by" and "groups" instead, each group
// {"labels":{..},"from":..,"to":..,"series":n,"points":[..]}. warnings, and those of by=
// labels no group has, close the answer as "warnings":[..].
func appendRange(b []byte, metric string, sl selection, win, step time.Duration, points []window.Agg, groups []window.RangeGroup, now int64, qs []float64, warnings []string) []byte {
	b = appendHead(b, metric, `,"key":`, sl.key, win)
	b = append(b, `,"step":`...)
	b = jsonenc.AppendString(b, window.FormatDuration(step))
	b = appendSelection(b, sl.match, sl.by)
	var kbuf quantileKeys
	keys := kbuf.keysFor(qs) // once, not once a point
	if sl.by == nil {
		b = appendPoints(append(b, ','), points, now, qs, keys)
		return append(appendAbsentBy(b, metric, nil, 0, nil, warnings...), "}\n"...)
	}
	b = append(b, `,"groups":[`...)
	for i, g := range groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabels(append(b, '{'), g.Labels)
		b = appendPoints(append(b, ','), g.Points, now, qs, keys)
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendAbsentBy(b, metric, sl.by, len(groups), func(i int) []window.Label { return groups[i].Labels }, warnings...)
	return append(b, "}\n"...)
}

// appendPoints writes from, to, series and "points" of a range read (no braces).
func appendPoints(b []byte, points []window.Agg, now int64, qs []float64, keys *quantileKeys) []byte {
	var from, to int64
	series := 0
	if len(points) > 0 {
		from, to, series = points[0].From, points[len(points)-1].To, points[0].Series
	}
	b = appendSpan(b, from, to, series)
	b = append(b, `,"points":[`...)
	for i, p := range points {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"from":`...)
		b = appendInt(b, p.From)
		b = append(b, `,"to":`...)
		b = appendInt(b, p.To)
		b = appendStatsKeyed(b, p, now, qs, keys) // the members of /v1/window, whatever they become
		b = append(b, '}')
	}
	return append(b, ']')
}

// parseSpan reads a window or step of a range read: like parseWindow, but empty means one
// slot, and errors name the parameter.
func parseSpan(s, name string, rc window.RingConfig, metric string) (time.Duration, error) {
	if s == "" {
		return rc.Slot, nil
	}
	d, err := parseWindow(s, rc, metric)
	var pe *paramError
	if errors.As(err, &pe) {
		pe.name = name
	}
	return d, err
}

// withinSpan keeps the points whose window, ending where the point ends, lies within span
// of the newest point's end: a tiered ring's range read reaches as far as its tiers do, and
// span says how far to show. (A point in the tiers may start earlier than its window, as it
// holds whole tier slots.)
func withinSpan(points []window.Agg, win, span time.Duration) []window.Agg {
	if len(points) == 0 {
		return points
	}
	from := points[len(points)-1].To - span.Milliseconds() + win.Milliseconds()
	i := 0
	for i < len(points) && points[i].To < from {
		i++
	}
	return points[i:]
}

// keptWithin is how many of the points ending at ends (ascending) withinSpan keeps.
func keptWithin(ends []int64, win, span time.Duration) int {
	if len(ends) == 0 {
		return 0
	}
	i, _ := slices.BinarySearch(ends, ends[len(ends)-1]-span.Milliseconds()+win.Milliseconds())
	return len(ends) - i
}
