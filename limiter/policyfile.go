package limiter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slide-metrics/slide/window"
)

// MaxPolicyFileBytes is the largest policy file LoadPolicies (and usage.LoadFile) reads:
// far above any real file, low enough that a wrong path (a log, a dump) fails at once
// instead of being parsed for seconds.
const MaxPolicyFileBytes = 4 << 20

// LoadPolicies reads and parses a policy file (see ParsePolicies).
func LoadPolicies(path string) ([]Policy, error) {
	data, err := ReadPolicyFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePolicies(data, path)
}

// ReadPolicyFile reads path, refusing a file over MaxPolicyFileBytes.
func ReadPolicyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading policy file: %w", err)
	}
	if len(data) > MaxPolicyFileBytes {
		return nil, &PolicyError{Source: path, Msg: fmt.Sprintf("larger than %d MiB: not a policy file", MaxPolicyFileBytes>>20)}
	}
	return data, nil
}

// yamlLine matches the position yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// SyntaxError turns a YAML parse error of data, the file source, into a *PolicyError
// "source:line: not YAML: problem", the form every other policy-file error has. The line is
// where the file stops being YAML: yaml.v3 names the line where the enclosing block began
// (line 1 for a bad indent on line 6 of a list), so the first line whose prefix of the file
// no longer parses is found by parsing prefixes, a file of at most maxProbeLines lines.
func SyntaxError(source string, data []byte, err error) *PolicyError {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, problem := m[1], msg[len(m[0]):]
		if at := firstBadLine(data, problem); at > 0 && strconv.Itoa(at) != line {
			problem += " (in the block from line " + line + ")"
			line = strconv.Itoa(at)
		}
		return &PolicyError{Source: source + ":" + line, Msg: "not YAML: " + problem}
	}
	return &PolicyError{Source: source, Msg: "not YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// maxProbeLines bounds firstBadLine's search: policy files are tens of lines, and a file far
// larger keeps yaml.v3's own line rather than cost a parse per line.
const maxProbeLines = 2000

// firstBadLine returns the number of the first line of data at which the lines up to it stop
// parsing as YAML with the whole file's problem, or 0 when there is none (the problem shows
// only at the end, where yaml.v3's line is the one to trust) or data is longer than
// maxProbeLines. The problem must match: a prefix that cuts a quoted string spanning lines
// fails too, for a reason of its own.
func firstBadLine(data []byte, problem string) int {
	if bytes.Count(data, []byte{'\n'}) > maxProbeLines {
		return 0
	}
	var v yaml.Node
	end, line := 0, 0
	for end < len(data) {
		line++
		if i := bytes.IndexByte(data[end:], '\n'); i >= 0 {
			end += i + 1
		} else {
			end = len(data)
		}
		if err := yaml.Unmarshal(data[:end], &v); err != nil {
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil && err.Error()[len(m[0]):] == problem {
				return line
			}
		}
	}
	return 0
}

// ParsePolicies parses a policy file:
//
//	policies:
//	  - name: login
//	    algorithm: sliding_log   # fixed_window | sliding_log | sliding_counter | token_bucket | leaky_bucket
//	    limit: 3
//	    window: 60s
//	    backend: redis           # memory (default) | redis
//	    on_backend_error: closed # open (default) | closed | local
//	    timeout: 50ms            # default 50ms
//	    shadow: false
//	  - name: daily
//	    algorithm: fixed_window
//	    limit: 1000
//	    window: calendar_day     # or calendar_week (from Monday), calendar_month (from the 1st)
//	    timezone: Europe/London  # IANA name; default UTC
//	  - name: api
//	    algorithm: token_bucket
//	    capacity: 10
//	    refill_per_second: 5
//	  - name: smooth
//	    algorithm: leaky_bucket
//	    capacity: 5
//	    leak_per_second: 10
//	    max_delay: 500ms
//
// Every problem is reported, each as a *PolicyError "source:line: policy
// "name": field: problem" (joined with errors.Join; errors.Is(err,
// ErrInvalidPolicy) holds): unknown fields, missing or invalid values, fields
// that do not apply to the algorithm, duplicate names. source names the file
// in messages. Each policy's Source is set to "source:line".
func ParsePolicies(data []byte, source string) ([]Policy, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, SyntaxError(source, data, err)
	}
	at := func(n *yaml.Node) string { return fmt.Sprintf("%s:%d", source, n.Line) }
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &PolicyError{Source: source + ":1", Msg: `empty file: want a "policies:" list`}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &PolicyError{Source: at(root), Msg: `want a mapping with a "policies:" list`}
	}
	var list *yaml.Node
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "policies" {
			errs = append(errs, &PolicyError{Source: at(k), Msg: fmt.Sprintf("unknown field %q (want policies)", k.Value)})
			continue
		}
		list = v
	}
	if list == nil {
		errs = append(errs, &PolicyError{Source: at(root), Msg: `missing "policies:" list`})
		return nil, errors.Join(errs...)
	}
	if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		errs = append(errs, &PolicyError{Source: at(list), Field: "policies", Msg: "must be a non-empty list of policies"})
		return nil, errors.Join(errs...)
	}
	var out []Policy
	first := map[string]string{}
	for _, item := range list.Content {
		p, perrs := parsePolicy(item, at)
		if len(perrs) > 0 {
			errs = append(errs, perrs...)
			continue
		}
		if prev, dup := first[strings.ToLower(p.Name)]; dup { // names differing only by case are one name to a reader
			errs = append(errs, &PolicyError{Source: p.Source, Policy: p.Name, Field: "name", Msg: "duplicate policy name" + suffixAt(prev)})
			continue
		}
		first[strings.ToLower(p.Name)] = p.Source
		out = append(out, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

var policyFields = []string{"name", "algorithm", "limit", "window", "timezone", "capacity", "refill_per_second",
	"leak_per_second", "max_delay", "backend", "on_backend_error", "timeout", "shadow", "levels"}

func parsePolicy(n *yaml.Node, at func(*yaml.Node) string) (Policy, []error) {
	p := Policy{Source: at(n)}
	if n.Kind != yaml.MappingNode {
		return p, []error{&PolicyError{Source: at(n), Msg: "a policy must be a mapping of fields"}}
	}
	// The name first, so every later message can carry it.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
			p.Name = n.Content[i+1].Value
		}
	}
	var errs []error
	bad := func(v *yaml.Node, field, format string, args ...any) {
		errs = append(errs, &PolicyError{Source: at(v), Policy: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f := k.Value
		if seen[f] {
			bad(k, f, "given twice")
			continue
		}
		seen[f] = true
		if f == "levels" {
			if msg := parseLevels(v, &p.Levels); msg != "" {
				bad(v, f, "%s", msg)
			}
			continue
		}
		if v.Kind != yaml.ScalarNode {
			if isKnown(f) {
				bad(v, f, "must be a single value")
			} else {
				bad(k, "", "unknown field %q (known: %s)", f, strings.Join(policyFields, ", "))
			}
			continue
		}
		s := v.Value
		var err error
		switch f {
		case "name":
			if !ValidName(s) {
				bad(v, f, "must be 1 to 64 characters of A-Z a-z 0-9 _ . -")
			}
		case "algorithm":
			p.Algorithm, err = ParseAlgorithm(s)
		case "limit":
			p.Limit, err = parseInt(v)
		case "capacity":
			p.Capacity, err = parseInt(v)
		case "window":
			if c, ok := ParseCalendar(s); ok {
				p.Calendar = c
			} else if p.Window, err = window.ParseDuration(s); err != nil { // Validate says which lengths an algorithm takes
				err = fmt.Errorf("%w, or calendar_day, calendar_week or calendar_month", err)
			}
		case "timezone":
			p.Location, err = LoadTimezone(s)
		case "max_delay":
			p.MaxDelay, err = parseDuration(v)
		case "timeout":
			p.Timeout, err = parseDuration(v)
			if err == nil && p.Timeout == 0 {
				err = errors.New("must be above 0 (omit it for the 50ms default)")
			}
		case "refill_per_second":
			p.RefillPerSecond, err = parseFloat(v)
		case "leak_per_second":
			p.LeakPerSecond, err = parseFloat(v)
		case "backend":
			var ok bool
			if p.Backend, ok = ParseBackend(s); !ok {
				bad(v, f, "must be memory, redis or cluster, not %q", s)
			}
		case "on_backend_error":
			var ok bool
			if p.OnBackendError, ok = ParseFailureMode(s); !ok {
				bad(v, f, "must be open, closed or local, not %q", s)
			}
		case "shadow":
			switch s {
			case "true":
				p.Shadow = true
			case "false":
			default:
				bad(v, f, "must be true or false, not %q", s)
			}
		default:
			bad(k, "", "unknown field %q (known: %s)", f, strings.Join(policyFields, ", "))
		}
		if err != nil {
			bad(v, f, "%v", err)
		}
	}
	if len(errs) > 0 {
		return p, errs
	}
	if !seen["name"] {
		return p, []error{&PolicyError{Source: p.Source, Field: "name", Msg: "missing"}}
	}
	if !seen["algorithm"] {
		return p, []error{&PolicyError{Source: p.Source, Policy: p.Name, Field: "algorithm", Msg: "missing"}}
	}
	if err := p.Validate(); err != nil {
		// Point at the offending field's line when it is present.
		var pe *PolicyError
		if errors.As(err, &pe) {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == pe.Field {
					pe.Source = at(n.Content[i+1])
				}
			}
			if !seen[pe.Field] && pe.Field != "" {
				pe.Msg = "missing or " + pe.Msg
			}
		}
		return p, []error{err}
	}
	return p, nil
}

// parseLevels reads {separator: "/", limits: [50, 30, 20]} into l, or says what is wrong.
func parseLevels(v *yaml.Node, l *Levels) string {
	const want = `want {separator: "/", limits: [50, 30, 20]}`
	if v.Kind != yaml.MappingNode {
		return want
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		switch k.Value {
		case "separator":
			if x.Kind != yaml.ScalarNode {
				return "separator: " + want
			}
			l.Separator = x.Value
		case "limits":
			if x.Kind != yaml.SequenceNode || len(x.Content) == 0 || len(x.Content) > MaxLevels {
				return fmt.Sprintf("limits: want a list of 1 to %d limits, one per level", MaxLevels)
			}
			for j, e := range x.Content {
				n, err := parseInt(e)
				if err != nil || e.Kind != yaml.ScalarNode {
					return fmt.Sprintf("limits: level %d: must be an integer, not %q", j+1, ClipName(e.Value))
				}
				l.Limits[j] = n
			}
			l.N = len(x.Content)
		default:
			return fmt.Sprintf("unknown field %q; %s", ClipName(k.Value), want)
		}
	}
	if l.N == 0 {
		return "limits: missing; " + want
	}
	if l.Separator == "" {
		l.Separator = "/"
	}
	return ""
}

func isKnown(f string) bool {
	for _, k := range policyFields {
		if k == f {
			return true
		}
	}
	return false
}

func parseInt(v *yaml.Node) (int64, error) {
	x, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil || v.Tag == "!!str" {
		return 0, fmt.Errorf("must be an integer, not %q", v.Value)
	}
	return x, nil
}

func parseFloat(v *yaml.Node) (float64, error) {
	x, err := strconv.ParseFloat(v.Value, 64)
	if err != nil || v.Tag == "!!str" {
		return 0, fmt.Errorf("must be a number, not %q", v.Value)
	}
	return x, nil
}

func parseDuration(v *yaml.Node) (time.Duration, error) {
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		return 0, fmt.Errorf("must be a duration such as 50ms, 60s or 1h, not %q", v.Value)
	}
	return d, nil
}

