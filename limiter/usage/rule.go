package usage

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/window"
)

// ErrInvalidRule wraps every rule problem. A *RuleError also matches
// limiter.ErrInvalidPolicy, so callers that load a whole policy file branch once.
var ErrInvalidRule = errors.New("invalid usage rule")

// RuleError describes one problem of one rule.
type RuleError struct {
	Source string // "file:line", may be empty
	Rule   string // rule name, may be empty
	Field  string // policy-file field, may be empty
	Msg    string
}

func (e *RuleError) Error() string {
	s := ""
	if e.Source != "" {
		s = e.Source + ": "
	}
	if e.Rule != "" {
		s += fmt.Sprintf("rule %q: ", limiter.ClipName(e.Rule))
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Msg
}

// Unwrap returns ErrInvalidRule and limiter.ErrInvalidPolicy.
func (e *RuleError) Unwrap() []error { return []error{ErrInvalidRule, limiter.ErrInvalidPolicy} }

// Agg is the aggregate a rule compares with its Max: window.Stat, the one vocabulary the
// query API, exports and rules share. The zero value is invalid (no agg given).
type Agg = window.Stat

// AggKind names an aggregate family.
type AggKind = window.StatKind

// The aggregates, named as in the policy file.
const (
	KindCount    = window.StatCount    // events (weights summed) in the window
	KindSum      = window.StatSum      // sum of the values
	KindAvg      = window.StatAvg      // sum / count
	KindMin      = window.StatMin      // smallest value
	KindMax      = window.StatMax      // largest value
	KindRate     = window.StatRate     // events per second of the elapsed window
	KindQuantile = window.StatQuantile // a quantile, within the sketch's accuracy
)

// ParseAgg reads count, sum, avg, min, max, rate, a percentile (p95, p99.9, p999) or a
// quantile written as a fraction (0.95): window.ParseStat, with the policy file's error.
func ParseAgg(s string) (Agg, error) {
	a, ok := window.ParseStat(s)
	if !ok {
		return Agg{}, fmt.Errorf("%q is not %s or a percentile such as p95", strings.ToLower(strings.TrimSpace(s)), window.StatNames)
	}
	return a, nil
}

// KeyPlaceholder in Rule.Key stands for the key of the request being decided.
const KeyPlaceholder = "{key}"

// Rule denies a request while an aggregate of a metric's window exceeds a bound:
//
//	rules:
//	  - {name: tenant-quota, metric: cost, agg: sum, window: 1h, max: 1000}
//	  - {name: shed-slow, metric: latency_ms, agg: p95, window: 5m, max: 800, key: "*"}
//
// The first denies a tenant once the sum of its cost events over the last hour exceeds
// 1000; the second sheds every request while the p95 latency over all series exceeds
// 800 ms. A request names a rule like a policy ("policy": "tenant-quota").
//
// A Rule is plain data; NewChecker validates it against the store and compiles it.
type Rule struct {
	// Name identifies the rule in requests, denials and metrics: 1..64 of [A-Za-z0-9_.-],
	// unique among policies and rules.
	Name string
	// Metric is the window metric read, e.g. cost or latency_ms. Required.
	Metric string
	// Agg is the aggregate compared with Max. Required.
	Agg Agg
	// Window is the span read: a positive multiple of the metric's slot width, at most the
	// reach of its rings (checked by NewChecker): "7d" reads seven days, through the ring's
	// tiers when its own slots keep less. Required unless Calendar is set.
	Window time.Duration
	// Calendar, instead of Window, reads from the last boundary of the calendar in Timezone
	// (local midnight, Monday 00:00, the 1st at 00:00) to now: "window: calendar_day" in
	// the file. The read takes whole slots, its start rounded down to the slot (of the ring
	// or of the tier holding it) containing the boundary; see the package doc.
	Calendar window.Calendar
	// Timezone is the IANA zone of Calendar's boundaries, e.g. America/New_York; default UTC.
	Timezone string
	// Max is the bound: the rule denies while the aggregate is strictly greater than Max.
	// Must be finite; ≥ 0 for count and rate.
	Max float64
	// Key selects the series read. Default "{key}": the series of the request's key. The
	// placeholder may sit inside a longer key ("{key}/checkout"); a key containing '*' is a
	// glob whose matching series are merged ("*" alone: every series of the metric, for
	// global shedding).
	Key string
	// Match selects the series read by their labels besides key (issue #27): PromQL label
	// matchers as the read routes' match= takes them, e.g. `route="/pay",code=~"5.."` (see
	// ParseMatch). The rule then reads every series whose key Key matches (exact: the key's
	// series, labelled or not; a glob: on the key label) and whose labels the matchers
	// accept, merged. Default "": the series Key names, as before labels.
	Match string
	// OnUnavailable is what the rule decides when its window cannot be read whole: with
	// several instances, an owner of some of the topic's partitions is down, hung or
	// restoring, this instance included (partitions a rebalance gave it, even every one,
	// are not read until restored). "open" (the default, as Envoy's failure mode) allows, marked Degraded;
	// "closed" fails the decision with limiter.ErrBackendUnavailable (503). Both are
	// counted in slide_cluster_unavailable_total{caller="usage_open"|"usage_closed"}. A
	// count, max or non-negative sum already over Max in the part that could be read is
	// denied (Degraded) in either mode, counted as caller="usage_denied_anyway": the
	// missing part can only add to it.
	OnUnavailable string
	// Levels, when it has any (N > 0), splits the request's key and bounds each level with
	// its own max instead of Max, which is then 0: see RuleLevels. Key must be "{key}".
	Levels RuleLevels
	// Source is "file:line" of the rule in its file, set by ParseRules.
	Source string

	loc *time.Location // Timezone, loaded by Validate
}

// RuleLevels bounds every level of a key, as limiter.Levels charges them (issue #29): with
// Separator "/" and Max [50000, 20000, 5000], a request of org-1/team-a/user-7 is denied
// while the aggregate of org-1 is over 50000, that of org-1/team-a over 20000 or that of
// org-1/team-a/user-7 over 5000, the first of them from the top named in the decision
// (Decision.Level). A level above the last reads its prefix's series and every series
// under it (org-1 and org-1/*, merged); the last level reads the request's key, which
// holds the rest of the key, separators and all (limiter.Levels.LevelKeys). A key with
// fewer parts is checked at the levels it has: org-1/team-a against 50000 over org-1's
// series and 20000 over the team's.
//
//	levels: {separator: "/", max: [50000, 20000, 5000]}
type RuleLevels struct {
	Separator string
	Max       [limiter.MaxLevels]float64
	N         int // levels in use: Max[:N]
}

// Keys returns the keys of key's levels, the org's first.
func (l *RuleLevels) Keys(key string) []string {
	ll := limiter.Levels{Separator: l.Separator, N: l.N}
	return ll.LevelKeys(key)
}

func (l *RuleLevels) validate(r *Rule) string {
	switch {
	case l.N < 1 || l.N > limiter.MaxLevels:
		return fmt.Sprintf("max: want a list of 1 to %d maxima, one per level", limiter.MaxLevels)
	case l.Separator == "" || len(l.Separator) > 4 || !limiter.ValidateLevelSeparator(l.Separator):
		return "separator must be 1 to 4 printable characters, such as \"/\""
	case r.Max != 0:
		return "a rule with levels takes no max: each level has its own (levels: {max: [...]})"
	case r.Key != "" && r.Key != KeyPlaceholder:
		return fmt.Sprintf("split the request's key: key must be %s (the default), not %q", KeyPlaceholder, r.Key)
	case r.Agg.Kind == KindQuantile:
		// A level's series are read as two keys through the cluster (the prefix and
		// prefix/*); their counts, sums, minima and maxima merge, their quantiles do not.
		return fmt.Sprintf("take count, sum, avg, min, max or rate, not a quantile (%s): a level's series cannot be merged into one quantile across instances", r.Agg)
	}
	for i, v := range l.Max[:l.N] {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Sprintf("max %v of level %d must be a finite number above 0", v, i+1)
		}
	}
	for _, v := range l.Max[l.N:] {
		if v != 0 {
			return "max beyond N must be 0"
		}
	}
	return ""
}

