package usage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/window"
)

// Checker evaluates one Rule against a window.Store. It implements limiter.Checker, so a
// limiter.Service consults it like a policy (limiter.Config.Checkers) and a request may
// name it alongside rate policies; its denial carries the rule's name and a RetryAfter
// derived from the window. It is safe for concurrent use; the zero value is not usable,
// call NewChecker.
//
// Cost: an allowed decision is one window read (for a quantile rule, one sketch read when
// Window is the metric's retention, a merge of Window/slot slot sketches otherwise; a glob
// key merges every matching series). A denial adds one per-slot read of the retention to
// find RetryAfter (through a cluster Reader, O(log slots) window reads instead; O(slots)
// for a sum over negative values). A rule with Match scans the metric's series for those it
// selects, as a glob does, unless its key is exact and the metric has no labelled series
// (one lookup).
type Checker struct {
	rule  Rule
	store *window.Store
	width int64 // slot width of the metric, ms
	slots int64 // slots in Window; for a Calendar rule, in the longest period and a slot
	// tiered: Window reaches past the ring's own slots into its tiers (issue #29), so
	// RetryAfter reads the newest j slots window by window instead of slot by slot.
	tiered bool
	qs     []float64
	// keyPrefix, keySuffix: Rule.Key split at the placeholder; whole when there is none.
	keyPrefix, keySuffix string
	hasPlaceholder       bool
	limit                int64  // Decision.Limit: Max rounded down, clamped to int64
	reader               Reader // nil: the store alone; set by SetReader before serving
	// ms, sel: Rule.Match parsed, and compiled with no key (the key is the request's);
	// nil when the rule has none.
	ms  []window.Matcher
	sel *window.Selector
	// levels indexes the metric's series by the prefixes a rule with levels reads above
	// the key (window.LevelIndex); nil without levels.
	levels *window.LevelIndex
}

// Reader reads a rule's series over every instance of the consumer group (the cluster
// package implements it). With a Reader whose Local is false, a Checker reads through it.
type Reader interface {
	// Local reports that this instance holds every partition: the store answers alone.
	Local() bool
	// Read aggregates metric's series (a key or a glob) over win at now from every
	// instance. staleMs is the age of the other instances' part; missing lists partitions
	// no instance served. A series no instance holds is window.ErrNotFound.
	Read(ctx context.Context, now int64, metric, series string, win time.Duration, qs []float64) (a window.Agg, staleMs int64, missing []int32, err error)
	// Unavailable counts a decision taken without the whole window.
	Unavailable(caller string)
}

// SelectReader is a Reader that also reads by label matchers, as a rule with Match reads
// (the cluster package implements it). A rule with Match refuses to decide through a Reader
// that is not one.
type SelectReader interface {
	Reader
	// ReadSelected is Read of the series of metric whose key label key matches (exact or a
	// glob) and whose labels ms select.
	ReadSelected(ctx context.Context, now int64, metric, key string, ms []window.Matcher, win time.Duration, qs []float64) (a window.Agg, staleMs int64, missing []int32, err error)
}

// SetReader makes every usage Checker among checkers read through r. Call it before the
// checkers serve: it is not synchronized with Check.
func SetReader(checkers []limiter.Checker, r Reader) {
	for _, c := range checkers {
		if uc, ok := c.(*Checker); ok {
			uc.reader = r
		}
	}
}

// readState is what a read through a Reader learned beyond the aggregate.
type readState struct {
	remote  bool
	staleMs int64
	missing []int32
}

var _ limiter.Checker = (*Checker)(nil)

