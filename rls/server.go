package rls

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
)

// Defaults of the request bounds (ServerConfig).
const (
	DefaultMaxDescriptors = 128
	DefaultMaxEntries     = 32
	DefaultMaxValueBytes  = 4096
)

// ServerConfig builds a Server. Config and Service are required.
type ServerConfig struct {
	// Config is the loaded configuration.
	Config *Config
	// Service decides. It must hold Config.Policies() and a checker for each
	// of Config.Rules() (usage.NewCheckers); New checks that it does. Nil
	// when the Config has neither (requests_per_unit 0 and unlimited
	// descriptors only): the clock is then time.Now.
	Service *limiter.Service
	// Redis, when set, counts the descriptors that carry a limit override
	// (Envoy's RateLimitDescriptor.limit) there; nil: in memory. slide serve
	// passes the Service's Redis backend (--redis).
	Redis limiter.Backend
	// AuthToken, when set, is required as "authorization: Bearer TOKEN"
	// metadata on every ShouldRateLimit call (compared in constant time);
	// otherwise the call fails with Unauthenticated. Health and reflection
	// stay open.
	AuthToken string
	// Registerer receives the metrics (Metric*); nil: not registered.
	Registerer prometheus.Registerer
	// Logger receives refused and failed requests, at most one line a second.
	// Nil: discard.
	Logger *slog.Logger
	// MaxDescriptors bounds the descriptors of one request. Default 128.
	MaxDescriptors int
	// MaxEntries bounds the entries of one descriptor. Default 32.
	MaxEntries int
	// MaxValueBytes bounds the domain and each entry's key and value. Default 4096.
	MaxValueBytes int
	// LimitHeaders, when set, adds envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED
	// headers, so named, to response_headers_to_add, after slide's own: the
	// limit, remaining and reset of the descriptor nearest its limit
	// (appendLimitHeaders). Nil: not sent, envoyproxy/ratelimit's default too.
	LimitHeaders *LimitHeaderNames
}

// Validate checks the configuration.
func (c *ServerConfig) Validate() error {
	if c.LimitHeaders != nil {
		if err := c.LimitHeaders.Validate(); err != nil {
			return fmt.Errorf("rls server config: %w", err)
		}
	}
	switch {
	case c.Config == nil:
		return errors.New("rls server config: no Config")
	case c.Service == nil && (len(c.Config.policies) > 0 || len(c.Config.rules) > 0):
		return errors.New("rls server config: no limiter Service")
	case c.Service == nil:
		return nil // blocks and exemptions only: nothing to decide but the overrides
	case c.MaxDescriptors < 0 || c.MaxEntries < 0 || c.MaxValueBytes < 0:
		return errors.New("rls server config: negative bound")
	}
	for _, p := range c.Config.policies {
		if _, ok := c.Service.Policy(p.Name); !ok {
			return fmt.Errorf("rls server config: the limiter Service lacks policy %q", p.Name)
		}
	}
	names := map[string]bool{}
	for _, n := range c.Service.Names() {
		names[n] = true
	}
	for _, r := range c.Config.rules {
		if !names[r.Name] {
			return fmt.Errorf("rls server config: the limiter Service lacks usage rule %q", r.Name)
		}
	}
	return nil
}

// Server answers envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
// from a Config and a limiter.Service. Safe for concurrent use; holds no
// goroutines.
type Server struct {
	pb.UnimplementedRateLimitServiceServer

	cur     atomic.Pointer[served] // swapped by Reload
	svc     *limiter.Service       // nil when the config has no policy or rule: no check reaches it
	now     func() time.Time
	token   *[sha256.Size]byte // of "Bearer TOKEN"; nil without a token
	log     *slog.Logger
	lastLog atomic.Int64
	maxDesc int
	maxEnt  int
	maxVal  int

	requests   map[pb.RateLimitResponse_Code]prometheus.Counter
	ov         overrides
	noLimit    *prometheus.CounterVec // slide_rls_descriptors_total
	errs       *prometheus.CounterVec
	reloads    *prometheus.CounterVec
	decisions  *prometheus.CounterVec // the limiter's slide_limiter_decisions_total
	ovDec      sync.Map               // policy name → *decisionMetrics, of the overrides' units
	scratchBuf sync.Pool
	reloadMu   sync.Mutex            // serialises Reload
	rules      map[string]usage.Rule // the usage rules the Service checks, by name
	limitHdr   *LimitHeaderNames     // nil: none; for every config Reload swaps in
}

