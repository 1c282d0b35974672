package promapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// Queryable is a storage.Queryable over a window.Store: the series of the package doc,
// built from the rings' slots when the engine selects them. It is safe for concurrent use;
// each Querier reads at one instant, the store's clock when it was made (capped at the
// querier's maxt), so every selector of one query sees the rings alike.
type Queryable struct {
	store     *window.Store
	cluster   Cluster // nil: the store holds every partition
	now       func() time.Time
	maxSeries int
	caches    caches // packed slots' native buckets, kept from query to query
}

// NewQueryable returns the Queryable of store, reading at now() (time.Now when nil), at most
// maxSeries series per querier (0: no cap) before a Select fails with promql.ErrTooManySeries.
func NewQueryable(store *window.Store, now func() time.Time, maxSeries int) *Queryable {
	if now == nil {
		now = time.Now
	}
	return &Queryable{store: store, now: now, maxSeries: maxSeries}
}

// liveSkew is how far before the clock's now a query may end and still read the slot in
// progress (stamped at its end time): a client's clock, or the time a request took to
// arrive, is not a reason to leave out the freshest slot.
const liveSkew = 5 * time.Second

// Querier returns a querier of the samples in [mint, maxt] (ms).
func (q *Queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	now := q.now().UnixMilli()
	return &querier{q: q, mint: mint, maxt: maxt, wall: now, now: min(now, maxt), live: maxt >= now-liveSkew.Milliseconds()}, nil
}

type querier struct {
	q          *Queryable
	mint, maxt int64
	now        int64
	wall       int64        // the clock's now when the querier was made (now is at most it)
	live       bool         // now is the clock's: the slot in progress shows at now
	series     atomic.Int64 // series selected so far, against q.maxSeries
	slabs      [][]sketch.BinCount

	suggested atomic.Int32 // unknown names given a nearest name so far (maxSuggestions)

	metricsOnce sync.Once // through a cluster: its metrics, asked once
	metricNames []string
	metricsErr  error
}

// Close hands the query's bucket slabs back for the next query: the engine closes its
// querier when the evaluation ends, and its results hold copies, never the slabs.
func (q *querier) Close() error {
	for _, sl := range q.slabs {
		sl = sl[:0]
		slabPool.Put(&sl)
	}
	q.slabs = nil
	return nil
}

// slabPool keeps the slabs of finished queries, so a query's buckets land in memory a
// previous one grew rather than in a slab grown by doubling each time.
var slabPool = sync.Pool{New: func() any { return new([]sketch.BinCount) }}

// selection is what a set of matchers selects: the exposed names (metric and kind) that the
// __name__ matchers accept, and the compiled matchers of the other labels.
type selection struct {
	metrics []string
	kinds   [][kindEnd]bool // per metric
	sel     *window.Selector
	ms      []window.Matcher // sel's matchers, as a cluster read sends them
	none    bool             // a matcher no series can satisfy
}

// selectionOf resolves matchers against the store's metrics. A name M_count, M_sum or M_max
// that is itself a slide metric is that metric's histogram, not a derived series of M.
func (q *querier) selectionOf(ctx context.Context, ms []*labels.Matcher) (selection, error) {
	var names, rest []*labels.Matcher
	for _, m := range ms {
		if m.Name == labels.MetricName {
			names = append(names, m)
		} else {
			rest = append(rest, m)
		}
	}
	var s selection
	wms := make([]window.Matcher, 0, len(rest))
	for _, m := range rest {
		wm := window.Matcher{Name: m.Name, Op: window.MatchOp(m.Type), Value: m.Value}
		if _, err := window.CompileSelector("", []window.Matcher{wm}); err != nil {
			// A label no series can have (a reserved or invalid name) reads as "", as an
			// absent label does in Prometheus.
			if !m.Matches("") {
				s.none = true
				return s, nil
			}
			continue
		}
		wms = append(wms, wm)
	}
	sel, err := window.CompileSelector("", wms)
	if err != nil {
		return s, err
	}
	s.sel, s.ms = sel, wms
	all, err := q.metrics(ctx)
	if err != nil {
		return s, err
	}
	for _, m := range all {
		var ks [kindEnd]bool
		any := false
		for k := range kindEnd {
			name := m + kindSuffix[k]
			if k != kindHistogram {
				if _, real := slices.BinarySearch(all, name); real {
					continue
				}
			}
			if matchesAll(names, name) {
				ks[k], any = true, true
			}
		}
		if any {
			s.metrics, s.kinds = append(s.metrics, m), append(s.kinds, ks)
		}
	}
	return s, nil
}