// MarshalPolicies writes ps in the policy-file format; ParsePolicies reads
// the result back to the same policies (Source aside).
func MarshalPolicies(ps []Policy) ([]byte, error) {
	type item struct {
		Name            string  `yaml:"name"`
		Algorithm       string  `yaml:"algorithm"`
		Limit           int64   `yaml:"limit,omitempty"`
		Window          string  `yaml:"window,omitempty"`
		Timezone        string  `yaml:"timezone,omitempty"`
		Capacity        int64   `yaml:"capacity,omitempty"`
		RefillPerSecond float64 `yaml:"refill_per_second,omitempty"`
		LeakPerSecond   float64 `yaml:"leak_per_second,omitempty"`
		MaxDelay        string  `yaml:"max_delay,omitempty"`
		Backend         string  `yaml:"backend"`
		OnBackendError  string  `yaml:"on_backend_error,omitempty"`
		Timeout         string  `yaml:"timeout,omitempty"`
		Shadow          bool    `yaml:"shadow,omitempty"`
		Levels          *struct {
			Separator string  `yaml:"separator"`
			Limits    []int64 `yaml:"limits,flow"`
		} `yaml:"levels,omitempty"`
	}
	dur := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	var doc struct {
		Policies []item `yaml:"policies"`
	}
	for _, p := range ps {
		it := item{Name: p.Name, Algorithm: p.Algorithm.String(), Limit: p.Limit, Window: dur(p.Window),
			Capacity: p.Capacity, RefillPerSecond: p.RefillPerSecond, LeakPerSecond: p.LeakPerSecond,
			MaxDelay: dur(p.MaxDelay), Backend: p.Backend.String(), Timeout: dur(p.Timeout), Shadow: p.Shadow}
		if p.Levels.N > 0 {
			it.Levels = &struct {
				Separator string  `yaml:"separator"`
				Limits    []int64 `yaml:"limits,flow"`
			}{p.Levels.Separator, p.Levels.Limits[:p.Levels.N]}
		}
		if p.Calendar != 0 {
			it.Window = p.Calendar.String()
			if p.Location != nil && p.Location != time.UTC {
				it.Timezone = p.Location.String()
			}
		}
		if p.Backend != BackendMemory || p.OnBackendError != FailOpen { // a memory policy's is kept as written too
			it.OnBackendError = p.OnBackendError.String()
		}
		doc.Policies = append(doc.Policies, it)
	}
	return yaml.Marshal(&doc)
}
