package rls

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slide-metrics/slide/limiter/usage"
)

// ErrNeedsRestart: Reload was given a config that maps to a policy or usage rule the
// limiter Service does not run, or runs with another shape (algorithm, window, backend,
// …). The Service is built once, at start; such a change applies at the next start.
var ErrNeedsRestart = errors.New("needs a restart")

// served is a Config as a Server answers with it: the config and what hangs off its
// limits. A request loads it once, so it matches, counts and builds headers with one
// config even while Reload swaps in another.
type served struct {
	cfg        *Config
	perLimit   []limitMetrics                                   // by limit.idx
	overridden map[string]*limitMetrics                         // by configured domain: descriptors with a limit override
	hdrs       headerCache                                      // by limit.idx
	held       []atomic.Pointer[pb.RateLimitResponse_RateLimit] // by limit.idx: the last current_limit of other numbers than its own
}

// serve builds what a Server answers cfg with; the metric series (per descriptor, and
// per policy for the decisions the Server takes itself) are shared with any config that
// names the same descriptors, so their counts go on across a reload.
func (s *Server) serve(cfg *Config) *served {
	desc := s.noLimit
	v := &served{cfg: cfg, overridden: map[string]*limitMetrics{}, hdrs: make(headerCache, len(cfg.limits)),
		held: make([]atomic.Pointer[pb.RateLimitResponse_RateLimit], len(cfg.limits))}
	for _, l := range cfg.limits {
		lm := limitMetrics{
			ok: desc.WithLabelValues(l.domain, l.path, resultOK), over: desc.WithLabelValues(l.domain, l.path, resultOver),
			shadowOver: desc.WithLabelValues(l.domain, l.path, resultShadowOver), unlimited: desc.WithLabelValues(l.domain, l.path, resultUnlimited),
			replaced: desc.WithLabelValues(l.domain, l.path, resultReplaced),
		}
		if l.unlimited || l.banned || l.policy != "" {
			lm.dec = newDecisionMetrics(s.decisions, l.label) // l.label is l.policy when it has one: the Service's series
		}
		v.perLimit = append(v.perLimit, lm)
	}
	for dom := range cfg.domains {
		v.overridden[dom] = &limitMetrics{
			ok: desc.WithLabelValues(dom, "override", resultOK), over: desc.WithLabelValues(dom, "override", resultOver),
		}
	}
	return v
}

// Config returns the config the Server answers with now.
func (s *Server) Config() *Config { return s.cur.Load().cfg }

// Change is what a Reload changed, by descriptor (domain + "." + envoy's full key).
type Change struct {
	Domains, Descriptors [2]int // before, after
	Added, Removed       []string
	Changed              []string // the same descriptor with another rate_limit, rules or flags
}

// String is the change in one line, for a log.
func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "domains %d → %d, descriptors %d → %d", c.Domains[0], c.Domains[1], c.Descriptors[0], c.Descriptors[1])
	for _, part := range []struct {
		what string
		list []string
	}{{"changed", c.Changed}, {"added", c.Added}, {"removed", c.Removed}} {
		if len(part.list) > 0 {
			list := part.list
			if len(list) > 10 {
				list = append(list[:10:10], fmt.Sprintf("… %d more", len(part.list)-10))
			}
			fmt.Fprintf(&b, "; %s: %s", part.what, strings.Join(list, ", "))
		}
	}
	if c.Changed == nil && c.Added == nil && c.Removed == nil {
		b.WriteString("; no descriptor changed")
	}
	return b.String()
}

