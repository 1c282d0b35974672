package usage

// Label selection of rules (issue #27): match: holds PromQL label matchers as the read
// routes' match= does (route="/pay",code=~"5.."), read by Prometheus' own parser, as package
// query reads match=. The parser is a library, not a route: this package still serves no
// HTTP (limiter/imports_test.go).

import (
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/slide-metrics/slide/window"
)

// promParser reads match:. It is safe for concurrent use.
var promParser = parser.NewParser(parser.Options{})

// MaxMatchBytes is the longest match: a rule may have, as the read routes' match=.
const MaxMatchBytes = 4096

// matchOps maps Prometheus' match types onto window's, spelled out so that a new type in
// Prometheus is refused rather than misread.
var matchOps = map[labels.MatchType]window.MatchOp{
	labels.MatchEqual:     window.MatchEqual,
	labels.MatchNotEqual:  window.MatchNotEqual,
	labels.MatchRegexp:    window.MatchRegexp,
	labels.MatchNotRegexp: window.MatchNotRegexp,
}

// ParseMatch reads a rule's match: (empty: no matchers), PromQL label matchers as written
// inside a selector's braces, and compiles them (window.CompileSelector), so a matcher no
// series can satisfy the syntax of is refused here. __name__ is refused: the metric is
// metric:.
func ParseMatch(s string) ([]window.Matcher, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > MaxMatchBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(s), MaxMatchBytes)
	}
	lms, err := promParser.ParseMetricSelector("{" + s + "}")
	if err != nil {
		return nil, fmt.Errorf("%q: %v (want PromQL label matchers as written inside a selector's braces, such as route=\"/pay\",code=~\"5..\")", limitLen(s), err)
	}
	ms := make([]window.Matcher, 0, len(lms))
	for _, lm := range lms {
		op, ok := matchOps[lm.Type]
		if !ok {
			return nil, fmt.Errorf("%s: unknown operator", limitLen(lm.String()))
		}
		if lm.Name == labels.MetricName {
			return nil, fmt.Errorf("%s: the metric is given by metric:, not by a %s matcher", limitLen(lm.String()), labels.MetricName)
		}
		ms = append(ms, window.Matcher{Name: lm.Name, Op: op, Value: lm.Value})
	}
	if _, err := window.CompileSelector("", ms); err != nil {
		return nil, err
	}
	return ms, nil
}

// limitLen clips s for an error message.
func limitLen(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