// NewServer validates cfg and builds a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{svc: cfg.Service, log: log,
		maxDesc: orDefault(cfg.MaxDescriptors, DefaultMaxDescriptors),
		maxEnt:  orDefault(cfg.MaxEntries, DefaultMaxEntries),
		maxVal:  orDefault(cfg.MaxValueBytes, DefaultMaxValueBytes)}
	if cfg.AuthToken != "" {
		h := sha256.Sum256([]byte("Bearer " + cfg.AuthToken))
		s.token = &h
	}
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRequests,
		Help: "ShouldRateLimit answers by overall code (OK, OVER_LIMIT); failed calls are in " + MetricErrors + "."}, []string{"code"})
	desc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDescriptors,
		Help: "Request descriptors by configured domain and descriptor (envoy's full key) and result: ok, over_limit, shadow_over_limit, unlimited, replaced, no_limit (no configured limit; domain \"\" when the domain is unknown)."},
		[]string{"domain", "descriptor", "result"})
	s.errs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricErrors,
		Help: "ShouldRateLimit calls that failed, by reason: unauthenticated, invalid_request, unavailable, canceled, internal."}, []string{"reason"})
	s.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricReloads,
		Help: "Reloads of the config (ReloadFile: slide serve's SIGHUP) by result: applied, refused (the config in use stays)."}, []string{"result"})
	s.noLimit = desc
	initFailures(s.reloads, s.errs)
	var err error
	if s.decisions, err = limiter.DecisionCounter(cfg.Registerer); err != nil {
		return nil, err
	}
	ovErrs, err := limiter.BackendErrorCounter(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{reqs, desc, s.errs, s.reloads} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering rls metrics: %w", err)
			}
		}
	}
	s.requests = map[pb.RateLimitResponse_Code]prometheus.Counter{
		pb.RateLimitResponse_OK:         reqs.WithLabelValues("OK"),
		pb.RateLimitResponse_OVER_LIMIT: reqs.WithLabelValues("OVER_LIMIT"),
	}
	s.cur.Store(s.serve(cfg.Config))
	s.rules = map[string]usage.Rule{}
	for _, r := range cfg.Config.rules {
		s.rules[r.Name] = ruleShape(r)
	}
	s.now = time.Now
	if cfg.Service != nil {
		s.now = cfg.Service.Now
	}
	s.ov = overrides{redis: cfg.Redis, errs: ovErrs, clock: s.now}
	if cfg.LimitHeaders != nil {
		n := *cfg.LimitHeaders
		s.limitHdr = &n
	}
	s.scratchBuf.New = func() any { return new(scratch) }
	return s, nil
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// scratch is one request's working set, pooled.
type scratch struct {
	path    []*node
	key     []byte
	matched []matched
	checks  []limiter.Charge
	out     []limiter.Decision
	all     []limiter.Decision
}

// matched is one request descriptor and what applies to it.
type matched struct {
	l         *limit
	cost      int64
	first, n  int // its checks: checks[first : first+n]
	replaced  bool
	override  bool             // the descriptor's own limit
	pending   bool             // an override still to decide (by s.ov)
	synthetic bool             // decided without the limiter (banned, cost over the quota, or an override)
	d         limiter.Decision // the descriptor's decision
	key       string           // the limiter key of its policy
	ruleKey   string           // the value of the descriptor's own entry, for its usage rules
}

// ShouldRateLimit decides every descriptor of the request: see the package doc
// for the matching, the keys and the answer.
func (s *Server) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if s.token != nil {
		if err := s.authorize(ctx); err != nil {
			s.errs.WithLabelValues("unauthenticated").Inc()
			return nil, err
		}
	}
	if err := s.validate(req); err != nil {
		s.errs.WithLabelValues("invalid_request").Inc()
		s.logRefusal("invalid rate limit request", err)
		return nil, err
	}
	sc := s.scratchBuf.Get().(*scratch)
	defer s.scratchBuf.Put(sc)
	now := s.now()
	recheck := false
	for tries := 1; ; tries++ {
		cur := s.cur.Load() // this request's config from start to answer, whatever Reload does meanwhile
		err := s.decide(ctx, cur, req, now, sc, recheck)
		if err == nil {
			return s.answer(cur, req, now, sc), nil
		}
		// The limiter held a key to fewer than requests_per_unit: the key's plan, or a
		// Reload's numbers (Reload sets them, then swaps the config, so a request that
		// matched with the old config can meet them). The limiter charged nothing, so the
		// request starts again, after the swap of a Reload under way, with every cost
		// compared with the key's own quota: one over it is OVER_LIMIT, not an error.
		if !errors.Is(err, limiter.ErrCostOverLimit) || tries == maxCostRetries {
			return nil, s.decideError(ctx, err)
		}
		s.awaitReload()
		recheck = true
	}
}