// NewChecker validates r and checks its Window against the ring of its metric in store.
func NewChecker(store *window.Store, r Rule) (*Checker, error) {
	if store == nil {
		return nil, errors.New("creating usage checker: nil store")
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	rc := store.RingConfig(r.Metric)
	span, text := r.Window, window.FormatDuration(r.Window)
	if r.Calendar != window.CalendarNone {
		// The longest period, and a slot: its start rounds down to the slot holding it.
		span, text = (r.Calendar.Longest()/rc.Slot+1)*rc.Slot, r.Calendar.String()
	}
	if err := rc.CheckWindow(span, text, r.Metric); err != nil {
		// The hint names rings that serve the rule, from the metric's own (Serving): a 2 h
		// rule on cost=1m:60 gets cost=1m:120, a 30-day one cost=1m:60+1h:48+1d:29.
		return nil, &RuleError{Source: r.Source, Rule: r.Name, Field: "window",
			Msg: fmt.Sprintf("%s (rings %s); give the metric rings that serve it: --rings %s",
				strings.TrimPrefix(err.Error(), "window: "), rc.Spec(), ringsHint(store, r.Metric, rc.Serving(span)))}
	}
	if r.Key == "" {
		r.Key = KeyPlaceholder
	}
	c := &Checker{rule: r, store: store, width: rc.Slot.Milliseconds(), slots: int64(span / rc.Slot), tiered: span > rc.Retention()}
	if r.Match != "" {
		c.ms, _ = ParseMatch(r.Match) // Validate parsed it
		c.sel, _ = window.CompileSelector("", c.ms)
	}
	c.keyPrefix, c.keySuffix, c.hasPlaceholder = strings.Cut(r.Key, KeyPlaceholder)
	if r.Agg.Kind == KindQuantile {
		c.qs = []float64{r.Agg.Q}
	}
	c.limit = limitOf(r.Max)
	if r.Levels.N > 1 {
		c.levels = store.IndexLevels(r.Metric, r.Levels.Separator, r.Levels.N-1)
	}
	return c, nil
}

// ringsHint is a whole --rings value: the store's per-metric rings with metric's set to rc.
// Naming metric alone replaced the others (the default cost=1m:60+1h:48+1d:36 among them),
// so following the hint refused the next rule, whose hint dropped this metric again.
func ringsHint(store *window.Store, metric string, rc window.RingConfig) string {
	specs := []string{metric + "=" + rc.Spec()}
	for _, m := range store.RingMetrics() {
		if m != metric {
			specs = append(specs, m+"="+store.RingConfig(m).Spec())
		}
	}
	slices.Sort(specs)
	return strings.Join(specs, ",")
}

// limitOf is Decision.Limit for a bound: max rounded down, clamped to int64.
func limitOf(max float64) int64 {
	switch {
	case max >= math.MaxInt64:
		return math.MaxInt64
	case max <= 0:
		return 0
	}
	return int64(max)
}

// CheckMax is Check with bound in place of the rule's Max: a key's plan
// (limiter.PlanChecker).
func (c *Checker) CheckMax(ctx context.Context, key string, now time.Time, _ int64, bound float64) (limiter.Decision, error) {
	if c.rule.Levels.N > 0 {
		return limiter.Decision{}, fmt.Errorf("rule %s has levels: a plan cannot set its max (PlanRefusal)", c.rule.Name)
	}
	return c.check(ctx, key, now, bound, limitOf(bound))
}

// NewCheckers builds one Checker per rule, as limiter.Config.Checkers wants them. Every
// rule's error is reported.
func NewCheckers(store *window.Store, rules []Rule) ([]limiter.Checker, error) {
	out := make([]limiter.Checker, 0, len(rules))
	var errs []error
	for _, r := range rules {
		c, err := NewChecker(store, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Name is the rule's name.
func (c *Checker) Name() string { return c.rule.Name }

// Rule returns the rule, defaults filled in.
func (c *Checker) Rule() Rule { return c.rule }

// seriesKey is the key the rule reads for a request's key.
func (c *Checker) seriesKey(key string) string {
	if !c.hasPlaceholder {
		return c.keyPrefix
	}
	if c.keyPrefix == "" && c.keySuffix == "" {
		return key // the default "{key}": no allocation
	}
	return c.keyPrefix + key + c.keySuffix
}

// target is what one read of a decision reads: the series key (exact or a glob), or, with
// under, a level's prefix: its own key and every key under prefix + separator, merged.
type target struct {
	key   string
	under bool
}

// read aggregates the newest n slots of the rule's series at now.
func (c *Checker) read(now int64, t target, n int64, qs []float64) (window.Agg, error) {
	a, _, err := c.readVia(context.Background(), now, t, n, qs, nil)
	return a, err
}

// readVia is read through the Reader when this instance does not hold every partition;
// st (when not nil) records staleness and missing partitions.
func (c *Checker) readVia(ctx context.Context, now int64, t target, n int64, qs []float64, st *readState) (window.Agg, bool, error) {
	w := time.Duration(n*c.width) * time.Millisecond
	if t.under && c.reader != nil && !c.reader.Local() {
		a, err := c.readUnder(ctx, now, t.key, n, qs, st)
		return a, true, err
	}
	series := t.key
	if c.reader != nil && !c.reader.Local() {
		var a window.Agg
		var stale int64
		var missing []int32
		var err error
		if c.sel != nil {
			sr, ok := c.reader.(SelectReader)
			if !ok {
				return a, true, fmt.Errorf("rule %s: match: the cluster reader cannot select series by labels", c.rule.Name)
			}
			a, stale, missing, err = sr.ReadSelected(ctx, now, c.rule.Metric, series, c.ms, w, qs)
		} else {
			a, stale, missing, err = c.reader.Read(ctx, now, c.rule.Metric, series, w, qs)
		}
		if st != nil {
			st.remote = true
			st.staleMs = max(st.staleMs, stale)
			if len(missing) > 0 {
				st.missing = missing
			}
		}
		return a, true, err
	}
	a, err := c.readLocal(now, t, w, qs)
	return a, false, err
}

func (c *Checker) readLocal(now int64, t target, w time.Duration, qs []float64) (window.Agg, error) {
	series := t.key
	if t.under {
		return c.readUnderLocal(now, series, w)
	}
	if c.store.LabelledSeries(c.rule.Metric) == 0 {
		// No series of the metric has labels: a key is one series and a glob matches keys,
		// so ReadKey (one lookup for a key) reads what the key label would select.
		if c.sel == nil {
			return c.store.ReadKey(now, c.rule.Metric, series, w, qs, nil)
		}
		if !window.IsKeyPattern(series) {
			if !c.sel.Match(series) {
				return window.Agg{}, window.ErrNotFound
			}
			return c.store.ReadAt(now, c.rule.Metric, series, w, qs)
		}
	}
	return c.store.ReadMerged(now, c.rule.Metric, func(k string) bool { return c.selects(series, k) }, w, qs)
}

// selects reports whether the rule reads series string k for key (the rule's key for a
// request: exact or a glob, compared with k's key label, as window.Selector and the cluster's
// reads compare it), and, with Match, whether its matchers accept k; the matchers are
// compiled once, not per request.
func (c *Checker) selects(key, k string) bool {
	kk := window.SeriesKeyOf(k)
	if window.IsKeyPattern(key) {
		if !window.MatchKey(key, kk) {
			return false
		}
	} else if kk != key {
		return false
	}
	return c.sel == nil || c.sel.Match(k)
}

// value is the rule's aggregate of a. It is NaN for an empty window's avg, min, max or
// quantile, which never exceeds Max.
func (c *Checker) value(a window.Agg, now int64) float64 { return c.rule.Agg.Value(a, now, 0) }

// Check decides a request of key at now: denied while the rule's aggregate over its window
// is greater than Max. cost is not added to the aggregate: the window holds usage already
// recorded as events (the request's own usage arrives later through ingest), so a key can
// overshoot a quota by the usage still in flight, as with any usage-based quota.
//
// Decision: Limit is Max rounded down; Remaining is Max − value rounded down for count and
// sum rules (0 when denied), Limit for the others when allowed; Window is the rule's window;
// ResetAfter bounds the time until everything now in the window has left it (the current
// slot leaving, one window from its start). RetryAfter of a denial assumes no new events:
//   - count, sum (of non-negative values), max: exact — the time until enough of the oldest
//     slots leave for the value of the remaining ones to be at most Max (slots leave whole,
//     at slot boundaries);
//   - sum with negative values: the same, found by scanning instead of bisecting;
//   - rate: as count, with the bound Max × (Window − one slot), the elapsed span just after
//     a slot turns (the rate only falls later within that slot);
//   - avg, min, quantiles: the time until the oldest slot holding data leaves, the first
//     instant the value can change. It may still exceed Max then, and the client is told
//     again; no later instant can be promised without knowing future events.
//
// An unknown series (no usage recorded) is allowed.
//
// With several instances (SetReader), the read covers every instance: this one's part
// fresh, the others' at most the cluster's staleness old (Decision.Remote, Stale). When
// some partitions cannot be read the rule follows OnUnavailable.
func (c *Checker) Check(ctx context.Context, key string, now time.Time, _ int64) (limiter.Decision, error) {
	return c.check(ctx, key, now, c.rule.Max, c.limit)
}

func (c *Checker) check(ctx context.Context, key string, now time.Time, bound float64, limit int64) (limiter.Decision, error) {
	if c.rule.Levels.N > 0 {
		return c.checkLevels(ctx, key, now)
	}
	return c.checkTarget(ctx, target{key: c.seriesKey(key)}, now, bound, limit)
}

// checkTarget decides one read: the rule's series for a key, or one level's.
func (c *Checker) checkTarget(ctx context.Context, t target, now time.Time, bound float64, limit int64) (limiter.Decision, error) {
	nowMs := now.UnixMilli()
	series := t.key
	d := limiter.Decision{Allowed: true, Limit: limit, Remaining: limit, Window: c.rule.Window, Policy: c.rule.Name}
	n, reset := c.slots, time.Duration(0)
	if c.rule.Calendar != window.CalendarNone {
		n, reset, d.Window = c.period(now)
		d.ResetAfter = reset
	}
	var st readState
	a, _, err := c.readVia(ctx, nowMs, t, n, c.qs, &st)
	d.Remote, d.Stale = st.remote, time.Duration(st.staleMs)*time.Millisecond
	if len(st.missing) > 0 && (err == nil || errors.Is(err, window.ErrNotFound)) {
		if err == nil && c.lowerBound(a) && c.value(a, nowMs) > bound {
			// What could be read is already over: the missing part can only add to a count,
			// a non-negative sum or a max, so deny (flagged) whatever on_unavailable says.
			c.reader.Unavailable("usage_denied_anyway")
			d.Degraded = true
			d, err = c.deny(d, nowMs, t, a, reset, bound)
			return d, err
		}
		if c.rule.OnUnavailable == UnavailableClosed {
			c.reader.Unavailable("usage_closed")
			return limiter.Decision{}, fmt.Errorf("rule %s: partitions %v of %s have no reachable owner: %w", c.rule.Name, st.missing, c.rule.Metric, limiter.ErrBackendUnavailable)
		}
		c.reader.Unavailable("usage_open")
		d.Degraded = true
		return d, nil
	}
	if errors.Is(err, window.ErrNotFound) {
		return d, nil
	}
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("reading %s of %q: %w", c.rule.Metric, series, err)
	}
	if a.Count > 0 && reset == 0 {
		d.ResetAfter = c.after(a, nowMs, 0)
	}
	v := c.value(a, nowMs)
	if c.rule.Agg.Kind == KindCount || c.rule.Agg.Kind == KindSum {
		d.Remaining, d.Used = remaining(bound, v), remaining(v, 0) // v rounded down, clamped as Remaining
	}
	if !(v > bound) {
		return d, nil
	}
	return c.deny(d, nowMs, t, a, reset, bound)
}

// period is a Calendar rule's window at now: the slots from the one holding the period's
// start (in the rule's zone) to the current one, the time to the next boundary, and the
// period's length (a day across a DST change is 23 or 25 hours).
func (c *Checker) period(now time.Time) (n int64, reset, length time.Duration) {
	start, next := c.rule.Calendar.Start(now, c.rule.loc), c.rule.Calendar.Next(now, c.rule.loc)
	cur := window.FloorDiv(now.UnixMilli(), c.width)
	n = cur - window.FloorDiv(start.UnixMilli(), c.width) + 1
	return min(n, c.slots), next.Sub(now), next.Sub(start)
}

// deny turns d into the denial of a window read as a, with its RetryAfter. reset, when not
// 0, is a Calendar rule's time to the next boundary, when the whole window resets: the
// denial lifts then, exactly.
func (c *Checker) deny(d limiter.Decision, nowMs int64, t target, a window.Agg, reset time.Duration, bound float64) (limiter.Decision, error) {
	if reset > 0 {
		d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter = false, 0, reset, reset
		return d, nil
	}
	var err error
	if a.Count > 0 {
		d.ResetAfter = max(d.ResetAfter, c.after(a, nowMs, 0))
	}
	d.Allowed, d.Remaining = false, 0
	if d.RetryAfter, err = c.retryAfter(nowMs, t, a, bound); err != nil {
		return limiter.Decision{}, fmt.Errorf("reading %s of %q: %w", c.rule.Metric, t.key, err)
	}
	d.ResetAfter = max(d.ResetAfter, d.RetryAfter)
	return d, nil
}

// lowerBound reports whether the rule's aggregate of part of the window can only grow as
// the rest is added: a count, a max, or a sum of non-negative values.
func (c *Checker) lowerBound(a window.Agg) bool {
	switch c.rule.Agg.Kind {
	case KindCount, KindMax:
		return true
	case KindSum:
		return a.Count == 0 || a.Min >= 0
	}
	return false
}

// after is the time from now until only the newest j slots of the window read as a are
// left: the slot just older than them leaves when the current slot index reaches its own
// plus the window's slot count, at a.To + (slots − j − 1) × width.
func (c *Checker) after(a window.Agg, now, j int64) time.Duration {
	return time.Duration(a.To+(c.slots-j-1)*c.width-now) * time.Millisecond
}

// newestReader returns a read of the newest j slots of the rule's window. On an instance
// that holds every partition it reads the window once, slot by slot (window's per-slot
// history, Store.ReadRangeAt with a one-slot window and step), and answers every j from
// that; through a cluster Reader it reads the newest j slots for each j asked.
func (c *Checker) newestReader(now int64, t target) (func(j int64) (window.Agg, error), error) {
	if c.reader != nil && !c.reader.Local() || c.tiered {
		// Through the cluster, or a window reaching into the tiers, whose slots the per-slot
		// history does not have: a read of the newest j slots each time, which rounds out to
		// whole tier slots, so RetryAfter errs late, never early.
		return func(j int64) (window.Agg, error) { return c.read(now, t, j, nil) }, nil
	}
	series := t.key
	slot := time.Duration(c.width) * time.Millisecond
	var hist []window.Agg
	var err error
	// The choice readLocal makes: ReadRangeKey while the metric has no labelled series
	// (one lookup for a key), else a merged read that compares the key label.
	plain := c.store.LabelledSeries(c.rule.Metric) == 0
	switch {
	case t.under:
		hist, err = c.store.ReadRangeMerged(now, c.rule.Metric, func(k string) bool { return c.selectsUnder(series, k) }, slot, slot, nil)
	case plain && c.sel == nil:
		hist, err = c.store.ReadRangeKey(now, c.rule.Metric, series, slot, slot, nil, nil)
	case plain && !window.IsKeyPattern(series):
		if !c.sel.Match(series) {
			return nil, window.ErrNotFound
		}
		hist, err = c.store.ReadRangeAt(now, c.rule.Metric, series, slot, slot, nil)
	default:
		hist, err = c.store.ReadRangeMerged(now, c.rule.Metric, func(k string) bool { return c.selects(series, k) }, slot, slot, nil)
	}
	if err != nil {
		return nil, err
	}
	return func(j int64) (window.Agg, error) {
		var s window.Agg
		for _, x := range hist[max(int64(len(hist))-j, 0):] {
			if x.Count == 0 {
				continue
			}
			if s.Count == 0 {
				s.Min, s.Max = x.Min, x.Max
			}
			s.Count += x.Count
			s.Sum += x.Sum
			s.Min, s.Max = min(s.Min, x.Min), max(s.Max, x.Max)
		}
		return s, nil
	}, nil
}

// retryAfter finds when a denial can lift; see Check.
func (c *Checker) retryAfter(now int64, t target, a window.Agg, max float64) (time.Duration, error) {
	k := c.slots
	read, err := c.newestReader(now, t)
	if err != nil {
		return 0, err
	}
	switch c.rule.Agg.Kind {
	case KindAvg, KindMin, KindQuantile:
		// The smallest j whose newest j slots hold every event of the window: the oldest slot
		// with data is the j-th newest, and it leaves at a.To + (k − j) × width. Counts only
		// grow with j, so bisect.
		lo, hi := int64(0), k // count(lo) < a.Count, count(hi) == a.Count
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			s, e := read(mid)
			if e != nil {
				return 0, e
			}
			if s.Count >= a.Count { // >=: events may land between reads
				hi = mid
			} else {
				lo = mid
			}
		}
		return c.after(a, now, hi-1), nil
	}
	// count, sum, rate, max: the largest j < k whose newest j slots are within the bound.
	bound := max
	if c.rule.Agg.Kind == KindRate {
		bound = max * float64((k-1)*c.width) / 1000
	}
	within := func(j int64) bool {
		if j == 0 {
			return !(0 > bound) // nothing left: count and sum 0, max undefined
		}
		var s window.Agg
		if s, err = read(j); err != nil {
			return false
		}
		var v float64
		switch c.rule.Agg.Kind {
		case KindCount, KindRate:
			v = float64(s.Count)
		case KindSum:
			v = s.Sum
		case KindMax:
			if s.Count == 0 {
				return true
			}
			v = s.Max
		}
		return !(v > bound)
	}
	if c.rule.Agg.Kind == KindSum && a.Min < 0 {
		// Negative values: the newest-j sums are not monotone in j, so scan from the oldest
		// slot leaving first.
		for j := k - 1; j >= 0; j-- {
			if within(j) {
				return c.after(a, now, j), err
			}
			if err != nil {
				return 0, err
			}
		}
		return c.after(a, now, 0), nil
	}
	if !within(0) {
		return c.after(a, now, 0), nil // a negative bound no emptying can meet: one window
	}
	lo, hi := int64(0), k // within(lo), !within(hi) (the whole window exceeds)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if within(mid) {
			lo = mid
		} else {
			if err != nil {
				return 0, err
			}
			hi = mid
		}
	}
	return c.after(a, now, lo), nil
}

func remaining(max, v float64) int64 {
	r := math.Floor(max - v)
	switch {
	case !(r > 0):
		return 0
	case r >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(r)
}

var _ limiter.PlanChecker = (*Checker)(nil)
