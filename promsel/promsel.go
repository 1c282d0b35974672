// Package promsel reads label matchers as PromQL writes them inside a selector's braces
// (route="/pay",code=~"5..") into window.Matchers, with Prometheus' own parser: the
// read routes' match= (query) and a usage rule's match: (limiter/usage) read them here, so
// both take the same text and refuse it with the same words. It writes no grammar of its
// own; window.CompileSelector gives the matchers their meaning.
package promsel

import (
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/slide-metrics/slide/window"
)

// MaxBytes is the longest text Parse reads: each regexp is compiled per selector and run
// per series, so the cap keeps one selector from costing length × series, as a glob's
// length cap does.
const MaxBytes = 4096

// ErrMatchers wraps every error of Parse.
var ErrMatchers = errors.New("promsel: bad label matchers")

// promParser is PromQL's grammar, not a copy of it; safe for concurrent use (each call
// parses with a parser of its own).
var promParser = parser.NewParser(parser.Options{})

// ops maps Prometheus' match types onto window's (the same order, spelled out so that a new
// type in Prometheus is refused rather than misread).
var ops = map[labels.MatchType]window.MatchOp{
	labels.MatchEqual:     window.MatchEqual,
	labels.MatchNotEqual:  window.MatchNotEqual,
	labels.MatchRegexp:    window.MatchRegexp,
	labels.MatchNotRegexp: window.MatchNotRegexp,
}

// Parse reads s (empty: no matchers); a bad regexp or label name is window.CompileSelector's
// to refuse, where the matchers are compiled. __name__ is refused: the metric is given by
// metricParam (metric= for a read, metric: for a rule), which the
// message names. Its errors wrap ErrMatchers and say what to write instead; a quoted
// part is clipped to 200 bytes.
func Parse(s, metricParam string) ([]window.Matcher, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrMatchers, len(s), MaxBytes)
	}
	lms, err := promParser.ParseMetricSelector("{" + s + "}")
	if err != nil {
		// Positions count the opening brace this adds.
		return nil, fmt.Errorf("%w: %q: %s: want PromQL label matchers as written inside a selector's braces, such as route=\"/pay\",code=~\"5..\"", ErrMatchers, clip(s), clip(err.Error()))
	}
	ms := make([]window.Matcher, 0, len(lms))
	for _, lm := range lms {
		op, ok := ops[lm.Type]
		if !ok {
			return nil, fmt.Errorf("%w: %s: unknown operator", ErrMatchers, clip(lm.String()))
		}
		if lm.Name == labels.MetricName {
			return nil, fmt.Errorf("%w: %s: the metric is given by %s, not by a %s matcher", ErrMatchers, clip(lm.String()), metricParam, labels.MetricName)
		}
		ms = append(ms, window.Matcher{Name: lm.Name, Op: op, Value: lm.Value})
	}
	return ms, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