func matchesAll(ms []*labels.Matcher, v string) bool {
	for _, m := range ms {
		if !m.Matches(v) {
			return false
		}
	}
	return true
}

// labelsOf is the label set of series string s of the exposed name.
func labelsOf(b *labels.ScratchBuilder, name, s string) labels.Labels {
	fillLabels(b, name, s)
	return b.Labels()
}

// fillLabels readies b with series s's labels (labelsOf without the copy: Overwrite
// reads them in b's own memory).
func fillLabels(b *labels.ScratchBuilder, name, s string) {
	b.Reset()
	b.Add(labels.MetricName, name)
	b.Add(window.KeyLabel, window.SeriesKeyOf(s))
	window.EachLabel(s, func(n, v string) bool { b.Add(n, v); return true })
	b.Sort()
}

// stopper asks ctx once every 64 series: a scan stops soon after the client leaves.
func stopper(ctx context.Context) func() bool {
	n := 0
	return func() bool {
		n++
		return n%64 == 0 && ctx.Err() != nil
	}
}

// Select builds every series the matchers select, with their samples in the hints' range,
// sorted by labels whatever sortSeries says (the engine and the API both want them so).
func (q *querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
	}
	s, err := q.selectionOf(ctx, ms)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	if s.none {
		return storage.EmptySeriesSet()
	}
	if len(s.metrics) == 0 {
		if w := q.emptyHint(ctx, ms); w != nil {
			return &seriesSet{i: -1, warn: annotations.New().Add(w)}
		}
	}
	lo, hi, thin := ends(hints)
	var out []*promSeries
	var warn annotations.Annotations
	lb := labels.NewScratchBuilder(8)
	stop := stopper(ctx)
	for i, m := range s.metrics {
		ks := s.kinds[i]
		rc := q.q.store.RingConfig(m)
		if w := pastRetention(m, rc, hints); w != nil {
			warn.Add(w)
		}
		if hints != nil {
			if w := shortRange(m, rc, hints.Func, hints.Range); w != nil {
				warn.Add(w)
			}
		}
		b := builder{sh: newShape(rc, q.now, q.live, mint, maxt), cache: q.q.caches.of(rc.Sketch)}
		if ks[kindHistogram] {
			b.slab = *slabPool.Get().(*[]sketch.BinCount)
		}
		var ev evicted
		if hints != nil && hints.Step == 0 { // an instant query's: a range query's early steps are not warned of
			ev = q.evictedFor(rc, hints.Start-1, hints.End, hints.Range)
		}
		verr := q.visit(ctx, m, &s, stop, func(series string, cur int64, slots []window.SlotView) bool {
			if len(slots) == 0 {
				return true // an empty ring: nothing to show until it is evicted
			}
			ev.note(cur, slots)
			var hs *histSeries
			if ks[kindHistogram] {
				hs = b.histSeries(series, slots)
			}
			for k := range kindEnd {
				if !ks[k] {
					continue
				}
				smp := b.build(k, cur, slots, hs)
				if thin && k != kindMax { // a gauge's samples all count
					smp = thinned(smp, lo, hi)
				}
				if len(smp) == 0 {
					continue
				}
				if n := q.series.Add(1); q.q.maxSeries > 0 && n > int64(q.q.maxSeries) {
					err = fmt.Errorf("%w: more than %d series (promapi MaxSeries): narrow the selector", promql.ErrTooManySeries("selecting series"), q.q.maxSeries)
					return false
				}
				out = append(out, &promSeries{lset: labelsOf(&lb, m+kindSuffix[k], series), samples: smp})
			}
			return true
		})
		if b.slab != nil {
			q.slabs = append(q.slabs, b.slab)
		}
		if w := ev.warning(m, rc); w != nil {
			warn.Add(w)
		}
		if err == nil {
			err = verr
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
	}
	slices.SortFunc(out, func(a, b *promSeries) int { return labels.Compare(a.lset, b.lset) })
	return &seriesSet{list: out, i: -1, warn: warn}
}

