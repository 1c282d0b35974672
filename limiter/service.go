package limiter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/internal/suggest"
)

// Checker is a named admission check that a Service consults like a policy:
// a request may name it in "policy" or "policies", and its denial carries its
// own name (Decision.Policy) and RetryAfter. It is the seam for usage rules
// that read window.Store ("deny when sum(cost) over 1h > quota").
//
// Check must be safe for concurrent use and must not block beyond ctx. An
// error fails the request: wrap ErrBackendUnavailable for a 503.
type Checker interface {
	Name() string
	Check(ctx context.Context, key string, now time.Time, cost int64) (Decision, error)
}

// DenyCacheConfig tunes the local cache of Redis denials. Zero value: on,
// 100,000 keys per policy.
type DenyCacheConfig struct {
	// Disabled turns the cache off: every request costs a round trip.
	Disabled bool
	// MaxKeys bounds the cached keys per policy. Default 100,000.
	MaxKeys int
}

// Config builds a Service. Policies is required; the rest has defaults.
type Config struct {
	// Policies are validated by NewService; names must be unique.
	Policies []Policy
	// Redis decides the policies with backend redis (see limiter/redislimit).
	// Required when one has; a nil Redis with such a policy is an error
	// naming the policy's line.
	Redis Backend
	// Cluster decides the policies with backend cluster (see limiter/clusterlimit): each
	// key at its owner instance. Required when one has.
	Cluster Backend
	// Checkers are extra named checks (usage rules). Names must not clash
	// with policies.
	Checkers []Checker
	// Registerer receives the metrics (see Metric*); nil: not registered.
	Registerer prometheus.Registerer
	// Logger receives backend failures, at most one line per policy per
	// second. Nil: discard.
	Logger *slog.Logger
	// Clock is the now of Allow and of the HTTP handlers. Default
	// MonotonicClock().
	Clock func() time.Time
	// Memory configures the memory policies and the local fallbacks.
	Memory MemoryConfig
	// DenyCache configures the local cache of Redis denials.
	DenyCache DenyCacheConfig
}

// Service is the set of policies a process enforces, with their backends,
// failure modes and metrics. Its HTTP face is AllowHandler; its library face
// Allow, AllowN, Decide and NewMiddleware. Safe for concurrent use; holds no
// goroutines, so it needs no Close.
type Service struct {
	byName   map[string]*running
	names    []string
	redis    Backend
	cluster  Backend
	local    LocalDecider // cluster, when it decides owned keys in process
	one      OneDecider   // cluster, when it decides a lone request (allowCluster)
	clock    func() time.Time
	ownClock bool // clock is MonotonicClock's: a now it read that carries a monotonic reading is the present (nowStarts)
	log      *slog.Logger
	metrics  *metrics
	plans    atomic.Pointer[planTable] // nil: no plans
	planMu   sync.Mutex                // serialises SetPlans and SetKeyPlans
}

// running is one policy or checker as the Service runs it.
type running struct {
	p       Policy // zero for a checker
	idx     int    // position in Service.names
	checker Checker
	mem     *Memory // memory policy, or the local fallback of a redis one
	deny    *denyCache
	m       policyMetrics
	lastLog atomic.Int64
}

// Validate checks the parts of cfg that need no backend: at least one policy
// or checker, and sane Memory and DenyCache settings. NewService also
// validates each policy (every problem, with its source line) and the rest.
func (c *Config) Validate() error {
	if len(c.Policies) == 0 && len(c.Checkers) == 0 {
		return errors.New("limiter config: no policies")
	}
	if c.DenyCache.MaxKeys < 0 {
		return fmt.Errorf("limiter config: deny cache max keys %d is negative", c.DenyCache.MaxKeys)
	}
	return c.Memory.Validate()
}

