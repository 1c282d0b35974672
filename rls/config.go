package rls

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"gopkg.in/yaml.v3"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

// ErrInvalidConfig wraps every problem of a rate limit service configuration file.
var ErrInvalidConfig = errors.New("invalid rate limit service config")

// ConfigError is one problem of one configuration file, at a line.
type ConfigError struct {
	Source string // "file:line"
	Msg    string
}

func (e *ConfigError) Error() string { return e.Source + ": " + e.Msg }

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// LoadOptions are the choices a configuration file leaves to the process.
type LoadOptions struct {
	// DefaultBackend is the backend of a rate_limit without a "backend" field:
	// slide serve passes BackendRedis when --redis is set (envoyproxy/ratelimit
	// always counts in Redis) and BackendMemory otherwise.
	DefaultBackend limiter.BackendKind
}

// Config is a loaded set of domains: the descriptor trees the server matches
// requests against, and the limiter policies and usage rules they map to.
// Policies and Rules go into the limiter.Service the Server decides with. A
// Config is immutable once loaded and safe for concurrent use.
type Config struct {
	domains  map[string]*node
	policies []limiter.Policy
	rules    []usage.Rule
	limits   []*limit // every limit, indexed by limit.idx
}

// Policies returns the limiter policies, one per rate_limit with a quota, in
// file order.
func (c *Config) Policies() []limiter.Policy { return append([]limiter.Policy(nil), c.policies...) }

// Rules returns the usage rules of the descriptors, in file order.
func (c *Config) Rules() []usage.Rule { return append([]usage.Rule(nil), c.rules...) }

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// entryKey is a descriptor entry matched exactly.
type entryKey struct{ key, value string }

// node is one descriptor of the tree (or a domain's root).
type node struct {
	key, value string
	path       string // envoy's full key below the domain: "key1_value1.subkey1"
	exact      map[entryKey]*node
	byKey      map[string]*node
	wildcards  []*node // children whose value holds a '*', in file order (window.MatchKey)
	share      bool    // share_threshold: every matching value shares one counter
	limit      *limit  // nil: no rate_limit and no rules here
}

func (n *node) leaf() bool { return len(n.exact) == 0 && len(n.byKey) == 0 && len(n.wildcards) == 0 }

// limit is what a matched descriptor decides with.
type limit struct {
	idx       int
	domain    string
	path      string
	policy    string // limiter policy name; "" for unlimited, banned or rules only
	label     string // policyName(domain, path): names it in headers when policy is ""
	quota     int64  // the policy's quota
	unlimited bool
	banned    bool // requests_per_unit 0: always over limit
	name      string
	replaces  []string
	quotaMode bool
	shadow    bool
	window    time.Duration
	period    period // the window's periods, for answers the limiter does not give
	current   *pb.RateLimitResponse_RateLimit
	rules     []string // usage rule names, checked with the value of the descriptor's own entry
}

// Fields a file may hold at each level: envoyproxy/ratelimit's, then slide's.
var (
	rootFields       = []string{"domain", "descriptors"}
	descriptorFields = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode",
		"detailed_metric", "value_to_metric", "share_threshold", "metadata", "rules"}
	rateLimitFields = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces",
		"algorithm", "window", "timezone", "backend", "on_backend_error", "timeout"}
)

// Load reads a configuration file, or every *.yaml and *.yml file of a
// directory (not its subdirectories) in name order. Each file holds one domain
// in envoyproxy/ratelimit's format; a domain defined twice is an error. Every
// problem is reported with its file and line.
func Load(path string, opt LoadOptions) (*Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading rate limit config: %w", err)
	}
	files := []string{path}
	if st.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("reading rate limit config: %w", err)
		}
		files = files[:0]
		for _, e := range ents {
			if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				files = append(files, filepath.Join(path, n))
			}
		}
		if len(files) == 0 {
			return nil, &ConfigError{Source: path, Msg: "no *.yaml or *.yml file in the directory"}
		}
	}
	b := newBuilder(opt)
	for _, f := range files {
		data, err := limiter.ReadPolicyFile(f)
		if err != nil {
			return nil, err
		}
		b.file(data, f)
	}
	return b.done()
}

// Parse parses one configuration file's contents; source names it in errors.
func Parse(data []byte, source string, opt LoadOptions) (*Config, error) {
	b := newBuilder(opt)
	b.file(data, source)
	return b.done()
}

type builder struct {
	opt    LoadOptions
	cfg    *Config
	errs   []error
	src    string
	domSrc map[string]string
	desSrc map[string]string // domain NUL path → where that descriptor was first defined
	names  map[string]string // policy and rule names → where defined
}