// decide matches req's descriptors in cur and decides them into sc.matched (sc.out for
// the limiter's checks). A cost over requests_per_unit, or any cost when recheck is set,
// is compared with the key's own quota (keyQuota), which a plan may set above or below
// requests_per_unit. On error nothing is charged by the limiter; overrides decided
// before it may be.
func (s *Server) decide(ctx context.Context, cur *served, req *pb.RateLimitRequest, now time.Time, sc *scratch, recheck bool) error {
	sc.matched, sc.checks = sc.matched[:0], sc.checks[:0]
	replacing := map[string]bool(nil)
	for _, d := range req.GetDescriptors() {
		if o := d.GetLimit(); o != nil && cur.overridden[req.GetDomain()] != nil {
			// As envoyproxy/ratelimit: in a configured domain, the descriptor's own
			// limit replaces whatever the file says for it.
			sc.matched = append(sc.matched, matched{l: overrideLimit(req.GetDomain(), o), cost: cost(req, d),
				override: true, key: overrideKey(req.GetDomain(), d)})
			continue
		}
		var l *limit
		l, sc.path = cur.cfg.match(req.GetDomain(), d, sc.path[:0])
		m := matched{l: l, cost: cost(req, d)}
		if l != nil {
			for _, r := range l.replaces {
				if replacing == nil {
					replacing = map[string]bool{}
				}
				replacing[r] = true
			}
			if !l.unlimited {
				if l.policy != "" {
					m.key = limiterKey(d, sc.path, &sc.key)
				}
				if len(l.rules) > 0 {
					e := d.GetEntries()
					m.ruleKey = ruleKey(e[len(e)-1].GetValue())
				}
			}
		}
		sc.matched = append(sc.matched, m)
	}
	for i := range sc.matched {
		m := &sc.matched[i]
		l := m.l
		if l == nil || l.unlimited {
			continue
		}
		if l.name != "" && replacing[l.name] {
			m.replaced = true
			continue
		}
		m.first = len(sc.checks)
		quota := l.quota
		if l.policy != "" && !m.override && (recheck || m.cost > quota) {
			quota = s.keyQuota(l.policy, m.key, quota)
		}
		switch {
		case m.override && !l.banned && m.cost <= l.quota:
			m.synthetic, m.pending = true, true // decided below, after the limiter
		case l.banned:
			m.synthetic = true
			reset, w := l.period.at(now, l.window)
			m.d = limiter.Decision{RetryAfter: reset, ResetAfter: reset, Window: w, Policy: l.label}
		case (l.policy != "" || m.override) && m.cost > quota:
			// envoyproxy/ratelimit answers such a request over limit; the limiter
			// would refuse it as an error, so it is decided here, without charging.
			m.synthetic = true
			reset, w := l.period.at(now, l.window)
			m.d = limiter.Decision{Limit: quota, Window: w, RetryAfter: reset, ResetAfter: reset, Policy: l.label}
		case l.policy != "" && !m.override:
			sc.checks = append(sc.checks, limiter.Charge{Policy: l.policy, Key: m.key, Cost: m.cost})
		}
		if !m.synthetic && !m.override {
			for _, r := range l.rules {
				sc.checks = append(sc.checks, limiter.Charge{Policy: r, Key: m.ruleKey, Cost: m.cost})
			}
		}
		if m.synthetic && l.shadow {
			m.d.Allowed, m.d.Shadowed, m.d.RetryAfter = true, true, 0
		}
		m.n = len(sc.checks) - m.first
	}
	if len(sc.checks) > 0 {
		if cap(sc.out) < len(sc.checks) {
			sc.out = make([]limiter.Decision, len(sc.checks))
		}
		sc.out = sc.out[:len(sc.checks)]
		if _, err := s.svc.Decide(ctx, now, sc.checks, sc.out); err != nil {
			return err
		}
	}
	for i := range sc.matched {
		if m := &sc.matched[i]; m.pending {
			d, err := s.ov.decide(ctx, now, m.l, m.key, m.cost)
			if err != nil {
				return err
			}
			m.d = d
		}
	}
	return nil
}