// pastRetention is the warning for a range selector longer than metric m's retention
// (increase(M_count[$__range]) over an hour, a ring of 5 minutes): the ring has nothing
// before it, so the answer is the retention's, which nothing else in it would show
// (/v1/window refuses such a window). nil for any other selector.
func pastRetention(m string, rc window.RingConfig, hints *storage.SelectHints) error {
	ret := rc.Retention()
	if hints == nil || hints.Range <= ret.Milliseconds() {
		return nil
	}
	tiers := ""
	if len(rc.Tiers) > 0 {
		tiers = "; its tiers, further back, are read by /v1/window and /v1/range, not PromQL"
	}
	return fmt.Errorf("the range [%s] is longer than the retention %s of slide metric %q (%d slots of %s): it reads the last %s only%s",
		window.FormatDuration(time.Duration(hints.Range)*time.Millisecond), window.FormatDuration(ret), m,
		rc.Slots, window.FormatDuration(rc.Slot), window.FormatDuration(ret), tiers)
}

// twoSamples are the functions of a range that answer nothing over fewer than two samples.
var twoSamples = map[string]bool{"rate": true, "increase": true, "irate": true, "delta": true, "idelta": true, "deriv": true, "predict_linear": true}

// shortRange is the warning for such a function over a range shorter than two of metric
// m's slots (rate(cost_count[40s]), Grafana's $__rate_interval, on a ring of 1m slots): its
// samples are a slot apart, so a window that holds one has no answer (at a past instant, every
// window shorter than a slot), and the empty answer would not say why. nil otherwise.
func shortRange(m string, rc window.RingConfig, fn string, rng int64) error {
	if rng <= 0 || rng >= 2*rc.Slot.Milliseconds() || !twoSamples[fn] {
		return nil
	}
	return fmt.Errorf("the range [%s] of %s over slide metric %q is shorter than two of its slots (%s), one sample each: a window holding one sample has no answer; use at least [%s]",
		window.FormatDuration(time.Duration(rng)*time.Millisecond), fn, m, window.FormatDuration(rc.Slot), window.FormatDuration(2*rc.Slot))
}

// evicted finds whether an instant query's range selector, whose window reaches back past what the rings
// hold, read a series whose zero sample is the retention's start rather than its first
// event: such a series may have had events before it, which are gone, so its rate or
// increase over a window holding that zero counts only the part after it, less than the
// range held (a past instant's increase(M_count[5m]) on a ring of 5 minutes). A window
// within the retention, or the retention's own at now (a window of it within liveSkew of
// the clock: the slot being evicted is the accepted slack of a live read), is whole, and
// so is one over a series that began inside the retention (its zero is its start). A range
// query's early steps are not checked: on a dashboard of the last hour over a 5-minute ring
// every panel would carry the warning (Grafana shows it on the panel), and its graph already
// shows the ramp from the ring's start; a past instant's one number shows nothing.
type evicted struct {
	check     bool  // the windows reach back past the retention
	lo, end   int64 // the windows' span: (lo, end]
	rng       int64 // a window's length (ms)
	width, n  int64 // the ring's slot (ms) and slots kept
	hit       bool  // a series starts at the oldest slot kept, inside some window
	zero, cur int64 // that slot's start; the current slot then
}

