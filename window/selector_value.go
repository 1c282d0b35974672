package window

// The value matchers of a Selector (selector.go): how one matcher compiles, and the string
// comparisons that answer the regular expressions worth it without running Go's regexp.

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// matchKind is how a valueMatcher tests a value.
type matchKind uint8

const (
	kindEqual    matchKind = iota // v == lit
	kindSet                       // v is one of set (or in setMap)
	kindAny                       // always
	kindNonEmpty                  // v != ""
	kindPrefix                    // HasPrefix(v, lit)
	kindSuffix                    // HasSuffix(v, lit)
	kindContains                  // Contains(v, lit)
	kindSeq                       // seq then, per tail, nothing, anything, or at least one character
	kindRegexp                    // lit and suffix as filters, then re
)

// setMapMin is the size from which an alternation of literals is looked up in a map rather
// than compared one by one (Prometheus measured 16 for the same choice).
const setMapMin = 16

// valueMatcher is one compiled Matcher.
type valueMatcher struct {
	name   string
	kind   matchKind
	neg    bool // != or !~: the test's answer is inverted
	lit    string
	suffix string // kindRegexp: a literal every match ends with
	set    []string
	setMap map[string]struct{}
	seq    []seqStep
	tail   seqTail
	re     *regexp.Regexp // =~ and !~: the expression, which the fast paths stand for
}

// seqStep is a literal followed by a number of single characters (runes, as the regexp
// steps through them: an invalid byte is one).
type seqStep struct {
	lit string
	any int
}

// seqTail is what may follow a kindSeq's steps.
type seqTail uint8

const (
	tailNone     seqTail = iota // nothing
	tailAny                     // .*
	tailNonEmpty                // .+
)

func (m *valueMatcher) match(v string) bool { return m.test(v) != m.neg }

func (m *valueMatcher) test(v string) bool {
	switch m.kind {
	case kindEqual:
		return v == m.lit
	case kindSet:
		if m.setMap != nil {
			_, ok := m.setMap[v]
			return ok
		}
		for _, s := range m.set {
			if v == s {
				return true
			}
		}
		return false
	case kindAny:
		return true
	case kindNonEmpty:
		return v != ""
	case kindPrefix:
		return strings.HasPrefix(v, m.lit)
	case kindSuffix:
		return strings.HasSuffix(v, m.lit)
	case kindContains:
		return strings.Contains(v, m.lit)
	case kindSeq:
		return m.testSeq(v)
	}
	if !strings.HasPrefix(v, m.lit) || !strings.HasSuffix(v, m.suffix) {
		return false
	}
	return m.re.MatchString(v)
}

// testSeq is test of a kindSeq: the steps in order, deterministic (no step can take a
// varying length), then the tail.
func (m *valueMatcher) testSeq(v string) bool {
	for _, st := range m.seq {
		if !strings.HasPrefix(v, st.lit) {
			return false
		}
		v = v[len(st.lit):]
		for range st.any {
			if v == "" {
				return false
			}
			if v[0] < utf8.RuneSelf {
				v = v[1:]
				continue
			}
			_, w := utf8.DecodeRuneInString(v)
			v = v[w:]
		}
	}
	switch m.tail {
	case tailAny:
		return true
	case tailNonEmpty:
		return v != ""
	}
	return v == ""
}

// literal reports the one value m accepts, when it accepts exactly one.
func (m *valueMatcher) literal() (string, bool) {
	switch {
	case m.neg:
		return "", false
	case m.kind == kindEqual:
		return m.lit, true
	case m.kind == kindSet && len(m.set) == 1:
		return m.set[0], true
	}
	return "", false
}

// compileMatcher checks m's name and operator and compiles its value.
func compileMatcher(m Matcher) (valueMatcher, error) {
	vm := valueMatcher{name: m.Name, lit: m.Value}
	if m.Name != KeyLabel && !ValidLabelName(m.Name) {
		return vm, fmt.Errorf("%w %s: a label name is [a-zA-Z_][a-zA-Z0-9_]*, not starting with __", ErrMatcher, m)
	}
	switch m.Op {
	case MatchEqual, MatchNotEqual:
		vm.neg = m.Op == MatchNotEqual
		return vm, nil
	case MatchRegexp, MatchNotRegexp:
		vm.neg = m.Op == MatchNotRegexp
	default:
		return vm, fmt.Errorf("%w %s: unknown operator", ErrMatcher, m)
	}
	parsed, err := syntax.Parse(m.Value, syntax.Perl|syntax.DotNL)
	if err != nil {
		return vm, fmt.Errorf("%w %s: %v", ErrMatcher, m, err)
	}
	// parsed.String(), not the value: a value that parses alone cannot then escape the
	// anchoring group (a)|(b would, and \Q…'s quote would swallow the closing parenthesis).
	re, err := regexp.Compile("^(?s:" + parsed.String() + ")$")
	if err != nil {
		return vm, fmt.Errorf("%w %s: %v", ErrMatcher, m, err)
	}
	vm.kind, vm.re, vm.lit = kindRegexp, re, ""
	if set, ok := literalAlternation(m.Value); ok {
		vm.setLiterals(set)
		return vm, nil
	}
	vm.fastPath(unwrap(parsed))
	return vm, nil
}