// untilReset is the time from now to the end of the epoch-aligned window.
func untilReset(now time.Time, w time.Duration) time.Duration {
	if w <= 0 {
		return 0
	}
	ns := now.UnixNano()
	return time.Duration(int64(w) - ns%int64(w))
}

// answer builds the response from the decisions.
func (s *Server) answer(cur *served, req *pb.RateLimitRequest, now time.Time, sc *scratch) *pb.RateLimitResponse {
	resp := &pb.RateLimitResponse{Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(sc.matched))}
	overRate, quotaTotal, quotaOver := 0, 0, 0
	// When the request would pass: its rate denials' longest RetryAfter and, only when
	// every quota_mode descriptor is over, the shortest of theirs.
	var rateRetry, quotaRetry time.Duration
	sc.all = sc.all[:0]
	main := -1    // index in sc.all of the request's deciding decision
	onlyIdx := -1 // the limit.idx of the one decided descriptor (-1: an override)
	for i := range sc.matched {
		m := &sc.matched[i]
		l := m.l
		st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		resp.Statuses[i] = st
		switch {
		case l == nil:
			s.noLimit.WithLabelValues(cur.domainLabel(req), "", resultNoLimit).Inc()
			continue
		case l.unlimited:
			st.LimitRemaining = math.MaxUint32
			cur.perLimit[l.idx].unlimited.Inc()
			cur.perLimit[l.idx].dec.allowed.Inc()
			continue
		case m.replaced:
			cur.perLimit[l.idx].replaced.Inc()
			continue
		}
		if !m.synthetic {
			// The descriptor's decision is its worst check: a denial with the
			// longest RetryAfter, else the least Remaining.
			for j := m.first; j < m.first+m.n; j++ {
				if j == m.first || worse(&sc.out[j], &m.d) {
					m.d = sc.out[j]
				}
			}
			if m.n == 0 {
				continue
			}
		}
		d := &m.d
		switch {
		case m.override:
			s.overrideDecisions(l.policy).count(d)
		case m.synthetic:
			cur.perLimit[l.idx].dec.count(d)
		}
		// Admitted uncounted (the backend failed, on_backend_error open): nothing is
		// known of the key's quota, so its status claims none (no current_limit, which
		// Envoy's x-ratelimit headers and LimitHeaders skip) and it adds no RateLimit
		// entry, as envoyproxy/ratelimit claims none when Redis fails (its call fails
		// and Envoy lets the request through without headers). A full quota would
		// invite a client that paces itself by the headers to spend it at once.
		untracked := d.Untracked()
		if !untracked {
			if c := cur.currentLimit(l, d); c != nil {
				st.CurrentLimit = c // shared, never modified: concurrent marshals only read it
			}
			st.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
			st.DurationUntilReset = durationpb.New(max(d.ResetAfter, d.RetryAfter))
		}
		var lm *limitMetrics
		if m.override {
			lm = cur.overridden[l.domain]
		} else {
			lm = &cur.perLimit[l.idx]
		}
		switch {
		case !d.Allowed:
			st.Code = pb.RateLimitResponse_OVER_LIMIT
			lm.over.Inc()
		case d.Shadowed:
			lm.shadowOver.Inc()
		default:
			lm.ok.Inc()
		}
		if l.quotaMode {
			quotaTotal++
			if !d.Allowed {
				if quotaOver == 0 || d.RetryAfter < quotaRetry {
					quotaRetry = d.RetryAfter
				}
				quotaOver++
			}
		} else if !d.Allowed {
			rateRetry = max(rateRetry, d.RetryAfter)
			overRate++
		}
		if untracked {
			continue
		}
		sc.all = append(sc.all, *d)
		if !m.override {
			onlyIdx = l.idx
		}
		if main < 0 || worse(d, &sc.all[main]) {
			main = len(sc.all) - 1
		}
	}
	resp.OverallCode = pb.RateLimitResponse_OK
	if overRate > 0 || quotaTotal > 0 && quotaTotal == quotaOver {
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	s.requests[resp.OverallCode].Inc()
	if main >= 0 {
		md := sc.all[main]
		md.Allowed = resp.OverallCode == pb.RateLimitResponse_OK
		if !md.Allowed {
			// Not the worst denial's: a quota_mode one beside one that is not over
			// holds nothing back.
			md.RetryAfter = rateRetry
			if quotaTotal > 0 && quotaTotal == quotaOver {
				md.RetryAfter = max(md.RetryAfter, quotaRetry)
			}
		}
		if len(sc.all) > 1 {
			onlyIdx = -1
		}
		resp.ResponseHeadersToAdd = cur.headers(onlyIdx, md, sc.all)
	}
	if s.limitHdr != nil {
		resp.ResponseHeadersToAdd = s.appendLimitHeaders(resp.ResponseHeadersToAdd, resp, sc)
	}
	return resp
}