// evictedFor readies the check for windows of length rng ending in [lo+rng, end] (the
// span (lo, end] a selector reads; rng 0 for an instant vector selector, never partial).
func (q *querier) evictedFor(rc window.RingConfig, lo, end, rng int64) evicted {
	ret := rc.Retention().Milliseconds()
	return evicted{check: rng > 0 && rng <= ret && lo < q.wall-ret-liveSkew.Milliseconds(),
		lo: lo, end: end, rng: rng, width: rc.Slot.Milliseconds(), n: int64(rc.Slots)}
}

// note looks at one series' live slots (cur the current slot): whether it starts at the
// oldest slot kept, and a window (t−rng, t] with t in [lo+rng, end] holds that slot's start
// (the series' zero sample): lo < zero ≤ end.
func (e *evicted) note(cur int64, slots []window.SlotView) {
	if !e.check || e.hit {
		return
	}
	oldest := cur - e.n + 1
	if z := oldest * e.width; slots[0].Index == oldest && e.lo < z && z <= e.end {
		e.hit, e.zero = true, z
	}
}

// warning is the answer's warning when a window read a series from an evicted start.
func (e *evicted) warning(m string, rc window.RingConfig) error {
	if !e.hit {
		return nil
	}
	at := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
	return fmt.Errorf("slide metric %q keeps %s (%d slots of %s), from %s: a [%s] window ending before %s reaches back past it and reads only its part after it",
		m, window.FormatDuration(rc.Retention()), rc.Slots, window.FormatDuration(rc.Slot), at(e.zero),
		window.FormatDuration(time.Duration(e.rng)*time.Millisecond), at(e.zero+e.rng))
}

// seriesSet is a built list of series, and what the engine should warn of.
type seriesSet struct {
	list []*promSeries
	i    int
	warn annotations.Annotations
}

// bucketHint is the warning for a selector of a classic histogram's buckets, M_bucket, where
// M is a slide metric: slide shows M as a native histogram, so the dashboards' usual
// histogram_quantile(φ, sum by (le, …) (rate(M_bucket[r]))) selects nothing, which Prometheus'
// answer (an empty result) would not explain. nil for any other selector.
func (q *querier) bucketHint(ctx context.Context, ms []*labels.Matcher) error {
	for _, m := range ms {
		base, ok := strings.CutSuffix(m.Value, "_bucket")
		if m.Name != labels.MetricName || m.Type != labels.MatchEqual || !ok {
			continue
		}
		all, err := q.metrics(ctx)
		if _, known := slices.BinarySearch(all, base); err != nil || !known {
			return nil
		}
		return fmt.Errorf("%s: slide has no classic le buckets; %s is a native histogram (its sketch's bins): histogram_quantile(0.95, sum by (key) (rate(%s[5m]))), without le", m.Value, base, base)
	}
	return nil
}

// operatorNameHint is the warning for a selector of a part of a slide metric's name that
// PromQL cut at an operator: a metric may hold "-" or "." (req-latency), which a bare name
// cannot, so req-latency_count parses as req minus latency_count, two selectors of nothing,
// and the empty answer would not say why. nil unless the name is such a part.
func (q *querier) operatorNameHint(ctx context.Context, ms []*labels.Matcher) error {
	for _, m := range ms {
		if m.Name != labels.MetricName || m.Type != labels.MatchEqual {
			continue
		}
		all, err := q.metrics(ctx)
		if err != nil {
			return nil
		}
		if exposed := cutFrom(all, m.Value); exposed != "" {
			return fmt.Errorf("%s selects nothing: %s", m.Value, quoteHint(exposed))
		}
	}
	return nil
}

// cutFrom returns the exposed name (a metric and its kind's suffix) whose last piece, cut at
// a character PromQL does not take in a bare name, is part (latency_count of
// req-latency_count); "" when there is none. Only the last piece names the exposed name whole,
// so the first (req) is not warned of: its warning would guess the suffix.
func cutFrom(metrics []string, part string) string {
	if part == "" {
		return ""
	}
	for _, metric := range metrics {
		for _, suffix := range kindSuffix {
			name := metric + suffix
			if i := len(name) - len(part); i > 0 && strings.HasSuffix(name, part) && cutsName(name[i-1]) {
				return name
			}
		}
	}
	return ""
}