// Reload swaps in cfg for the requests that start from now on; those under way finish
// with the config they began with, except one whose cost the old limit held and the new
// numbers do not: the limiter refuses it uncharged and it starts again with cfg, so no
// request is refused for a cost that the config it is answered by allows. What cfg may
// change:
//
//   - the descriptor trees, anything the Server itself decides (unlimited,
//     requests_per_unit 0, replaces, quota_mode, shadow_mode of a descriptor
//     without a policy) and the numbers of a policy the Service runs (requests_per_unit:
//     limiter.Service.SetLimits), keeping its counters: a key's count in the current window
//     is held to the new limit, as envoyproxy/ratelimit's Redis counters, keyed by
//     descriptor and window, keep counting;
//   - removing a descriptor: its policy stays in the Service, unused, its counters kept
//     until they expire, so a descriptor removed and added back counts on; its
//     slide_rls_descriptors_total series stay;
//   - adding back a descriptor whose policy the Service runs (one of the start's).
//
// A descriptor whose policy the Service does not run (a new one, or one whose algorithm,
// window, timezone, backend, on_backend_error, timeout or shadow_mode changed, which
// changes the state it counts in) or whose usage rules differ from the start's is
// ErrNeedsRestart, naming each: nothing is swapped, the config in use stays.
func (s *Server) Reload(cfg *Config) (Change, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	old := s.cur.Load()
	var errs []error
	for _, p := range cfg.policies {
		if s.svc == nil {
			errs = append(errs, fmt.Errorf("%s: %w: policy %q is new (the config at start had no limit the limiter decides)", p.Source, ErrNeedsRestart, p.Name))
		} else if _, ok := s.svc.Policy(p.Name); !ok {
			errs = append(errs, fmt.Errorf("%s: %w: policy %q is new", p.Source, ErrNeedsRestart, p.Name))
		}
	}
	for _, r := range cfg.rules {
		if was, ok := s.rules[r.Name]; !ok {
			errs = append(errs, fmt.Errorf("%s: %w: usage rule %q is new", r.Source, ErrNeedsRestart, r.Name))
		} else if ruleShape(r) != was {
			errs = append(errs, fmt.Errorf("%s: %w: usage rule %q changed", r.Source, ErrNeedsRestart, r.Name))
		}
	}
	if len(errs) == 0 && s.svc != nil && len(cfg.policies) > 0 {
		if err := s.svc.SetLimits(cfg.policies); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", err, ErrNeedsRestart))
		}
	}
	if len(errs) > 0 {
		return Change{}, errors.Join(errs...)
	}
	s.cur.Store(s.serve(cfg))
	return diff(old.cfg, cfg), nil
}

// maxCostRetries bounds how often a request starts again because the limiter refused a
// cost: once to compare its costs with the keys' own quotas, then only while reloads or
// plan changes keep moving those under it.
const maxCostRetries = 8

// keyQuota is the quota the limiter holds key to under policy: its plan's, or the numbers
// a Reload gave the policy (limiter.Service.EffectivePolicy); def when the Service lacks
// the policy. It looks the plan up, so it is asked only when the cost is in question.
func (s *Server) keyQuota(policy, key string, def int64) int64 {
	if p, _, ok := s.svc.EffectivePolicy(policy, key); ok {
		return p.Quota()
	}
	return def
}

// awaitReload waits for a Reload under way to finish, so that the next s.cur.Load() is
// the config that goes with the limiter's numbers.
func (s *Server) awaitReload() {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
}

// ReloadFile loads path with opt (Load) and swaps it in (Reload), counting the outcome in
// slide_rls_config_reloads_total{result="applied|refused"}. A file that does not load, or
// loads with no descriptor that has a rate limit or rules, is refused as Reload refuses
// ErrNeedsRestart: the config in use stays. Load's errors name the file and line.
func (s *Server) ReloadFile(path string, opt LoadOptions) (Change, error) {
	cfg, err := Load(path, opt)
	if err == nil && cfg.Limits() == 0 {
		err = fmt.Errorf("%s: no descriptor has a rate limit or rules", path)
	}
	var c Change
	if err == nil {
		c, err = s.Reload(cfg)
	}
	result := "applied"
	if err != nil {
		result = "refused"
	}
	s.reloads.WithLabelValues(result).Inc()
	return c, err
}

// ruleShape is r without its source line (and the zone Validate loaded), to compare.
func ruleShape(r usage.Rule) usage.Rule {
	return usage.Rule{Name: r.Name, Metric: r.Metric, Agg: r.Agg, Window: r.Window, Calendar: r.Calendar,
		Timezone: r.Timezone, Max: r.Max, Key: r.Key, Match: r.Match, OnUnavailable: r.OnUnavailable, Levels: r.Levels}
}

// diff is what changed from a to b.
func diff(a, b *Config) Change {
	c := Change{Domains: [2]int{len(a.domains), len(b.domains)}, Descriptors: [2]int{len(a.limits), len(b.limits)}}
	before := map[string]*limit{}
	for _, l := range a.limits {
		before[l.domain+"."+l.path] = l
	}
	for _, l := range b.limits {
		id := l.domain + "." + l.path
		was, ok := before[id]
		delete(before, id)
		switch {
		case !ok:
			c.Added = append(c.Added, id)
		case !sameLimit(was, l):
			c.Changed = append(c.Changed, id)
		}
	}
	for id := range before {
		c.Removed = append(c.Removed, id)
	}
	slices.Sort(c.Removed)
	return c
}

// sameLimit reports whether a and b decide alike.
func sameLimit(a, b *limit) bool {
	return a.policy == b.policy && a.quota == b.quota && a.unlimited == b.unlimited && a.banned == b.banned &&
		a.name == b.name && slices.Equal(a.replaces, b.replaces) && a.quotaMode == b.quotaMode &&
		a.shadow == b.shadow && a.window == b.window && slices.Equal(a.rules, b.rules)
}
