package limiter

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Plans maps keys (tenants) to plan names, and plan names to each policy's and usage
// rule's numbers: a key on plan "pro" gets pro's limit for every policy pro lists, and the
// policy's own for the rest. Build it with ParsePlans or LoadPlans and hand it to
// Service.SetPlans, which checks the names against the policies and rules.
//
//	plans:
//	  free: {daily-requests: {limit: 100}, monthly-tokens: {max: 10000}}
//	  pro:  {daily-requests: {limit: 1000}, monthly-tokens: {max: 1000000}}
//	keys:
//	  tenant-1: pro
//	  "trial-*": free
//
// A key names its plan exactly or through a glob (* any run of bytes, ? one byte); an
// exact key wins over every glob, and among globs the most specific (the most bytes that
// are not wildcards; on a tie, the first in the file) wins. A Plans is immutable.
type Plans struct {
	// Source names the file in messages.
	Source string
	names  []string                 // plan index → name
	lines  []string                 // plan index → "file:line"
	limits []map[string]*PlanLimits // plan index → policy or rule name → numbers
	exact  map[string]int32         // key → plan index (parsing, Lookup's reference)
	table  planIndex                // the same, for decisions: one hash, one probe
	globs  []planGlob               // most specific first
}

// PlanLimits are one plan's numbers for one policy or rule; zero fields keep the policy's
// own. Limit is a windowed policy's limit, Capacity a bucket's, RefillPerSecond and
// LeakPerSecond the buckets' rates, Max a usage rule's bound (HasMax: given).
type PlanLimits struct {
	Limit           int64
	Capacity        int64
	RefillPerSecond float64
	LeakPerSecond   float64
	Max             float64
	HasMax          bool
	// Levels are a policy with levels' limits, one per level (all of them).
	Levels []int64
	// Source is "file:line" of the entry.
	Source string
	fields []string // the fields given, for messages
	lineOf map[string]string
}

type planGlob struct {
	pattern  string
	plan     int32
	literals int
	source   string
}

// ErrInvalidPlans wraps every problem of a plans file.
var ErrInvalidPlans = errors.New("invalid plans")

// PlanError is one problem of a plans file, at its line. It wraps ErrInvalidPlans.
type PlanError struct {
	Source string // "file:line"
	Msg    string
}

func (e *PlanError) Error() string { return e.Source + ": " + e.Msg }

// Unwrap returns ErrInvalidPlans.
func (e *PlanError) Unwrap() error { return ErrInvalidPlans }

// LoadPlans reads and parses a plans file (see ParsePlans).
func LoadPlans(path string) (*Plans, error) {
	data, err := ReadPolicyFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePlans(data, path)
}

var planFields = []string{"limit", "capacity", "refill_per_second", "leak_per_second", "max", "levels"}