// quotedName returns the longest exposed name of metrics holding a character that cuts a
// bare name which the query text writes unquoted (req-latency_count, not
// {__name__="req-latency_count"}); "". The hint of a query that does not parse for it:
// rate(req-latency_count[5m]) is a subtraction of a range, a parse error.
func quotedName(metrics []string, text string) string {
	best := ""
	for _, metric := range metrics {
		if !strings.ContainsFunc(metric, func(r rune) bool { return r < 0x80 && cutsName(byte(r)) }) {
			continue
		}
		for _, suffix := range kindSuffix {
			name := metric + suffix
			if i := strings.Index(text, name); i >= 0 && (i == 0 || text[i-1] != '"') && len(name) > len(best) {
				best = name
			}
		}
	}
	return best
}

// quoteHint says how to select exposed, a name PromQL cuts unquoted.
func quoteHint(exposed string) string {
	return fmt.Sprintf("slide's %q holds a character that PromQL reads as an operator outside quotes, which cut the name; select it quoted, as {__name__=%q}", exposed, exposed)
}

// cutsName reports a byte that ends a bare metric name in PromQL: anything but a letter,
// digit, _ or :.
func cutsName(c byte) bool {
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':')
}

func (s *seriesSet) Next() bool {
	s.i++
	return s.i < len(s.list)
}
func (s *seriesSet) At() storage.Series                { return s.list[s.i] }
func (*seriesSet) Err() error                          { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return s.warn }

// eachLabelled calls fn with the label set (exposed name aside) of every series the matchers
// select that has samples in the querier's [mint, maxt] (a listing's start and end), name
// by name as Select would list them.
func (q *querier) eachLabelled(ctx context.Context, ms []*labels.Matcher, fn func(name, series string)) error {
	s, err := q.selectionOf(ctx, ms)
	if err != nil || s.none {
		return err
	}
	stop := stopper(ctx)
	var ts, through []int64
	for i, m := range s.metrics {
		sh := newShape(q.q.store.RingConfig(m), q.now, q.live, q.mint, q.maxt)
		err := q.visitFirst(ctx, m, &s, stop, func(series string, cur, first int64) bool {
			// A series' samples (its counters') rise from its first slot's start (or the
			// retention's) to now, at most maxt: it has one in range when there is one and
			// the last is at mint or after. Its first slot and cur tell it: a listing reads
			// no more (visitFirst).
			if ts, through = sh.points(cur, first, ts[:0], through[:0]); len(ts) == 0 || ts[len(ts)-1] < q.mint {
				return true
			}
			for k := range kindEnd {
				if s.kinds[i][k] {
					fn(m+kindSuffix[k], series)
				}
			}
			return true
		})
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// LabelNames lists the label names of the selected series, sorted.
func (q *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	set := map[string]struct{}{}
	err := q.eachLabelled(ctx, ms, func(_, series string) {
		set[labels.MetricName], set[window.KeyLabel] = struct{}{}, struct{}{}
		window.EachLabel(series, func(n, _ string) bool { set[n] = struct{}{}; return true })
	})
	return sortedLimited(set, hints), nil, err
}

// LabelValues lists the values label name takes in the selected series, sorted.
func (q *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	set := map[string]struct{}{}
	err := q.eachLabelled(ctx, ms, func(exposed, series string) {
		switch name {
		case labels.MetricName:
			set[exposed] = struct{}{}
		case window.KeyLabel:
			set[window.SeriesKeyOf(series)] = struct{}{}
		default:
			if v := window.LabelValue(series, name); v != "" {
				set[v] = struct{}{}
			}
		}
	})
	return sortedLimited(set, hints), nil, err
}

func sortedLimited(set map[string]struct{}, hints *storage.LabelHints) []string {
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return out
}
