package usage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/window"
)

// checkLevels decides key under a rule with levels: each level from the top (the org
// first) against its own max, the first over it denying with Decision.Level its key. An
// allowed decision is the level nearest its max (the smallest Remaining), as a policy's
// levels answer; Remote, Stale and Degraded gather every level's read.
func (c *Checker) checkLevels(ctx context.Context, key string, now time.Time) (limiter.Decision, error) {
	l := &c.rule.Levels
	var best limiter.Decision
	var remote, degraded bool
	var stale time.Duration
	var keys [limiter.MaxLevels]string
	ll := limiter.Levels{Separator: l.Separator, N: l.N}
	for i, k := range keys[:ll.KeysInto(key, &keys)] {
		d, err := c.checkTarget(ctx, target{key: k, under: i < l.N-1}, now, l.Max[i], limitOf(l.Max[i]))
		if err != nil {
			return limiter.Decision{}, err
		}
		remote, degraded, stale = remote || d.Remote, degraded || d.Degraded, max(stale, d.Stale)
		if !d.Allowed {
			d.Level = k
			best = d
			break
		}
		if i == 0 || d.Remaining < best.Remaining {
			best = d
		}
	}
	best.Remote, best.Degraded, best.Stale = remote, degraded, stale
	return best, nil
}

// selectsUnder reports whether series string k belongs to the level prefix: its key label
// is prefix or starts with prefix + separator (what the glob prefix/* matches), and, with
// Match, the rule's matchers accept k.
func (c *Checker) selectsUnder(prefix, k string) bool {
	if !strings.HasPrefix(k, prefix) {
		return false // the series string starts with its key: most series end here, unsplit
	}
	kk := window.SeriesKeyOf(k)
	if kk != prefix && !(strings.HasPrefix(kk, prefix) && strings.HasPrefix(kk[len(prefix):], c.rule.Levels.Separator)) {
		return false
	}
	return c.sel == nil || c.sel.Match(k)
}

// readUnderLocal reads a level's prefix from the store: every series selectsUnder takes,
// folded without their sketch bins (a rule with levels reads no quantile), which is most of
// a merged read's cost. The level index answers it from the prefix's own series, or from
// its cached aggregate while they are quiet; a scan of the metric's series remains for a
// prefix deeper than the index keeps (a key with more separators than the rule's levels).
func (c *Checker) readUnderLocal(now int64, prefix string, w time.Duration) (window.Agg, error) {
	p := window.Partial{NoBins: true}
	err := window.ErrNotCovered
	if c.levels != nil {
		var match window.SeriesMatch
		if c.sel != nil {
			match = func(k string, _ int32) bool { return c.sel.Match(k) }
		}
		err = c.levels.MergeUnder(now, prefix, match, w, &p)
	}
	if errors.Is(err, window.ErrNotCovered) {
		err = c.store.MergePartial(now, c.rule.Metric, func(k string, _ int32) bool { return c.selectsUnder(prefix, k) }, w, &p)
	}
	if err != nil {
		return window.Agg{}, err
	}
	if p.Series == 0 {
		return window.Agg{}, window.ErrNotFound
	}
	// p.Agg without its quantiles (none: no bins, no indexer to look up), built in place:
	// it is a level read's own cost on the index's cached path.
	a := window.Agg{From: p.From, To: p.To, Count: p.Count, Sum: p.Sum, Min: p.Min, Max: p.Max, Series: p.Series}
	if a.Count == 0 {
		a.Min, a.Max = 0, 0
	}
	return a, nil
}

// readUnder reads a level's prefix through the cluster Reader: the prefix's own key and
// the glob prefix + separator + "*", as two reads merged (count, sum, min and max merge;
// Validate refuses quantiles with levels for that reason). The level is not found only
// when neither is.
func (c *Checker) readUnder(ctx context.Context, now int64, prefix string, n int64, qs []float64, st *readState) (window.Agg, error) {
	var out window.Agg
	found := false
	for _, k := range [2]string{prefix, prefix + c.rule.Levels.Separator + "*"} {
		a, _, err := c.readVia(ctx, now, target{key: k}, n, qs, st)
		if errors.Is(err, window.ErrNotFound) {
			continue
		}
		if err != nil {
			return window.Agg{}, err
		}
		if !found {
			out, found = a, true
			continue
		}
		out = mergeAgg(out, a)
	}
	if !found {
		return window.Agg{}, window.ErrNotFound
	}
	return out, nil
}

// mergeAgg adds b's events to a: counts and sums add, minima and maxima widen, the span is
// the widest of the two. Quantiles are not merged (a rule with levels has none).
func mergeAgg(a, b window.Agg) window.Agg {
	if b.Count > 0 {
		if a.Count == 0 {
			a.Min, a.Max = b.Min, b.Max
		}
		a.Min, a.Max = min(a.Min, b.Min), max(a.Max, b.Max)
		a.Count += b.Count
		a.Sum += b.Sum
	}
	a.From, a.To = min(a.From, b.From), max(a.To, b.To)
	a.Series += b.Series
	return a
}

// PlanRefusal says why no plan may set the rule's max (limiter.PlanRefuser): a rule with
// levels has one max per level and a plan gives a rule one. "" for a rule without levels.
func (c *Checker) PlanRefusal() string {
	if c.rule.Levels.N == 0 {
		return ""
	}
	return fmt.Sprintf("rule %q has levels, one max per level, which a plan does not set: remove it from the plan or the levels from the rule", c.rule.Name)
}

var _ limiter.PlanRefuser = (*Checker)(nil)

// CheckLevels decides key at every level of a rule with levels, org first, none stopping
// the others: Service.Quota's levels (limiter.LevelChecker). A rule without levels has none.
func (c *Checker) CheckLevels(ctx context.Context, key string, now time.Time) ([]limiter.Decision, []string, error) {
	l := &c.rule.Levels
	if l.N == 0 {
		return nil, nil, nil
	}
	keys := l.Keys(key)
	out := make([]limiter.Decision, len(keys))
	for i, k := range keys {
		d, err := c.checkTarget(ctx, target{key: k, under: i < l.N-1}, now, l.Max[i], limitOf(l.Max[i]))
		if err != nil {
			return nil, nil, err
		}
		if !d.Allowed {
			d.Level = k
		}
		out[i] = d
	}
	return out, keys, nil
}

var _ limiter.LevelChecker = (*Checker)(nil)