// OnUnavailable modes.
const (
	UnavailableOpen   = "open"
	UnavailableClosed = "closed"
)

// Validate checks the rule's own fields; NewChecker also checks Window against the store.
func (r *Rule) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &RuleError{Source: r.Source, Rule: r.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case !limiter.ValidName(r.Name):
		return bad("name", "must be 1 to 64 characters of A-Z a-z 0-9 _ . -")
	case r.Metric == "":
		return bad("metric", "required")
	case !r.Agg.Valid() && r.Agg.Kind != KindQuantile:
		return bad("agg", "required: %s or a percentile such as p95", window.StatNames)
	case r.Agg.Kind == KindQuantile && !(r.Agg.Q >= 0 && r.Agg.Q <= 1):
		return bad("agg", "quantile %v outside [0, 1]", r.Agg.Q)
	case r.Window <= 0 && r.Calendar == window.CalendarNone:
		return bad("window", "required: a length such as 1h or 7d, or calendar_day, calendar_week or calendar_month")
	case r.Window > 0 && r.Calendar != window.CalendarNone:
		return bad("window", "a length or a calendar window, not both")
	case r.Timezone != "" && r.Calendar == window.CalendarNone:
		return bad("timezone", "only a calendar window (calendar_day, calendar_week, calendar_month) has a time zone")
	case math.IsNaN(r.Max) || math.IsInf(r.Max, 0):
		return bad("max", "must be a finite number")
	case r.Max < 0 && (r.Agg.Kind == KindCount || r.Agg.Kind == KindRate):
		return bad("max", "%v: a %s is never negative, so the rule would deny everything", r.Max, r.Agg)
	case r.OnUnavailable != "" && r.OnUnavailable != UnavailableOpen && r.OnUnavailable != UnavailableClosed:
		return bad("on_unavailable", "%q is not open or closed", r.OnUnavailable)
	case strings.Count(r.Key, KeyPlaceholder) > 1:
		return bad("key", "%q: the placeholder %s may appear once", r.Key, KeyPlaceholder)
	}
	if r.Levels != (RuleLevels{}) {
		if msg := r.Levels.validate(r); msg != "" {
			return bad("levels", "%s", msg)
		}
	}
	if _, err := ParseMatch(r.Match); err != nil {
		return bad("match", "%s", strings.TrimPrefix(err.Error(), "window: "))
	}
	if r.Calendar != window.CalendarNone {
		loc, err := loadZone(r.Timezone)
		if err != nil {
			return bad("timezone", "%v", err)
		}
		r.loc = loc
	}
	return nil
}

