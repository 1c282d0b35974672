package promapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/slide-metrics/slide/internal/suggest"
)

// emptyHint is the warning of a selector that selects no slide name, saying why the answer
// is empty (Prometheus' own answer, an empty result, would not): classic buckets, a name
// PromQL cut at an operator, or a name slide does not have. nil when none applies.
func (q *querier) emptyHint(ctx context.Context, ms []*labels.Matcher) error {
	if w := q.bucketHint(ctx, ms); w != nil {
		return w
	}
	if w := q.operatorNameHint(ctx, ms); w != nil {
		return w
	}
	return q.unknownNameHint(ctx, ms)
}

// maxSuggestions bounds the unknown names of one query given the nearest name: each costs
// an edit distance to every name slide has (a quarter of a second for a 250-byte name
// against 1,000 metrics), and a query of 100 such names took 25 s before a word of its
// answer. The answer shows 10 warnings; later names are still warned of, without a guess.
const maxSuggestions = 10

// closest is suggest.Closest, which TestUnknownNameHintsBounded counts.
var closest = suggest.Closest

// unknownNameHint is the warning for a selector of a name slide does not expose
// (latency_count for latency_ms_count, an exporter's http_requests_total): a panel of it
// stays blank, and slide knows every name it has, so the warning names the nearest and how
// slide names its metrics. nil for a selector naming no one name, or for the first piece
// of a name PromQL cut at an operator (req of req-latency_count), which the last piece's
// warning (operatorNameHint) explains.
func (q *querier) unknownNameHint(ctx context.Context, ms []*labels.Matcher) error {
	for _, m := range ms {
		if m.Name != labels.MetricName || m.Type != labels.MatchEqual {
			continue
		}
		all, err := q.metrics(ctx)
		if err != nil {
			return nil
		}
		msg := fmt.Sprintf("%s is no name slide has", m.Value)
		if len(all) == 0 {
			return fmt.Errorf("%s: it holds no series yet", msg)
		}
		for _, metric := range all {
			if len(metric) > len(m.Value) && strings.HasPrefix(metric, m.Value) && cutsName(metric[len(m.Value)]) {
				return nil
			}
		}
		shown := all
		// no metric is longer than 256: no distance to take
		if len(m.Value) <= 256 && q.suggested.Add(1) <= maxSuggestions {
			names := make([]string, 0, len(all)*len(kindSuffix))
			for _, metric := range all {
				for _, suffix := range kindSuffix {
					names = append(names, metric+suffix)
				}
			}
			slices.Sort(names)
			names = slices.Compact(names)
			if ordered, near := closest(m.Value, names); near > 0 {
				msg += fmt.Sprintf(" (did you mean %s?)", ordered[0])
			}
			shown, _ = closest(m.Value, all) // the nearest first
		}
		if len(shown) > 10 {
			shown = append(shown[:10:10], "…")
		}
		return fmt.Errorf("%s; each slide metric M is M (a native histogram), M_count, M_sum and M_max; slide metrics: %s",
			msg, strings.Join(shown, ", "))
	}
	return nil
}