func newBuilder(opt LoadOptions) *builder {
	return &builder{opt: opt, cfg: &Config{domains: map[string]*node{}}, domSrc: map[string]string{}, desSrc: map[string]string{}, names: map[string]string{}}
}

func (b *builder) done() (*Config, error) {
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	return b.cfg, nil
}

func (b *builder) at(n *yaml.Node) string { return b.src + ":" + strconv.Itoa(n.Line) }

func (b *builder) fail(n *yaml.Node, format string, args ...any) {
	b.errs = append(b.errs, &ConfigError{Source: b.at(n), Msg: fmt.Sprintf(format, args...)})
}

// fields checks a mapping's keys against known and returns the values by key.
func (b *builder) fields(n *yaml.Node, what string, known []string) (map[string]*yaml.Node, bool) {
	if n.Kind != yaml.MappingNode {
		b.fail(n, "%s must be a mapping", what)
		return nil, false
	}
	vals := map[string]*yaml.Node{}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			b.fail(k, "%s: a field name must be a string", what)
			ok = false
			continue
		}
		if !contains(known, k.Value) {
			b.fail(k, "%s: unknown field %q (want one of %s)", what, limiter.ClipName(k.Value), strings.Join(known, ", "))
			ok = false
			continue
		}
		if _, dup := vals[k.Value]; dup {
			b.fail(k, "%s: field %q given twice", what, k.Value)
			ok = false
			continue
		}
		vals[k.Value] = n.Content[i+1]
	}
	return vals, ok
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (b *builder) str(n *yaml.Node, what string) (string, bool) {
	if n == nil {
		return "", true
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		if n.Tag == "!!null" {
			return "", true
		}
		b.fail(n, "%s must be a string", what)
		return "", false
	}
	return n.Value, true
}

func (b *builder) boolean(n *yaml.Node, what string) (bool, bool) {
	if n == nil || n.Tag == "!!null" {
		return false, true
	}
	var v bool
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		b.fail(n, "%s must be true or false", what)
		return false, false
	}
	return v, true
}

func (b *builder) file(data []byte, source string) {
	b.src = source
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		pe := limiter.SyntaxError(source, data, err)
		b.errs = append(b.errs, &ConfigError{Source: pe.Source, Msg: pe.Msg})
		return
	}
	if len(doc.Content) == 0 {
		b.errs = append(b.errs, &ConfigError{Source: source + ":1", Msg: `empty file: want "domain:" and "descriptors:"`})
		return
	}
	root := doc.Content[0]
	vals, ok := b.fields(root, "config", rootFields)
	if !ok {
		return
	}
	domain, ok := b.str(vals["domain"], "domain")
	if !ok {
		return
	}
	if domain == "" {
		b.fail(root, "config file cannot have empty domain")
		return
	}
	if first, dup := b.domSrc[domain]; dup {
		b.fail(root, "duplicate domain %q (first defined at %s)", limiter.ClipName(domain), first)
		return
	}
	b.domSrc[domain] = b.at(root)
	top := &node{}
	b.descriptors(domain, top, "", vals["descriptors"])
	b.cfg.domains[domain] = top
}

func (b *builder) descriptors(domain string, parent *node, parentPath string, list *yaml.Node) {
	if list == nil || list.Tag == "!!null" {
		return
	}
	if list.Kind != yaml.SequenceNode {
		b.fail(list, "descriptors must be a list")
		return
	}
	for _, item := range list.Content {
		b.descriptor(domain, parent, parentPath, item)
	}
}

// addChild puts n in *m under k, making the map on first use; false when k is there
// already.
func addChild[K comparable](m *map[K]*node, k K, n *node) bool {
	if (*m)[k] != nil {
		return false
	}
	if *m == nil {
		*m = map[K]*node{}
	}
	(*m)[k] = n
	return true
}