// literalAlternation splits v, a regexp that parsed, into its alternatives when each is a
// literal without a metacharacter: a, and a|b|c (with "" for an empty alternative). The
// parser would factor abc|abd into ab[cd], so this is read from the text, as Prometheus does.
func literalAlternation(v string) ([]string, bool) {
	parts := strings.Split(v, "|")
	for _, p := range parts {
		if regexp.QuoteMeta(p) != p || strings.ContainsRune(p, utf8.RuneError) {
			return nil, false
		}
	}
	return parts, true
}

// setLiterals makes m accept exactly the strings of set.
func (m *valueMatcher) setLiterals(set []string) {
	if len(set) == 1 {
		m.kind, m.lit = kindEqual, set[0]
		return
	}
	m.kind, m.set = kindSet, set
	if len(set) >= setMapMin {
		m.setMap = make(map[string]struct{}, len(set))
		for _, s := range set {
			m.setMap[s] = struct{}{}
		}
	}
}

// fastPath replaces m's regexp by string comparisons when re (parsed, captures removed) is
// one of the shapes they answer exactly; else it leaves the regexp, with its literal prefix
// and suffix as filters.
func (m *valueMatcher) fastPath(re *syntax.Regexp) {
	if lit, ok := plainLiteral(re); ok {
		m.setLiterals([]string{lit})
		return
	}
	switch {
	case isAnyRun(re, syntax.OpStar):
		m.kind = kindAny
		return
	case isAnyRun(re, syntax.OpPlus):
		m.kind = kindNonEmpty
		return
	case re.Op == syntax.OpAlternate:
		set := make([]string, 0, len(re.Sub))
		for _, sub := range re.Sub {
			lit, ok := plainLiteral(unwrap(sub))
			if !ok {
				set = nil
				break
			}
			set = append(set, lit)
		}
		if set != nil {
			m.setLiterals(set)
			return
		}
	case re.Op == syntax.OpConcat:
		sub := make([]*syntax.Regexp, len(re.Sub))
		for i, s := range re.Sub {
			sub[i] = unwrap(s)
		}
		if m.concatPath(sub) {
			return
		}
		if lit, ok := plainLiteral(sub[0]); ok {
			m.lit = lit
		}
		if lit, ok := plainLiteral(sub[len(sub)-1]); ok && len(sub) > 1 {
			m.suffix = lit
		}
	}
}

// concatPath sets m to a string comparison for a concatenation sub of the shapes
// foo.*, .*foo, .*foo.* and kindSeq's, and reports whether it did.
func (m *valueMatcher) concatPath(sub []*syntax.Regexp) bool {
	n := len(sub)
	star := func(i int) bool { return isAnyRun(sub[i], syntax.OpStar) }
	kind, at := kindEqual, 0
	switch {
	case n == 2 && !star(0) && star(1):
		kind, at = kindPrefix, 0
	case n == 2 && star(0) && !star(1):
		kind, at = kindSuffix, 1
	case n == 3 && star(0) && !star(1) && star(2):
		kind, at = kindContains, 1
	}
	if lit, ok := plainLiteral(sub[at]); ok && kind != kindEqual {
		m.kind, m.lit = kind, lit
		return true
	}
	var seq []seqStep
	tail := tailNone
	for i, s := range sub {
		if i == n-1 {
			if isAnyRun(s, syntax.OpStar) {
				tail = tailAny
				break
			}
			if isAnyRun(s, syntax.OpPlus) {
				tail = tailNonEmpty
				break
			}
		}
		if lit, ok := plainLiteral(s); ok {
			if len(seq) == 0 || seq[len(seq)-1].any > 0 {
				seq = append(seq, seqStep{})
			}
			seq[len(seq)-1].lit += lit
			continue
		}
		k, ok := anyChars(s)
		if !ok {
			return false
		}
		if len(seq) == 0 {
			seq = append(seq, seqStep{})
		}
		seq[len(seq)-1].any += k
	}
	m.kind, m.seq, m.tail, m.lit = kindSeq, seq, tail, ""
	return true
}

// unwrap removes the capturing groups around re: they do not change what matches.
func unwrap(re *syntax.Regexp) *syntax.Regexp {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	return re
}

// plainLiteral reports the string re matches when it is a literal compared byte for byte:
// case-sensitive, and without U+FFFD, which the regexp also matches for an invalid byte.
// The empty expression is the literal "".
func plainLiteral(re *syntax.Regexp) (string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return "", true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || slices.Contains(re.Rune, utf8.RuneError) {
			return "", false
		}
		return string(re.Rune), true
	}
	return "", false
}

// isAnyRun reports whether re is .* (op OpStar) or .+ (OpPlus), with . matching any
// character (the (?s) the selector compiles with).
func isAnyRun(re *syntax.Regexp, op syntax.Op) bool {
	return re.Op == op && unwrap(re.Sub[0]).Op == syntax.OpAnyChar
}

// anyChars reports how many characters re matches when it is . or .{k}.
func anyChars(re *syntax.Regexp) (int, bool) {
	switch {
	case re.Op == syntax.OpAnyChar:
		return 1, true
	case re.Op == syntax.OpRepeat && re.Min == re.Max && re.Min >= 0 && unwrap(re.Sub[0]).Op == syntax.OpAnyChar:
		return re.Min, true
	}
	return 0, false
}
