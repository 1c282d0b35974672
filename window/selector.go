package window

// Selectors choose series by their labels (issue #27). A Selector is the key parameter of
// the reads (exact, a glob, or "" for any key) and label matchers as PromQL writes them inside
// a selector's braces, compiled once:
//
//   - A series' labels are its key (the label named "key", which every series has) and the
//     labels of its series string (labels.go). A label a series does not have reads as "",
//     so code="" selects the series without code and code!="" those with it, as in
//     Prometheus (a series with label l="" is a series without l).
//   - = and != compare a value; =~ and !~ match a regular expression, fully anchored, in
//     RE2 syntax as Go's regexp reads it, with . matching any character: the expression v is
//     compiled as ^(?s:v)$, exactly as Prometheus' FastRegexMatcher does, so code=~"5.."
//     matches 503 and not 5031.
//   - The key parameter is one more constraint on the key label: an exact key matches every
//     series of that key, labelled or not (key=tenant-1 selects "tenant-1" and
//     "tenant-1\xFFroute=/pay" alike), a glob matches keys by MatchKey, "" any key.
//   - Every matcher must accept a series for the selector to accept it. Order does not
//     matter; several matchers may name one label.
//
// Match allocates nothing. Equality, and the regular expressions worth it, are compared as
// strings: a literal (a, also ""), an alternation of literals (a|b|c: a short list, or a map
// from 16 literals), .* (any value), .+ (any but ""), a prefix (foo.*), a suffix (.*foo), a
// substring (.*foo.*), and literals and single characters in sequence (5.., v1\.., .{3}),
// optionally ending in .* or .+. Any other expression runs Go's regexp, after a check of
// its literal prefix and suffix when it has them. FuzzSelectorMatch holds the fast paths to
// the regexp.
//
// An exact key matches one series only when the metric has no labelled series; ExactKey and
// Store.LabelledSeries let a reader keep the one lookup then (ReadSelected does).

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MatchOp is how a Matcher compares a label's value; the order is Prometheus'
// labels.MatchType's.
type MatchOp uint8

// Matcher operations.
const (
	MatchEqual     MatchOp = iota // =
	MatchNotEqual                 // !=
	MatchRegexp                   // =~
	MatchNotRegexp                // !~
)

var opNames = [...]string{"=", "!=", "=~", "!~"}

// String is the operator as PromQL writes it.
func (op MatchOp) String() string {
	if int(op) < len(opNames) {
		return opNames[op]
	}
	return "MatchOp(" + strconv.Itoa(int(op)) + ")"
}

// Matcher is one label matcher of a selector: name op "value", as PromQL writes it
// (http_route="/pay", code=~"5.."). The name "key" addresses the key label.
type Matcher struct {
	Name  string
	Op    MatchOp
	Value string
}

// String is m as PromQL writes it, the value quoted.
func (m Matcher) String() string { return m.Name + m.Op.String() + strconv.Quote(m.Value) }

// ErrMatcher is returned by CompileSelector for a matcher it cannot compile: a label name
// that no series can have, an unknown operator, a regular expression Go's regexp refuses.
// The message names the matcher.
var ErrMatcher = errors.New("window: invalid matcher")

// Selector is a compiled key parameter and label matchers (see the file comment). It is
// immutable and safe for concurrent use. A nil *Selector selects every series. Match costs
// a comparison of the key, then one walk over the series' labels for the matchers answered
// by string comparisons and, when a series passes them, one more for those that run a
// regexp; it stops at the first matcher that refuses.
type Selector struct {
	key     string // the key parameter
	keyGlob bool   // key is a pattern (MatchKey)
	exact   string // the one key every selected series has, when exactOK
	exactOK bool
	keyMs   []valueMatcher // matchers of the key label
	ms      []valueMatcher // matchers of other labels compared as strings, sorted by name
	res     []valueMatcher // those that run a regexp, sorted by name: tried after ms
}

// CompileSelector compiles key (a series' key, a key pattern with '*', or "" for any key)
// and the label matchers ms into a Selector, or returns an error wrapping ErrMatcher that
// names the first matcher it cannot compile.
func CompileSelector(key string, ms []Matcher) (*Selector, error) {
	s := &Selector{key: key, keyGlob: IsKeyPattern(key)}
	if key != "" && !s.keyGlob {
		s.exact, s.exactOK = key, true
	}
	for _, m := range ms {
		vm, err := compileMatcher(m)
		if err != nil {
			return nil, err
		}
		switch {
		case m.Name == KeyLabel:
			s.keyMs = append(s.keyMs, vm)
			if lit, ok := vm.literal(); ok && !s.exactOK {
				s.exact, s.exactOK = lit, true
			}
		case vm.kind == kindRegexp:
			s.res = append(s.res, vm)
		default:
			s.ms = append(s.ms, vm)
		}
	}
	byName := func(a, b valueMatcher) int { return strings.Compare(a.name, b.name) }
	slices.SortStableFunc(s.ms, byName)
	slices.SortStableFunc(s.res, byName)
	if s.exact == "" {
		s.exactOK = false // no series has an empty key
	}
	return s, nil
}