// loadZone loads an IANA zone name; "" is UTC.
func loadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("%q: give an IANA zone such as Europe/Paris, not the server's local time", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not a known IANA time zone such as America/New_York or Asia/Kolkata", name)
	}
	return loc, nil
}

// ruleFields are the keys a rule may have in the policy file.
var ruleFields = []string{"name", "metric", "agg", "window", "timezone", "max", "key", "match", "on_unavailable", "levels"}

// ParseRules reads the top-level "rules" list of a policy file (YAML); every other
// top-level key (the limiter's "policies") is left to its own parser. source names the file
// in errors ("policies.yaml:12: rule \"tenant-quota\": window: ..."). A file without rules
// gives none. Unknown fields in a rule are errors, so a typo cannot silently disable it.
// Names must be unique among the rules; NewService checks them against the policies.
func ParseRules(data []byte, source string) ([]Rule, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		pe := limiter.SyntaxError(source, data, err)
		return nil, &RuleError{Source: pe.Source, Msg: pe.Msg}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &RuleError{Source: at(source, root), Msg: "a policy file is a mapping with policies and rules"}
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "rules" {
			list = root.Content[i+1]
		}
	}
	if list == nil || list.Tag == "!!null" {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, &RuleError{Source: at(source, list), Field: "rules", Msg: "must be a list of rules"}
	}
	var rules []Rule
	var errs []error
	seen := map[string]string{}
	for _, n := range list.Content {
		r, err := parseRule(n, source)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, dup := seen[r.Name]; dup {
			errs = append(errs, &RuleError{Source: r.Source, Rule: r.Name, Field: "name", Msg: "duplicate rule name (first defined at " + first + ")"})
			continue
		}
		seen[r.Name] = r.Source
		rules = append(rules, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

func at(source string, n *yaml.Node) string {
	if source == "" {
		return "line " + strconv.Itoa(n.Line)
	}
	return source + ":" + strconv.Itoa(n.Line)
}

// ParseRuleNode parses one rule mapping from a YAML node of a file named source, for files
// that hold rules elsewhere than a top-level "rules" list (the rate limit service's
// descriptors). defaultName names a rule without a "name" field; "" requires the field.
// Errors are *RuleError with the node's line.
func ParseRuleNode(n *yaml.Node, source, defaultName string) (Rule, error) {
	if n != nil && n.Kind == yaml.MappingNode && defaultName != "" {
		named := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			named = named || n.Content[i].Value == "name"
		}
		if !named {
			c := *n
			c.Content = append([]*yaml.Node{
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: "name", Line: n.Line},
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: defaultName, Line: n.Line},
			}, n.Content...)
			n = &c
		}
	}
	if n == nil {
		return Rule{}, &RuleError{Source: source, Msg: "empty rule"}
	}
	return parseRule(n, source)
}

