package usage

// Label selection of rules (issue #27): match: holds PromQL label matchers as the read
// routes' match= does (route="/pay",code=~"5.."), read by Prometheus' own parser through
// promsel, as package query reads match=. The parser is a library, not a route: this package still serves no
// HTTP (limiter/imports_test.go).

import (
	"errors"
	"strings"

	"github.com/slide-metrics/slide/promsel"
	"github.com/slide-metrics/slide/window"
)

// MaxMatchBytes is the longest match: a rule may have, as the read routes' match=.
const MaxMatchBytes = promsel.MaxBytes

// ParseMatch reads a rule's match: (empty: no matchers), PromQL label matchers as written
// inside a selector's braces, with promsel (the parser of the read routes' match=), and
// compiles them (window.CompileSelector), so a matcher no series can satisfy the syntax of
// is refused here. __name__ is refused: the metric is metric:.
func ParseMatch(s string) ([]window.Matcher, error) {
	ms, err := promsel.Parse(s, "metric:")
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), promsel.ErrMatchers.Error()+": "))
	}
	if _, err := window.CompileSelector("", ms); err != nil {
		return nil, err
	}
	return ms, nil
}