// worse reports whether a ranks before b as a request's decision: a denial
// with a longer RetryAfter, or, when both admit, less Remaining.
func worse(a, b *limiter.Decision) bool {
	switch {
	case !a.Allowed && b.Allowed:
		return true
	case a.Allowed && !b.Allowed:
		return false
	case !a.Allowed:
		return a.RetryAfter > b.RetryAfter
	}
	return a.Remaining < b.Remaining
}

// decideError maps a limiter error to a gRPC status.
func (s *Server) decideError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		s.errs.WithLabelValues("canceled").Inc()
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, limiter.ErrBackendUnavailable):
		s.errs.WithLabelValues("unavailable").Inc()
		s.logRefusal("rate limit backend unavailable", err)
		return status.Errorf(codes.Unavailable, "%v", err)
	case errors.Is(err, limiter.ErrInvalidKey), errors.Is(err, limiter.ErrInvalidCost), errors.Is(err, limiter.ErrCostOverLimit):
		s.errs.WithLabelValues("invalid_request").Inc()
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	s.errs.WithLabelValues("internal").Inc()
	s.logRefusal("rate limit decision failed", err)
	return status.Errorf(codes.Unavailable, "deciding: %v", err)
}

func (s *Server) logRefusal(msg string, err error) {
	now := time.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last < int64(time.Second) || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn(msg, "err", err)
}

// authorize checks the bearer token in the call's metadata. Both sides are
// hashed (SHA-256) before subtle.ConstantTimeCompare, as the HTTP API does, so
// neither the token's content nor its length shows in the time a wrong one
// takes (ConstantTimeCompare returns at once on a length mismatch).
func (s *Server) authorize(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if got := sha256.Sum256([]byte(v)); subtle.ConstantTimeCompare(got[:], s.token[:]) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, `missing or wrong "authorization: Bearer TOKEN" metadata`)
}

// validate refuses what no descriptor tree should be asked, with a message that
// names the problem.
func (s *Server) validate(req *pb.RateLimitRequest) error {
	bad := func(format string, args ...any) error { return status.Errorf(codes.InvalidArgument, format, args...) }
	dom := req.GetDomain()
	switch {
	case dom == "":
		return bad("rate limit domain must not be empty")
	case len(dom) > s.maxVal:
		return bad("domain is %d bytes, more than %d", len(dom), s.maxVal)
	case !utf8.ValidString(dom):
		return bad("domain is not valid UTF-8")
	case len(req.GetDescriptors()) == 0:
		return bad("rate limit descriptor list must not be empty")
	case len(req.GetDescriptors()) > s.maxDesc:
		return bad("%d descriptors, more than %d", len(req.GetDescriptors()), s.maxDesc)
	}
	for i, d := range req.GetDescriptors() {
		if d == nil {
			return bad("descriptor %d is null", i)
		}
		if len(d.GetEntries()) > s.maxEnt {
			return bad("descriptor %d has %d entries, more than %d", i, len(d.GetEntries()), s.maxEnt)
		}
		if o := d.GetLimit(); o != nil && overrideUnits[typev3.RateLimitUnit(o.GetUnit())] == "" {
			return bad("descriptor %d: limit override unit %s: want SECOND, MINUTE, HOUR, DAY, MONTH or YEAR", i, typev3.RateLimitUnit(o.GetUnit()))
		}
		if d.GetIsNegativeHits() {
			return bad("descriptor %d: is_negative_hits is not supported", i)
		}
		for j, e := range d.GetEntries() {
			if e == nil {
				return bad("descriptor %d entry %d is null", i, j)
			}
			if len(e.GetKey()) > s.maxVal || len(e.GetValue()) > s.maxVal {
				return bad("descriptor %d entry %d: key or value over %d bytes", i, j, s.maxVal)
			}
		}
	}
	return nil
}