func parseRule(n *yaml.Node, source string) (Rule, error) {
	src := at(source, n)
	r := Rule{Source: src}
	if n.Kind != yaml.MappingNode {
		return r, &RuleError{Source: src, Msg: "a rule is a mapping such as {name: tenant-quota, metric: cost, agg: sum, window: 1h, max: 1000}"}
	}
	vals := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		if !contains(ruleFields, k) {
			return r, &RuleError{Source: at(source, n.Content[i]), Field: k, Msg: "unknown field (a rule has " + strings.Join(ruleFields, ", ") + ")"}
		}
		if _, dup := vals[k]; dup {
			return r, &RuleError{Source: src, Field: k, Msg: "given twice"}
		}
		vals[k] = v
	}
	str := func(k string) (string, error) {
		v := vals[k]
		if v == nil {
			return "", nil
		}
		if v.Kind != yaml.ScalarNode {
			return "", &RuleError{Source: src, Field: k, Msg: "must be a string"}
		}
		return v.Value, nil
	}
	var err error
	if r.Name, err = str("name"); err != nil {
		return r, err
	}
	bad := func(field, format string, args ...any) error {
		return &RuleError{Source: src, Rule: r.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if r.Metric, err = str("metric"); err != nil {
		return r, err
	}
	if r.Key, err = str("key"); err != nil {
		return r, err
	}
	if r.Match, err = str("match"); err != nil {
		return r, err
	}
	if r.OnUnavailable, err = str("on_unavailable"); err != nil {
		return r, err
	}
	agg, err := str("agg")
	if err != nil {
		return r, err
	}
	if agg != "" {
		if r.Agg, err = ParseAgg(agg); err != nil {
			return r, bad("agg", "%v", err)
		}
	}
	win, err := str("window")
	if err != nil {
		return r, err
	}
	if r.Timezone, err = str("timezone"); err != nil {
		return r, err
	}
	if cal, ok := window.ParseCalendar(win); ok {
		r.Calendar = cal
	} else if win != "" {
		if r.Window, err = window.ParseWindow(win); err != nil {
			return r, bad("window", "%v (or calendar_day, calendar_week, calendar_month)", err)
		}
	}
	mx, err := str("max")
	if err != nil {
		return r, err
	}
	if lv := vals["levels"]; lv != nil {
		if msg := parseLevels(lv, &r.Levels); msg != "" {
			return r, &RuleError{Source: at(source, lv), Rule: r.Name, Field: "levels", Msg: msg}
		}
		if mx != "" {
			return r, bad("max", "a rule with levels takes no max: each level has its own (levels: {max: [...]})")
		}
		if err := r.Validate(); err != nil {
			var re *RuleError
			if errors.As(err, &re) && re.Field == "levels" {
				re.Source = at(source, lv)
			}
			return r, err
		}
		return r, nil
	}
	if mx == "" {
		return r, bad("max", "required")
	}
	if r.Max, err = strconv.ParseFloat(mx, 64); err != nil {
		return r, bad("max", "%q is not a number", mx)
	}
	return r, r.Validate()
}

// parseLevels reads {separator: "/", max: [50000, 20000, 5000]} into l, or says what is
// wrong; as limiter's policies read theirs, with max: for limits: (a separator left out
// is "/"; one given empty is refused by Validate).
func parseLevels(v *yaml.Node, l *RuleLevels) string {
	const want = `want {separator: "/", max: [50000, 20000, 5000]}`
	if v.Kind != yaml.MappingNode {
		return want
	}
	sep := false
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		switch k.Value {
		case "separator":
			if x.Kind != yaml.ScalarNode {
				return "separator: " + want
			}
			l.Separator, sep = x.Value, true
		case "max":
			if x.Kind != yaml.SequenceNode || len(x.Content) == 0 || len(x.Content) > limiter.MaxLevels {
				return fmt.Sprintf("max: want a list of 1 to %d maxima, one per level", limiter.MaxLevels)
			}
			for j, e := range x.Content {
				f, err := strconv.ParseFloat(e.Value, 64)
				if err != nil || e.Kind != yaml.ScalarNode || e.Tag == "!!str" {
					return fmt.Sprintf("max: level %d: must be a number, not %q", j+1, limiter.ClipName(e.Value))
				}
				l.Max[j] = f
			}
			l.N = len(x.Content)
		default:
			return fmt.Sprintf("unknown field %q; %s", limiter.ClipName(k.Value), want)
		}
	}
	if l.N == 0 {
		return "max: missing; " + want
	}
	if !sep {
		l.Separator = "/"
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