// ParsePlans parses a plans file (see Plans). Every problem is reported, each as a
// *PlanError "file:line: problem": unknown fields, a negative or non-numeric number, a
// limit, capacity or rate of 0 (no policy takes one, and 0 in PlanLimits keeps the
// policy's own), a plan or key given twice, a key or glob naming a plan that is not
// listed. Whether the policy and rule names exist is Service.SetPlans's question.
func ParsePlans(data []byte, source string) (*Plans, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		pe := SyntaxError(source, data, err)
		return nil, &PlanError{Source: pe.Source, Msg: pe.Msg}
	}
	at := func(n *yaml.Node) string { return fmt.Sprintf("%s:%d", source, n.Line) }
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, &PlanError{Source: source + ":1", Msg: `want a mapping with "plans:" and "keys:"`}
	}
	ps := &Plans{Source: source, exact: map[string]int32{}}
	var errs []error
	bad := func(n *yaml.Node, format string, args ...any) {
		errs = append(errs, &PlanError{Source: at(n), Msg: fmt.Sprintf(format, args...)})
	}
	root := doc.Content[0]
	var plansNode, keysNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "plans":
			plansNode = v
		case "keys":
			keysNode = v
		default:
			bad(k, "unknown field %q (want plans and keys)", k.Value)
		}
	}
	if plansNode == nil || plansNode.Kind != yaml.MappingNode {
		errs = append(errs, &PlanError{Source: at(root), Msg: `want a "plans:" mapping of plan names to their policies' numbers`})
		return nil, errors.Join(errs...)
	}
	index := map[string]int32{}
	for i := 0; i+1 < len(plansNode.Content); i += 2 {
		k, v := plansNode.Content[i], plansNode.Content[i+1]
		name := k.Value
		if !ValidName(name) {
			bad(k, "plan name %q: must be 1 to 64 characters of A-Z a-z 0-9 _ . -", ClipName(name))
			continue
		}
		if j, dup := index[name]; dup {
			bad(k, "plan %q given twice (first at %s)", name, ps.lines[j])
			continue
		}
		index[name] = int32(len(ps.names))
		ps.names = append(ps.names, name)
		ps.lines = append(ps.lines, at(k))
		ps.limits = append(ps.limits, parsePlan(v, name, at, bad))
	}
	if keysNode != nil && keysNode.Kind != yaml.MappingNode {
		bad(keysNode, `"keys:" must map keys (or globs) to plan names`)
		keysNode = nil
	}
	firstKey := map[string]string{}
	if keysNode != nil {
		for i := 0; i+1 < len(keysNode.Content); i += 2 {
			k, v := keysNode.Content[i], keysNode.Content[i+1]
			key := k.Value
			if prev, dup := firstKey[key]; dup {
				bad(k, "key %q given twice (first at %s)", ClipName(key), prev)
				continue
			}
			firstKey[key] = at(k)
			if ValidateKey(key) != nil {
				bad(k, "key %q: not a valid key", ClipName(key))
				continue
			}
			j, ok := index[v.Value]
			if v.Kind != yaml.ScalarNode || !ok {
				kind := "key"
				if isGlob(key) {
					kind = "glob"
				}
				bad(v, "%s %q names plan %q, which is not listed under plans: (%s)", kind, ClipName(key), ClipName(v.Value), strings.Join(ps.names, ", "))
				continue
			}
			if isGlob(key) {
				ps.globs = append(ps.globs, planGlob{pattern: key, plan: j, literals: literals(key), source: at(k)})
			} else {
				ps.exact[key] = j
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortStableFunc(ps.globs, func(a, b planGlob) int { return b.literals - a.literals })
	ps.table = newPlanIndex(ps.exact)
	return ps, nil
}

// planIndex is an open-addressing table of the exact keys: the store's seeded hash, a
// linear probe and one key compare, where a Go map of a thousand string keys cost a
// decision about twice as much (BenchmarkPlanLookup).
type planIndex struct {
	h     keyHasher
	mask  uint64
	slots []planSlot
}

type planSlot struct {
	hash uint64
	key  string
	plan int32 // -1: empty
}

func newPlanIndex(exact map[string]int32) planIndex {
	n := 8
	for n < 2*len(exact) {
		n *= 2
	}
	t := planIndex{h: newKeyHasher(), mask: uint64(n - 1), slots: make([]planSlot, n)}
	for i := range t.slots {
		t.slots[i].plan = -1
	}
	for k, j := range exact {
		h := t.h.hash(k)
		i := h & t.mask
		for t.slots[i].plan >= 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = planSlot{hash: h, key: k, plan: j}
	}
	return t
}

// get returns key's plan index, or -1.
func (t *planIndex) get(key string) int32 {
	if len(t.slots) == 0 {
		return -1
	}
	h := t.h.hash(key)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.plan < 0 {
			return -1
		}
		if s.hash == h && sameKey(s.key, key) {
			return s.plan
		}
	}
}

// parsePlan reads one plan's mapping of policy or rule names to their numbers.
func parsePlan(n *yaml.Node, plan string, at func(*yaml.Node) string, bad func(*yaml.Node, string, ...any)) map[string]*PlanLimits {
	out := map[string]*PlanLimits{}
	if n.Kind != yaml.MappingNode {
		bad(n, "plan %q: want a mapping of policy or rule names to numbers, such as {daily-requests: {limit: 100}}", plan)
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, dup := out[k.Value]; dup {
			bad(k, "plan %q: %q given twice", plan, ClipName(k.Value))
			continue
		}
		l := &PlanLimits{Source: at(k), lineOf: map[string]string{}}
		out[k.Value] = l
		if v.Kind != yaml.MappingNode {
			bad(v, "plan %q: %q: want a mapping such as {limit: 100}", plan, ClipName(k.Value))
			continue
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			f, x := v.Content[j], v.Content[j+1]
			if f.Value == "levels" {
				l.Levels = parsePlanLevels(x, func(format string, args ...any) {
					bad(x, "plan %q: %q: levels: %s", plan, ClipName(k.Value), fmt.Sprintf(format, args...))
				})
				l.fields = append(l.fields, f.Value)
				l.lineOf[f.Value] = at(x)
				continue
			}
			num, err := strconv.ParseFloat(x.Value, 64)
			switch {
			case !slices.Contains(planFields, f.Value):
				bad(f, "plan %q: %q: unknown field %q (known: %s)", plan, ClipName(k.Value), f.Value, strings.Join(planFields, ", "))
				continue
			case x.Kind != yaml.ScalarNode || x.Tag == "!!str" || err != nil || math.IsNaN(num) || math.IsInf(num, 0):
				bad(x, "plan %q: %q: %s must be a number, not %q", plan, ClipName(k.Value), f.Value, ClipName(x.Value))
				continue
			case num < 0:
				bad(x, "plan %q: %q: %s %v is negative", plan, ClipName(k.Value), f.Value, num)
				continue
			case num == 0 && f.Value != "max":
				// A zero field means "the policy's own" in PlanLimits, so a 0 written
				// here would silently give the policy's number, never "none".
				least := "be at least 1"
				if strings.HasSuffix(f.Value, "_per_second") {
					least = "be above 0"
				}
				bad(x, "plan %q: %q: %s 0: must %s (leave it out to keep the policy's own)", plan, ClipName(k.Value), f.Value, least)
				continue
			}
			whole := func() int64 {
				if num != math.Trunc(num) || num > MaxQuota {
					bad(x, "plan %q: %q: %s must be a whole number up to %d", plan, ClipName(k.Value), f.Value, int64(MaxQuota))
				}
				return int64(num)
			}
			switch f.Value {
			case "limit":
				l.Limit = whole()
			case "capacity":
				l.Capacity = whole()
			case "refill_per_second":
				l.RefillPerSecond = num
			case "leak_per_second":
				l.LeakPerSecond = num
			case "max":
				l.Max, l.HasMax = num, true
			}
			l.fields = append(l.fields, f.Value)
			l.lineOf[f.Value] = at(x)
		}
	}
	return out
}

// parsePlanLevels reads a list of level limits, such as [500, 300, 200].
func parsePlanLevels(x *yaml.Node, bad func(string, ...any)) []int64 {
	if x.Kind != yaml.SequenceNode || len(x.Content) == 0 || len(x.Content) > MaxLevels {
		bad("want a list of 1 to %d limits, one per level", MaxLevels)
		return nil
	}
	out := make([]int64, len(x.Content))
	for i, e := range x.Content {
		n, err := strconv.ParseInt(e.Value, 10, 64)
		if e.Kind != yaml.ScalarNode || e.Tag == "!!str" || err != nil || n < 1 || n > MaxQuota {
			bad("level %d: %q must be a whole number from 1 to %d", i+1, ClipName(e.Value), int64(MaxQuota))
			return nil
		}
		out[i] = n
	}
	return out
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?") }

func literals(s string) int { return len(s) - strings.Count(s, "*") - strings.Count(s, "?") }

// globMatch reports whether key matches pattern: * any run of bytes (a / too), ? one byte.
func globMatch(pattern, key string) bool {
	p, k := 0, 0
	star, mark := -1, 0
	for k < len(key) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == key[k]) && pattern[p] != '*':
			p++
			k++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, k
			p++
		case star >= 0:
			p = star + 1
			mark++
			k = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// index returns the plan index of key, or -1.
func (ps *Plans) index(key string) int32 {
	if j := ps.table.get(key); j >= 0 {
		return j
	}
	for i := range ps.globs {
		if globMatch(ps.globs[i].pattern, key) {
			return ps.globs[i].plan
		}
	}
	return -1
}

// Lookup returns the plan of key, and false when it has none.
func (ps *Plans) Lookup(key string) (string, bool) {
	if ps == nil {
		return "", false
	}
	if j := ps.index(key); j >= 0 {
		return ps.names[j], true
	}
	return "", false
}

// Names returns the plan names in file order.
func (ps *Plans) Names() []string { return slices.Clone(ps.names) }

// Listed returns the policy and rule names plan gives numbers to, sorted.
func (ps *Plans) Listed(plan string) []string {
	j := slices.Index(ps.names, plan)
	if j < 0 {
		return nil
	}
	return sortedKeys(ps.limits[j])
}

// Has reports whether plan is listed.
func (ps *Plans) Has(plan string) bool { return ps != nil && slices.Contains(ps.names, plan) }

// Limits returns plan's numbers for the policy or rule name, and false when the plan does
// not list it (the policy's own apply).
func (ps *Plans) Limits(plan, name string) (PlanLimits, bool) {
	j := slices.Index(ps.names, plan)
	if j < 0 {
		return PlanLimits{}, false
	}
	l, ok := ps.limits[j][name]
	if !ok {
		return PlanLimits{}, false
	}
	return *l, true
}

// Apply returns p with l's numbers, validated; the error names l's line.
func (l *PlanLimits) Apply(p Policy) (Policy, error) {
	if l.HasMax {
		return p, &PlanError{Source: l.lineOf["max"], Msg: fmt.Sprintf("max applies to usage rules; %q is a policy (limit or capacity)", p.Name)}
	}
	if l.Limit != 0 {
		p.Limit = l.Limit
	}
	if l.Capacity != 0 {
		p.Capacity = l.Capacity
	}
	if l.RefillPerSecond != 0 {
		p.RefillPerSecond = l.RefillPerSecond
	}
	if l.LeakPerSecond != 0 {
		p.LeakPerSecond = l.LeakPerSecond
	}
	if l.Levels != nil {
		if len(l.Levels) != p.Levels.N {
			return p, &PlanError{Source: l.lineOf["levels"], Msg: fmt.Sprintf("policy %q has %d levels, the plan gives %d limits", p.Name, p.Levels.N, len(l.Levels))}
		}
		copy(p.Levels.Limits[:], l.Levels)
	}
	if err := p.Validate(); err != nil {
		src := l.Source
		var pe *PolicyError
		if errors.As(err, &pe) && l.lineOf[pe.Field] != "" {
			src = l.lineOf[pe.Field]
		}
		msg := err.Error()
		if pe != nil {
			msg = fmt.Sprintf("policy %q: %s: %s", p.Name, pe.Field, pe.Msg)
		}
		return p, &PlanError{Source: src, Msg: msg}
	}
	return p, nil
}