func (b *builder) descriptor(domain string, parent *node, parentPath string, item *yaml.Node) {
	vals, ok := b.fields(item, "descriptor", descriptorFields)
	if !ok {
		return
	}
	key, ok1 := b.str(vals["key"], "key")
	value, ok2 := b.str(vals["value"], "value")
	if !ok1 || !ok2 {
		return
	}
	if key == "" {
		b.fail(item, "descriptor has empty key")
		return
	}
	full := key
	if value != "" {
		full += "_" + value
	}
	path := full
	if parentPath != "" {
		path = parentPath + "." + full
	}
	n := &node{key: key, value: value, path: path}
	var added bool
	switch {
	case value == "":
		added = addChild(&parent.byKey, key, n)
	case window.IsKeyPattern(value):
		added = !slices.ContainsFunc(parent.wildcards, func(w *node) bool { return w.key == key && w.value == value })
		if added {
			parent.wildcards = append(parent.wildcards, n)
		}
	default:
		added = addChild(&parent.exact, entryKey{key, value}, n)
	}
	if !added {
		b.fail(item, "duplicate descriptor composite key '%s.%s' (first at %s): merge the two, or give one another value or its own nesting",
			domain, path, b.desSrc[domain+"\x00"+path])
		return
	}
	b.desSrc[domain+"\x00"+path] = b.at(item)
	shadow, ok1 := b.boolean(vals["shadow_mode"], "shadow_mode")
	quotaMode, ok2 := b.boolean(vals["quota_mode"], "quota_mode")
	share, ok3 := b.boolean(vals["share_threshold"], "share_threshold")
	for _, f := range []string{"detailed_metric", "value_to_metric"} {
		b.boolean(vals[f], f) // accepted for compatibility: slide's metrics are per configured descriptor
	}
	if !ok1 || !ok2 || !ok3 {
		return
	}
	if share && !window.IsKeyPattern(n.value) {
		b.fail(item, "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", full)
	}
	n.share = share
	var l *limit
	if rl := vals["rate_limit"]; rl != nil && rl.Tag != "!!null" {
		l = b.rateLimit(domain, path, rl, shadow, quotaMode)
		if l == nil {
			return
		}
	}
	if rules := vals["rules"]; rules != nil && rules.Tag != "!!null" {
		if l == nil {
			l = &limit{domain: domain, path: path, shadow: shadow, quotaMode: quotaMode}
		}
		if l.unlimited {
			b.fail(rules, "rules do not apply to an unlimited descriptor")
			return
		}
		if rules.Kind != yaml.SequenceNode {
			b.fail(rules, "rules must be a list of usage rules")
			return
		}
		base := policyName(domain, path)
		for i, rn := range rules.Content {
			r, err := usage.ParseRuleNode(rn, b.src, nameWithSuffix(base, ".rule"+strconv.Itoa(i+1)))
			if err != nil {
				b.errs = append(b.errs, err)
				continue
			}
			if !b.claim(r.Name, r.Source, rn) {
				continue
			}
			b.cfg.rules = append(b.cfg.rules, r)
			l.rules = append(l.rules, r.Name)
		}
	}
	if l != nil {
		l.idx, l.label = len(b.cfg.limits), policyName(domain, path)
		b.cfg.limits = append(b.cfg.limits, l)
		n.limit = l
	}
	b.descriptors(domain, n, path, vals["descriptors"])
}

// claim reserves a policy or rule name, reporting a clash.
func (b *builder) claim(name, src string, n *yaml.Node) bool {
	if first, dup := b.names[name]; dup {
		b.fail(n, "name %q is already used at %s", name, first)
		return false
	}
	b.names[name] = src
	return true
}