// NewService validates cfg and builds the policies' backends.
func NewService(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("creating limiter service: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	clock := cfg.Clock
	if clock == nil {
		clock = MonotonicClock()
	}
	mcfg := cfg.Memory
	if mcfg.Clock == nil {
		mcfg.Clock = clock
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Service{byName: map[string]*running{}, redis: cfg.Redis, cluster: cfg.Cluster, clock: clock, ownClock: cfg.Clock == nil, log: log, metrics: met}
	var errs []error
	first := map[string]string{}
	for _, p := range cfg.Policies {
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if at, dup := first[strings.ToLower(p.Name)]; dup { // names differing only by case are one name to a reader
			errs = append(errs, &PolicyError{Source: p.Source, Policy: p.Name, Field: "name",
				Msg: "duplicate policy name" + suffixAt(at)})
			continue
		}
		first[strings.ToLower(p.Name)] = p.Source
		if p.Backend == BackendRedis && cfg.Redis == nil {
			errs = append(errs, &PolicyError{Source: p.Source, Policy: p.Name, Field: "backend",
				Msg: "redis needs a Redis address (slide serve --redis ADDR)"})
			continue
		}
		if p.Backend == BackendCluster && cfg.Cluster == nil {
			errs = append(errs, &PolicyError{Source: p.Source, Policy: p.Name, Field: "backend",
				Msg: "cluster needs the instances' consumer group (slide serve)"})
			continue
		}
		rt := &running{p: p, idx: len(s.names), m: met.forPolicy(p.Name)}
		if p.Backend == BackendMemory || p.OnBackendError == FailLocal {
			if rt.mem, err = NewMemory(p, mcfg); err != nil {
				return nil, err
			}
		}
		if p.Backend == BackendRedis && !cfg.DenyCache.Disabled {
			n := cfg.DenyCache.MaxKeys
			if n <= 0 {
				n = 100_000
			}
			rt.deny = newDenyCache(n)
		}
		s.byName[p.Name] = rt
		s.names = append(s.names, p.Name)
	}
	for _, c := range cfg.Checkers {
		if c == nil || !ValidName(c.Name()) {
			errs = append(errs, &PolicyError{Field: "checker", Msg: "nil checker or invalid name"})
			continue
		}
		if _, dup := s.byName[c.Name()]; dup || first[c.Name()] != "" {
			errs = append(errs, &PolicyError{Policy: c.Name(), Msg: "checker name clashes with a policy or checker"})
			continue
		}
		s.byName[c.Name()] = &running{checker: c, idx: len(s.names), m: met.forPolicy(c.Name())}
		s.names = append(s.names, c.Name())
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.local, _ = cfg.Cluster.(LocalDecider)
	if _, ok := cfg.Cluster.(DeadlineDecider); ok {
		s.one, _ = cfg.Cluster.(OneDecider)
	}
	if r, ok := cfg.Cluster.(PolicyResolver); ok {
		r.SetResolver(s.EffectivePolicy)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(newMemCollector(s)); err != nil {
			return nil, fmt.Errorf("registering limiter store metrics: %w", err)
		}
	}
	return s, nil
}

func suffixAt(src string) string {
	if src == "" {
		return ""
	}
	return " (first defined at " + src + ")"
}

// unknownPolicy is ErrUnknownPolicy for name, with the configured name closest to it and the
// names known, closest first, as /v1/window answers an unknown metric: a request's policy is
// typed by hand, and "unknown policy" alone leaves the reader to find the file.
func (s *Service) unknownPolicy(name string) error {
	hint, ordered, near := "", s.names, 0
	// No policy name is longer than 64 bytes (ValidName), and past a few hundred names (an rls
	// config's) the distances would make a refused request cost more than a decision.
	if len(name) <= 64 && len(s.names) <= 256 {
		ordered, near = suggest.Closest(name, s.names)
	}
	if near > 0 {
		hint = fmt.Sprintf(" (did you mean %q?)", ordered[0])
	}
	if len(ordered) > 10 {
		ordered = append(ordered[:10:10], "…")
	}
	return fmt.Errorf("%w %q%s; known: %s", ErrUnknownPolicy, name, hint, strings.Join(ordered, ", "))
}

// Names returns the policy and checker names, policies first, in
// configuration order.
func (s *Service) Names() []string { return append([]string(nil), s.names...) }

// Policy returns the named policy.
func (s *Service) Policy(name string) (Policy, bool) {
	rt, ok := s.byName[name]
	if !ok || rt.checker != nil {
		return Policy{}, false
	}
	return s.plans.Load().own(rt).p, true
}

// Now returns the Service clock's reading.
func (s *Service) Now() time.Time { return s.clock() }

// Charge is one entry of a multi-policy request: the policy or checker name,
// the key to charge and the cost (0 peeks).
type Charge struct {
	Policy string
	Key    string
	Cost   int64
}

// Allow is AllowN(ctx, policy, key, Now(), 1).
func (s *Service) Allow(ctx context.Context, policy, key string) (Decision, error) {
	return s.AllowN(ctx, policy, key, s.clock(), 1)
}

// AllowN decides one request of the named policy or checker. For a memory
// policy it allocates nothing. Errors: ErrUnknownPolicy, ErrInvalidKey,
// ErrInvalidCost, ErrCostOverLimit (all wrapped, test with errors.Is), and
// ErrBackendUnavailable when Redis fails under on_backend_error closed.
func (s *Service) AllowN(ctx context.Context, policy, key string, now time.Time, cost int64) (Decision, error) {
	if rt := s.loneCluster(policy); rt != nil {
		var out Decision
		return s.allowCluster(ctx, rt, key, now, cost, &out)
	}
	checks := [1]Charge{{Policy: policy, Key: key, Cost: cost}}
	var out [1]Decision
	return s.decide(ctx, now, checks[:], out[:])
}

// Decide decides several charges (each a policy or checker, a key and a cost) as one
// request: every charge is decided (those that allow are charged even when another
// denies, as in Envoy's ratelimit service and gubernator), all the Redis ones in one
// round trip, and out[i] receives the decision of checks[i] (len(out) ≥ len(checks)).
//
// The returned decision is the request's: the denial with the longest
// RetryAfter if any check denies, otherwise the allowed decision with the
// least Remaining (the one nearest its limit), an admission nothing counted
// (Decision.Untracked) only when no other was counted. If nothing denies but a
// closed policy's backend failed, the error is ErrBackendUnavailable. Input
// errors are returned before anything is charged.
//
// now is the decisions' time, normally the Service clock's reading (Now). With the
// default clock, a now read from it (it carries a monotonic reading) also starts the
// backend's timeout and latency, sparing a clock read per decision: pass a now read just
// before, not one kept from earlier.
func (s *Service) Decide(ctx context.Context, now time.Time, checks []Charge, out []Decision) (Decision, error) {
	if len(checks) == 1 && len(out) > 0 {
		if rt := s.loneCluster(checks[0].Policy); rt != nil {
			return s.allowCluster(ctx, rt, checks[0].Key, now, checks[0].Cost, &out[0])
		}
	}
	return s.decide(ctx, now, checks, out)
}

// decide is Decide by its general path, for any checks.
func (s *Service) decide(ctx context.Context, now time.Time, checks []Charge, out []Decision) (Decision, error) {
	if len(checks) == 0 {
		return Decision{}, fmt.Errorf("%w: no policy named", ErrUnknownPolicy)
	}
	if len(out) < len(checks) {
		return Decision{}, errors.New("deciding: out is shorter than checks")
	}
	var rtBuf [4]*running // one map lookup per check, no allocation for ≤ 4
	rts := rtBuf[:0]
	if len(checks) > len(rtBuf) {
		rts = make([]*running, 0, len(checks))
	}
	// With plans, each check's plan (-1: none) and its numbers (nil: the policy's own).
	tbl := s.plans.Load()
	var planBuf [4]int32
	var ovBuf [4]*override
	var plans []int32
	var ovs []*override
	if tbl != nil {
		plans, ovs = planBuf[:0], ovBuf[:0]
		if len(checks) > len(planBuf) {
			plans, ovs = make([]int32, 0, len(checks)), make([]*override, 0, len(checks))
		}
	}
	for i := range checks {
		c := &checks[i]
		rt := s.byName[c.Policy]
		if rt == nil {
			return Decision{}, s.unknownPolicy(c.Policy)
		}
		rts = append(rts, rt)
		if err := ValidateKey(c.Key); err != nil {
			return Decision{}, err
		}
		if err := rt.p.Levels.checkKey(c.Key); err != nil {
			return Decision{}, err
		}
		if c.Cost < 0 {
			return Decision{}, ErrInvalidCost
		}
		quota := rt.p.Quota()
		if tbl != nil {
			j := tbl.planOf(c.Key)
			var ov *override
			switch {
			case rt.checker == nil && rt.p.Levels.N > 0:
				ov = tbl.levelOverride(rt, c.Key)
			case j >= 0:
				ov = tbl.over[j][rt.idx]
			}
			if ov == nil && tbl.base != nil && rt.checker == nil {
				ov = tbl.base[rt.idx] // SetLimits's numbers
			}
			plans, ovs = append(plans, j), append(ovs, ov)
			if ov != nil && rt.checker == nil {
				quota = ov.pr.quota
			}
		}
		if rt.checker == nil && c.Cost > quota {
			return Decision{}, fmt.Errorf("%w: cost %d, policy %q allows at most %d", ErrCostOverLimit, c.Cost, c.Policy, quota)
		}
	}
	nowNs := now.UnixNano()
	var routesBuf [4]uint64
	routes := routesBuf[:0]         // the owners' routes, as DecideLocal found them
	var remoteBuf, ownersBuf [4]int // no allocation for ≤ 4 checks
	remote := remoteBuf[:0]         // indexes of checks that go to Redis
	owners := ownersBuf[:0]         // indexes of checks that go to their owner instance (backend cluster)
	var unavailable []int           // closed policies whose backend failed (or whose store is full)
	var failed error
	// Checkers (usage rules) only read, so they go first: one that fails leaves no policy
	// charged for a request that gets no decision.
	for i := range checks {
		c := &checks[i]
		rt := rts[i]
		if rt.checker == nil {
			continue
		}
		var d Decision
		var err error
		if ovs != nil && ovs[i] != nil {
			d, err = rt.checker.(PlanChecker).CheckMax(ctx, c.Key, now, c.Cost, ovs[i].max)
		} else {
			d, err = rt.checker.Check(ctx, c.Key, now, c.Cost)
		}
		if err != nil {
			rt.m.failed.Inc()
			return Decision{}, fmt.Errorf("checking rule %q: %w", c.Policy, err)
		}
		if d.Policy == "" {
			d.Policy = c.Policy
		}
		out[i] = d
		s.count(rt, &out[i])
	}
	for i := range checks {
		c := &checks[i]
		rt := rts[i]
		switch {
		case rt.checker != nil:
			// decided above
		case rt.p.Backend == BackendMemory:
			pr := &rt.mem.pr
			if ovs != nil && ovs[i] != nil {
				pr = &ovs[i].pr
			}
			if !rt.mem.decide(pr, c.Key, nowNs, c.Cost, &out[i]) {
				// The store holds only live state: fail by the policy's mode rather than
				// evict a live key (which would hand a denied key a fresh allowance).
				rt.m.failed.Inc()
				s.logFailure(rt, ErrStoreFull)
				if rt.p.OnBackendError == FailClosed && !rt.p.Shadow {
					out[i].Allowed = false
					if failed == nil {
						failed = fmt.Errorf("policy %q: %w: %w", rt.p.Name, ErrBackendUnavailable, ErrStoreFull)
					}
					unavailable = append(unavailable, i)
				}
				continue
			}
			s.count(rt, &out[i])
		case rt.p.Backend == BackendCluster:
			// A key this instance owns is a memory decision: no call, no deadline.
			if s.local != nil {
				p := &rt.p
				if ovs != nil && ovs[i] != nil {
					p = &ovs[i].p // the key's plan: the owner decides by its numbers
				}
				d, route, ok := s.local.DecideLocal(BackendRequest{Policy: p, Key: c.Key, Now: now, Cost: c.Cost})
				if ok {
					out[i] = d
					s.count(rt, &out[i])
					continue
				}
				routes = append(routes, route)
			} else {
				routes = append(routes, 0)
			}
			owners = append(owners, i)
		default:
			if rt.deny != nil && rt.p.Levels.N == 0 { // a level's denial names its level: not cached
				p := &rt.p
				if ovs != nil && ovs[i] != nil {
					p = &ovs[i].p
				}
				if e, hit := rt.deny.get(c.Key, nowNs, c.Cost, p); hit {
					rt.m.cacheHit.Inc()
					out[i] = Decision{Limit: p.Quota(), Remaining: e.remaining,
						RetryAfter: time.Duration(e.until - nowNs), ResetAfter: time.Duration(max(e.resetAt-nowNs, e.until-nowNs)),
						Window: e.window, Policy: rt.p.Name}
					s.count(rt, &out[i])
					continue
				}
			}
			remote = append(remote, i)
		}
	}
	for k := range 2 {
		// Redis, then the owners (a table of the two would move the index slices to the heap).
		idx, backend, name := remote, s.redis, "redis"
		var rs []uint64
		if k == 1 {
			idx, backend, name, rs = owners, s.cluster, "cluster", routes
		}
		if len(idx) == 0 {
			continue
		}
		start := now
		if k == 1 && len(remote) > 0 || !s.nowStarts(now) {
			start = time.Now() // the Redis call took its time, or now is not the present
		}
		un, err := s.decideRemote(ctx, now, start, checks, rts, idx, rs, ovs, out, backend, name)
		unavailable = append(unavailable, un...)
		if failed == nil {
			failed = err
		}
		if err := ctx.Err(); err != nil && failed != nil {
			// The caller gave up (client gone): not a backend failure to report.
			return Decision{}, fmt.Errorf("deciding: %w", err)
		}
	}
	if tbl != nil {
		for i, j := range plans {
			if j >= 0 {
				out[i].Plan = tbl.ps.names[j]
			}
		}
	}
	best := -1
	for i := range checks {
		if contains(unavailable, i) {
			continue
		}
		d := &out[i]
		switch {
		case best < 0:
			best = i
		case !d.Allowed && (out[best].Allowed || d.RetryAfter > out[best].RetryAfter):
			best = i
		case d.Allowed && out[best].Allowed && lessRemaining(d, &out[best]):
			best = i
		}
	}
	// A real denial answers the request (429) even if a closed policy's
	// backend failed; otherwise the failure does (503).
	if failed != nil && (best < 0 || out[best].Allowed) {
		return out[unavailable[0]], failed
	}
	return out[best], nil
}

// lessRemaining reports whether admission a is nearer its limit than b. One nothing
// counted (Untracked: its Remaining, the full quota, vouches for nothing) ranks after any
// that was counted, so the request's decision, its JSON and its X-RateLimit-* headers
// describe a counted policy whenever there is one.
func lessRemaining(a, b *Decision) bool {
	if ua, ub := a.Untracked(), b.Untracked(); ua != ub {
		return ub
	}
	return a.Remaining < b.Remaining
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// decide is AllowN without input checks, for the Service's hot path. It reports false
// when the store refused the request (ErrStoreFull); d is then an untracked admission
// marked Degraded, for the caller to keep (on_backend_error open) or turn down.
func (m *Memory) decide(pr *params, key string, now, cost int64, d *Decision) bool {
	r := m.take(pr, key, now, cost, d) // the Service validated key
	d.Policy, d.Shadowed, d.Degraded, d.Plan, d.local = m.p.Name, false, false, "", false
	if r == takeFull {
		*d = Decision{Allowed: true, Limit: pr.quota, Remaining: pr.quota, Window: pr.quotaWin,
			Policy: m.p.Name, Degraded: true}
		return false
	}
	return true
}

func (s *Service) logFailure(rt *running, err error) {
	now := time.Now().UnixNano()
	last := rt.lastLog.Load()
	if now-last < int64(time.Second) || !rt.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("rate limit backend failed", "policy", rt.p.Name, "on_backend_error", rt.p.OnBackendError.String(), "err", err)
}

// shadow turns a denial of a shadow policy into an admission.
func (s *Service) shadow(rt *running, d *Decision) {
	if rt.p.Shadow && !d.Allowed {
		d.Allowed, d.Shadowed, d.RetryAfter = true, true, 0
	}
}

// count applies shadow mode and records the decision's metric.
func (s *Service) count(rt *running, d *Decision) {
	s.shadow(rt, d)
	switch {
	case d.Shadowed:
		rt.m.shadowDenied.Inc()
	case d.Allowed:
		rt.m.allowed.Inc()
	default:
		rt.m.denied.Inc()
	}
}