// ExactKey reports the one key every series the selector matches has, when its key
// parameter or a key="…" matcher names one. On a metric without labelled series
// (Store.LabelledSeries) the selector then matches at most the series of that key alone,
// and Match(key) says whether it does: one lookup instead of a scan.
func (s *Selector) ExactKey() (key string, ok bool) {
	if s == nil {
		return "", false
	}
	return s.exact, s.exactOK
}

// Match reports whether series string series (labels.go) is selected. It allocates nothing.
func (s *Selector) Match(series string) bool {
	if s == nil {
		return true
	}
	key, rest := series, ""
	if i := strings.IndexByte(series, LabelSep); i >= 0 {
		key, rest = series[:i], series[i:]
	}
	switch {
	case s.key == "":
	case s.keyGlob:
		if !MatchKey(s.key, key) {
			return false
		}
	case key != s.key:
		return false
	}
	for i := range s.keyMs {
		if !s.keyMs[i].match(key) {
			return false
		}
	}
	// The string comparisons first, over every label; the regexps only for what is left.
	return matchLabels(s.ms, rest) && matchLabels(s.res, rest)
}

// matchLabels reports whether every matcher of ms (sorted by name) accepts the value of its
// label in rest, the labels of a series string (0xFF name=value …, sorted by name), or ""
// when rest has none: one walk over both.
func matchLabels(ms []valueMatcher, rest string) bool {
	if len(ms) == 0 {
		return true
	}
	name, value, rest, more := nextLabel(rest)
	for i := range ms {
		m := &ms[i]
		c := 1
		for more {
			if c = compareNames(name, m.name); c >= 0 {
				break
			}
			name, value, rest, more = nextLabel(rest)
		}
		v := ""
		if more && c == 0 {
			v = value
		}
		if !m.match(v) {
			return false
		}
	}
	return true
}

// nextLabel splits the first label off rest (0xFF name=value …); more is false when rest
// holds none. (Byte loops, not IndexByte: names and values are short, and a call to the
// vector search per label cost more than the loop.)
func nextLabel(rest string) (name, value, tail string, more bool) {
	if rest == "" {
		return "", "", "", false
	}
	i := 1
	for i < len(rest) && rest[i] != '=' && rest[i] != LabelSep {
		i++
	}
	name = rest[1:i]
	if i == len(rest) || rest[i] == LabelSep {
		return name, "", rest[i:], true // not written by AppendSeries
	}
	j := i + 1
	for j < len(rest) && rest[j] != LabelSep {
		j++
	}
	return name, rest[i+1 : j], rest[j:], true
}

// compareNames is strings.Compare of two label names, answered by their first bytes when
// they differ, as most do, without a call.
func compareNames(a, b string) int {
	if a != "" && b != "" && a[0] != b[0] {
		if a[0] < b[0] {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// labelValueIn is the value of label name in rest, the labels of a series string, or "".
func labelValueIn(rest, name string) string {
	for n, v, tail, more := nextLabel(rest); more; n, v, tail, more = nextLabel(tail) {
		if n == name {
			return v
		}
		if n > name {
			break // sorted: past name, it is absent
		}
	}
	return ""
}

// ReadSelected is ReadKey for a selector: ReadMerged of every series of metric sel matches,
// or, when sel names one key and metric has no labelled series, ReadAt of that key (one
// lookup, stop never asked). stop is as ReadKey takes it. It returns ErrNotFound when no
// series matched.
func (s *Store) ReadSelected(now int64, metric string, sel *Selector, window time.Duration, qs []float64, stop func() bool) (Agg, error) {
	if key, ok := sel.ExactKey(); ok && s.LabelledSeries(metric) == 0 {
		if !sel.Match(key) {
			return Agg{}, ErrNotFound
		}
		return s.ReadAt(now, metric, key, window, qs)
	}
	return s.ReadMerged(now, metric, func(k string) bool { return (stop == nil || !stop()) && sel.Match(k) }, window, qs)
}

// ReadRangeSelected is ReadRangeKey for a selector: ReadRangeMerged of the series sel
// matches, or ReadRangeAt of one key as ReadSelected decides.
func (s *Store) ReadRangeSelected(now int64, metric string, sel *Selector, w, step time.Duration, qs []float64, stop func() bool) ([]Agg, error) {
	if key, ok := sel.ExactKey(); ok && s.LabelledSeries(metric) == 0 {
		if !sel.Match(key) {
			return nil, ErrNotFound
		}
		return s.ReadRangeAt(now, metric, key, w, step, qs)
	}
	return s.ReadRangeMerged(now, metric, func(k string) bool { return (stop == nil || !stop()) && sel.Match(k) }, w, step, qs)
}