func (b *builder) rateLimit(domain, path string, rl *yaml.Node, shadow, quotaMode bool) *limit {
	vals, ok := b.fields(rl, "rate_limit", rateLimitFields)
	if !ok {
		return nil
	}
	l := &limit{domain: domain, path: path, shadow: shadow, quotaMode: quotaMode}
	var ok1, ok2 bool
	if l.unlimited, ok1 = b.boolean(vals["unlimited"], "unlimited"); !ok1 {
		return nil
	}
	if l.name, ok2 = b.str(vals["name"], "name"); !ok2 {
		return nil
	}
	if r := vals["replaces"]; r != nil && r.Tag != "!!null" {
		if r.Kind != yaml.SequenceNode {
			b.fail(r, "replaces must be a list of {name: ...}")
			return nil
		}
		for _, e := range r.Content {
			ev, ok := b.fields(e, "replaces entry", []string{"name"})
			if !ok {
				return nil
			}
			name, _ := b.str(ev["name"], "name")
			switch {
			case name == "":
				b.fail(e, "should not have an empty replaces entry")
				return nil
			case name == l.name:
				b.fail(e, "replaces should not contain name of same descriptor")
				return nil
			}
			l.replaces = append(l.replaces, name)
		}
	}
	unitName, _ := b.str(vals["unit"], "unit")
	u, validUnit := units[strings.ToLower(unitName)]
	if l.unlimited {
		if validUnit {
			b.fail(rl, "should not specify rate limit unit when unlimited")
			return nil
		}
		for _, f := range []string{"requests_per_unit", "algorithm", "window", "timezone", "backend", "on_backend_error", "timeout"} {
			if vals[f] != nil {
				b.fail(vals[f], "%s does not apply when unlimited", f)
				return nil
			}
		}
		return l
	}
	winNode := vals["window"]
	loc, ok := b.timezone(vals["timezone"])
	if !ok {
		return nil
	}
	var cal limiter.Calendar
	switch {
	case winNode != nil && unitName != "":
		b.fail(winNode, "give unit or window, not both")
		return nil
	case winNode != nil:
		s, _ := b.str(winNode, "window")
		if c, ok := limiter.ParseCalendar(s); ok {
			cal, l.window = c, calendarUnits[c]
			break
		}
		d, err := window.ParseWindow(s)
		if err != nil {
			b.fail(winNode, "window %v", err)
			return nil
		}
		l.window = d
	case !validUnit:
		b.fail(rl, "%s", unitProblem(unitName))
		return nil
	default:
		l.window = u.d
	}
	var rpu uint64
	if n := vals["requests_per_unit"]; n != nil {
		err := strconv.ErrSyntax // a float, a list, null: no count of requests
		switch n.Tag {
		case "!!int":
			err = n.Decode(&rpu) // as YAML reads an integer (envoyproxy/ratelimit's decoder too): 1_000, 0x10, +5
		case "!!str":
			rpu, err = strconv.ParseUint(n.Value, 10, 32) // quoted digits, as slide always took them
		}
		if n.Kind != yaml.ScalarNode || err != nil || rpu > math.MaxUint32 {
			b.fail(n, "requests_per_unit must be a whole number from 0 to %d", uint32(math.MaxUint32))
			return nil
		}
	}
	l.current, l.period = currentLimit(l.name, uint32(rpu), l.window), period{cal: cal, loc: loc}
	if rpu == 0 {
		l.banned = true // envoyproxy/ratelimit: every request is over the limit
		return l
	}
	p := limiter.Policy{Name: policyName(domain, path), Algorithm: limiter.FixedWindow, Backend: b.opt.DefaultBackend, Shadow: shadow, Source: b.at(rl)}
	if a := vals["algorithm"]; a != nil {
		s, _ := b.str(a, "algorithm")
		alg, err := limiter.ParseAlgorithm(s)
		if err != nil {
			b.fail(a, "algorithm: %v", err)
			return nil
		}
		p.Algorithm = alg
	}
	explicitBackend := false
	if bk := vals["backend"]; bk != nil {
		s, _ := b.str(bk, "backend")
		var ok bool
		if p.Backend, ok = limiter.ParseBackend(s); !ok {
			b.fail(bk, "backend must be memory, redis or cluster")
			return nil
		}
		explicitBackend = true
	}
	// on_backend_error and timeout describe a Redis limit; on a limit that is in
	// memory only because --redis is not set they are ignored, so one file serves both.
	applies := p.Backend == limiter.BackendRedis || explicitBackend
	if m := vals["on_backend_error"]; m != nil && applies {
		s, _ := b.str(m, "on_backend_error")
		var ok bool
		if p.OnBackendError, ok = limiter.ParseFailureMode(s); !ok {
			b.fail(m, "on_backend_error must be open, closed or local")
			return nil
		}
	}
	if t := vals["timeout"]; t != nil && applies {
		s, _ := b.str(t, "timeout")
		d, err := time.ParseDuration(s)
		if err != nil {
			b.fail(t, "timeout %q is not a duration such as 50ms", limiter.ClipName(s))
			return nil
		}
		p.Timeout = d
	}
	switch p.Algorithm {
	case limiter.TokenBucket:
		p.Capacity, p.RefillPerSecond = int64(rpu), float64(rpu)/l.window.Seconds()
	case limiter.LeakyBucket:
		p.Capacity, p.LeakPerSecond = int64(rpu), float64(rpu)/l.window.Seconds()
	default:
		p.Limit, p.Window = int64(rpu), l.window
	}
	if p.Calendar, p.Location = cal, loc; cal != 0 {
		p.Window = 0 // the zone's periods; Validate refuses them on another algorithm, a zone without them
	}
	if err := p.Validate(); err != nil {
		b.errs = append(b.errs, err)
		return nil
	}
	if !b.claim(p.Name, p.Source, rl) {
		return nil
	}
	l.policy, l.quota, l.period.unaligned = p.Name, p.Quota(), p.Algorithm != limiter.FixedWindow
	b.cfg.policies = append(b.cfg.policies, p)
	return l
}
