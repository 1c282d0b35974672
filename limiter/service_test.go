package limiter

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeBackend is a Backend for tests of the Service's own logic: it decides
// with one Memory per policy (the real algorithms), counts round trips, and
// can fail or hang on demand. The Redis behaviour itself is tested against a
// real redis-server in limiter/redislimit.
type fakeBackend struct {
	mu    sync.Mutex
	mems  map[string]*Memory
	calls atomic.Int64
	fail  atomic.Pointer[error]
	hang  atomic.Bool
}

func (f *fakeBackend) Decide(ctx context.Context, reqs []BackendRequest, out []Decision) error {
	f.calls.Add(1)
	if f.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if e := f.fail.Load(); e != nil {
		return *e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mems == nil {
		f.mems = map[string]*Memory{}
	}
	for i, r := range reqs {
		m := f.mems[r.Policy.Name]
		if m == nil {
			p := *r.Policy
			p.Backend, p.OnBackendError, p.Timeout = BackendMemory, FailOpen, 0
			m, _ = NewMemory(p, MemoryConfig{})
			f.mems[r.Policy.Name] = m
		}
		d, err := m.AllowN(ctx, r.Key, r.Now, r.Cost)
		if err != nil {
			return err
		}
		out[i] = d
	}
	return nil
}

func (f *fakeBackend) setErr(err error) {
	if err == nil {
		f.fail.Store(nil)
		return
	}
	f.fail.Store(&err)
}

var t0 = time.Unix(1_764_489_600, 0)

func newTestService(t *testing.T, cfg Config) *Service {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = func() time.Time { return t0 }
	}
	s, err := NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustDecide(t *testing.T, s *Service, now time.Time, cost int64, key string, names ...string) (Decision, []Decision) {
	t.Helper()
	checks := make([]Charge, len(names))
	for i, n := range names {
		checks[i] = Charge{Policy: n, Key: key, Cost: cost}
	}
	out := make([]Decision, len(checks))
	d, err := s.Decide(context.Background(), now, checks, out)
	if err != nil {
		t.Fatal(err)
	}
	return d, out
}

// Several policies in one request: denied if any denies; the ones that
// allowed are still charged.
func TestServiceMultiPolicyCharging(t *testing.T) {
	s := newTestService(t, Config{Policies: []Policy{
		{Name: "per-user", Algorithm: SlidingLog, Limit: 2, Window: time.Minute},
		{Name: "per-tenant", Algorithm: FixedWindow, Limit: 5, Window: time.Minute},
	}})
	for i, want := range []bool{true, true, false, false} {
		d, out := mustDecide(t, s, t0.Add(time.Duration(i)*time.Second), 1, "u1", "per-user", "per-tenant")
		if d.Allowed != want {
			t.Fatalf("request %d: allowed=%v, want %v (%+v)", i, d.Allowed, want, out)
		}
		if !want && (d.Policy != "per-user" || d.RetryAfter != time.Minute-time.Duration(i)*time.Second) {
			t.Errorf("request %d: deciding policy %q retry %s, want per-user with %s", i, d.Policy, d.RetryAfter, time.Minute-time.Duration(i)*time.Second)
		}
		if !out[1].Allowed {
			t.Errorf("request %d: per-tenant denied", i)
		}
	}
	// per-tenant was charged for all four, including the two per-user denied.
	d, _ := mustDecide(t, s, t0.Add(5*time.Second), 0, "u1", "per-tenant")
	if d.Remaining != 1 {
		t.Errorf("per-tenant remaining = %d after 4 requests, want 1 (charged even when per-user denied)", d.Remaining)
	}
	// Allowed by all: the request's decision is the one nearest its limit.
	d, _ = mustDecide(t, s, t0, 1, "u2", "per-tenant", "per-user")
	if d.Policy != "per-user" || d.Remaining != 1 {
		t.Errorf("allowed request decided by %q remaining %d, want per-user with 1", d.Policy, d.Remaining)
	}
}

func TestServiceShadowAndPeek(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestService(t, Config{Registerer: reg, Policies: []Policy{
		{Name: "trial", Algorithm: FixedWindow, Limit: 1, Window: time.Minute, Shadow: true},
	}})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		d, err := s.Allow(ctx, "trial", "k")
		if err != nil || !d.Allowed {
			t.Fatalf("shadow policy denied: %+v, %v", d, err)
		}
		if d.Shadowed != (i > 0) {
			t.Errorf("request %d: Shadowed = %v", i, d.Shadowed)
		}
	}
	// Peek: reports without consuming.
	for i := 0; i < 3; i++ {
		d, _ := s.AllowN(ctx, "trial", "fresh", t0, 0)
		if !d.Allowed || d.Remaining != 1 {
			t.Fatalf("peek %d: %+v, want allowed with 1 remaining", i, d)
		}
	}
	if got := testutil.ToFloat64(s.metrics.decisions.WithLabelValues("trial", ResultShadowDenied)); got != 2 {
		t.Errorf("shadow_denied = %v, want 2", got)
	}
}

// ruleChecker denies keys listed in deny, as a usage rule would.
type ruleChecker struct{ deny map[string]bool }

func (r ruleChecker) Name() string { return "p95-shed" }
func (r ruleChecker) Check(_ context.Context, key string, _ time.Time, _ int64) (Decision, error) {
	if r.deny[key] {
		return Decision{Allowed: false, Limit: 800, RetryAfter: 5 * time.Second, ResetAfter: 5 * time.Second, Window: 5 * time.Minute}, nil
	}
	return Decision{Allowed: true, Limit: 800, Remaining: 800, Window: 5 * time.Minute}, nil
}

func TestServiceChecker(t *testing.T) {
	s := newTestService(t, Config{
		Policies: []Policy{{Name: "api", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 5}},
		Checkers: []Checker{ruleChecker{deny: map[string]bool{"tenant-7": true}}},
	})
	d, _ := mustDecide(t, s, t0, 1, "tenant-7", "api", "p95-shed")
	if d.Allowed || d.Policy != "p95-shed" || d.RetryAfter != 5*time.Second {
		t.Errorf("rule denial: %+v, want denied by p95-shed with RetryAfter 5s", d)
	}
	d, _ = mustDecide(t, s, t0, 1, "tenant-1", "api", "p95-shed")
	if !d.Allowed || d.Policy != "api" {
		t.Errorf("rule allows: %+v, want allowed, decided by api (nearest its limit)", d)
	}
	if _, err := NewService(Config{Policies: []Policy{{Name: "p95-shed", Algorithm: FixedWindow, Limit: 1, Window: time.Second}},
		Checkers: []Checker{ruleChecker{}}}); err == nil {
		t.Error("a checker named like a policy was accepted")
	}
}

// brokenChecker fails every check, as a rule whose store read failed would.
type brokenChecker struct{}

func (brokenChecker) Name() string { return "broken" }
func (brokenChecker) Check(context.Context, string, time.Time, int64) (Decision, error) {
	return Decision{}, errors.New("store unavailable")
}

// A failing checker fails the request before any policy is charged, wherever it stands
// in the list.
func TestServiceCheckerErrorChargesNothing(t *testing.T) {
	s := newTestService(t, Config{
		Policies: []Policy{{Name: "api", Algorithm: FixedWindow, Limit: 1, Window: time.Minute}},
		Checkers: []Checker{brokenChecker{}},
	})
	ctx := context.Background()
	out := make([]Decision, 2)
	if _, err := s.Decide(ctx, t0, []Charge{{Policy: "api", Key: "k", Cost: 1}, {Policy: "broken", Key: "k", Cost: 1}}, out); err == nil {
		t.Fatal("a failing checker did not fail the request")
	}
	if d, _ := s.AllowN(ctx, "api", "k", t0, 1); !d.Allowed {
		t.Errorf("the failed request charged api: %+v", d)
	}
}

func TestServiceInputErrors(t *testing.T) {
	s := newTestService(t, Config{Policies: []Policy{{Name: "api", Algorithm: FixedWindow, Limit: 3, Window: time.Minute}}})
	ctx := context.Background()
	for _, c := range []struct {
		policy, key string
		cost        int64
		want        error
	}{
		{"nope", "k", 1, ErrUnknownPolicy},
		{"api", "", 1, ErrInvalidKey},
		{"api", "k", -2, ErrInvalidCost},
		{"api", "k", 4, ErrCostOverLimit},
	} {
		if _, err := s.AllowN(ctx, c.policy, c.key, t0, c.cost); !errors.Is(err, c.want) {
			t.Errorf("AllowN(%q, %q, %d) = %v, want %v", c.policy, c.key, c.cost, err, c.want)
		}
	}
	// Input errors charge nothing, even for the valid checks of the request.
	out := make([]Decision, 2)
	_, err := s.Decide(ctx, t0, []Charge{{Policy: "api", Key: "k", Cost: 3}, {Policy: "nope", Key: "k", Cost: 1}}, out)
	if !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("err = %v", err)
	}
	if d, _ := s.AllowN(ctx, "api", "k", t0, 3); !d.Allowed {
		t.Errorf("a failed request charged the valid policy")
	}
}

func TestServiceMemoryZeroAllocs(t *testing.T) {
	s := newTestService(t, Config{Policies: []Policy{{Name: "api", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 5}}})
	ctx := context.Background()
	now := t0
	s.AllowN(ctx, "api", "tenant-42", now, 1)
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		if _, err := s.AllowN(ctx, "api", "tenant-42", now, 1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Service.AllowN on a memory policy: %.1f allocs, want 0", allocs)
	}
}

func redisPolicy(name string, mode FailureMode) Policy {
	return Policy{Name: name, Algorithm: SlidingLog, Limit: 2, Window: time.Minute, Backend: BackendRedis,
		OnBackendError: mode, Timeout: 20 * time.Millisecond}
}

// The failure modes on a backend that errors or hangs; the real outage
// (redis-server stopped and restarted) is tested in limiter/redislimit.
func TestServiceFailureModes(t *testing.T) {
	fb := &fakeBackend{}
	reg := prometheus.NewRegistry()
	s := newTestService(t, Config{Redis: fb, Registerer: reg, Policies: []Policy{
		redisPolicy("open", FailOpen), redisPolicy("closed", FailClosed), redisPolicy("local", FailLocal),
		{Name: "mem", Algorithm: FixedWindow, Limit: 1, Window: time.Minute},
	}})
	ctx := context.Background()
	fb.setErr(errors.New("connection refused"))

	d, err := s.AllowN(ctx, "open", "k", t0, 1)
	if err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("open: %+v, %v; want allowed and degraded", d, err)
	}
	d, err = s.AllowN(ctx, "closed", "k", t0, 1)
	if !errors.Is(err, ErrBackendUnavailable) || d.Allowed {
		t.Errorf("closed: %+v, %v; want ErrBackendUnavailable and not allowed", d, err)
	}
	for i, want := range []bool{true, true, false} {
		d, err = s.AllowN(ctx, "local", "k", t0, 1)
		if err != nil || d.Allowed != want || !d.Degraded {
			t.Errorf("local request %d: %+v, %v; want allowed=%v from the in-process fallback", i, d, err, want)
		}
	}
	// A real denial outranks a closed policy's failure: 429, not 503.
	s.AllowN(ctx, "mem", "k", t0, 1)
	d, out := mustDecide(t, s, t0, 1, "k", "closed", "mem")
	if d.Allowed || d.Policy != "mem" || out[0].Allowed {
		t.Errorf("closed+denying memory policy: %+v %+v; want the memory denial", d, out)
	}

	// Hanging backend: the policy timeout bounds the wait.
	fb.setErr(nil)
	fb.hang.Store(true)
	start := time.Now()
	d, err = s.AllowN(ctx, "open", "k2", t0, 1)
	if el := time.Since(start); el > 20*time.Millisecond+200*time.Millisecond || err != nil || !d.Allowed {
		t.Errorf("hanging backend: %+v, %v after %s; want allowed within ~20ms", d, err, el)
	}
	fb.hang.Store(false)
	if d, err := s.AllowN(ctx, "open", "k3", t0, 1); err != nil || d.Degraded {
		t.Errorf("backend back: %+v, %v; want a normal decision", d, err)
	}

	if got := testutil.ToFloat64(s.metrics.errors.WithLabelValues("open", "timeout")); got != 1 {
		t.Errorf("backend timeouts of policy open = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.metrics.errors.WithLabelValues("local", "error")); got != 3 {
		t.Errorf("backend errors of policy local = %v, want 3", got)
	}
	if got := testutil.ToFloat64(s.metrics.decisions.WithLabelValues("closed", ResultError)); got != 2 {
		t.Errorf("error decisions of policy closed = %v, want 2", got)
	}
	// One latency observation per round trip, failed ones included.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var observed uint64
	for _, mf := range mfs {
		if mf.GetName() == MetricBackendSeconds {
			observed = mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	if want := uint64(fb.calls.Load()); observed != want || want == 0 {
		t.Errorf("%s sample count = %d, want %d (one per backend call)", MetricBackendSeconds, observed, want)
	}
}

// A key flooding at 10× its limit costs one round trip per allowed request
// plus one, not one per request; after RetryAfter it asks Redis again.
func TestDenyCache(t *testing.T) {
	fb := &fakeBackend{}
	s := newTestService(t, Config{Redis: fb, Policies: []Policy{
		{Name: "hot", Algorithm: SlidingLog, Limit: 100, Window: time.Minute, Backend: BackendRedis},
	}})
	ctx := context.Background()
	denied := 0
	for i := 0; i < 1000; i++ {
		d, err := s.AllowN(ctx, "hot", "flood", t0.Add(time.Duration(i)*time.Millisecond), 1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			denied++
			if want := time.Minute - time.Duration(i)*time.Millisecond; d.RetryAfter != want {
				t.Fatalf("request %d: cached RetryAfter %s, want %s", i, d.RetryAfter, want)
			}
		}
	}
	if calls := fb.calls.Load(); denied != 900 || calls != 101 {
		t.Fatalf("denied %d, backend calls %d; want 900 and 101", denied, calls)
	}
	if hits := testutil.ToFloat64(s.metrics.cacheHits.WithLabelValues("hot")); hits != 899 {
		t.Errorf("deny cache hits = %v, want 899", hits)
	}
	if got := testutil.ToFloat64(s.metrics.decisions.WithLabelValues("hot", ResultDenied)); got != 900 {
		t.Errorf("denied decisions = %v, want 900 (cached denials count too)", got)
	}
	// At RetryAfter the cache lets the request through to the backend.
	if d, _ := s.AllowN(ctx, "hot", "flood", t0.Add(time.Minute), 1); !d.Allowed || fb.calls.Load() != 102 {
		t.Errorf("at +60s: %+v after %d calls; want allowed by the backend", d, fb.calls.Load())
	}
}

func TestServiceMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestService(t, Config{Registerer: reg, Policies: []Policy{
		{Name: "login", Algorithm: SlidingLog, Limit: 1, Window: time.Minute},
	}})
	s.Allow(context.Background(), "login", "u1")
	s.Allow(context.Background(), "login", "u1")
	want := `
# HELP slide_limiter_decisions_total Admission decisions by policy and result (allowed, denied, shadow_denied; error when the backend failed and the failure mode decided).
# TYPE slide_limiter_decisions_total counter
slide_limiter_decisions_total{policy="login",result="allowed"} 1
slide_limiter_decisions_total{policy="login",result="denied"} 1
slide_limiter_decisions_total{policy="login",result="error"} 0
slide_limiter_decisions_total{policy="login",result="shadow_denied"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricDecisions); err != nil {
		t.Error(err)
	}
	if _, err := NewService(Config{Registerer: reg, Policies: []Policy{{Name: "x", Algorithm: FixedWindow, Limit: 1, Window: time.Second}}}); err == nil {
		t.Error("registering the metrics twice on one registry succeeded")
	}
}

// A caller that gives up (client gone) is not a backend failure: no failure
// mode, no error metric, the context's error.
func TestServiceCallerCancelIsNotABackendError(t *testing.T) {
	fb := &fakeBackend{}
	fb.hang.Store(true)
	s := newTestService(t, Config{Redis: fb, Policies: []Policy{redisPolicy("open", FailOpen)}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := s.AllowN(ctx, "open", "k", t0, 1)
	if !errors.Is(err, context.Canceled) || d.Allowed {
		t.Fatalf("cancelled caller: %+v, %v; want context.Canceled", d, err)
	}
	if got := testutil.ToFloat64(s.metrics.errors.WithLabelValues("open", "timeout")) +
		testutil.ToFloat64(s.metrics.errors.WithLabelValues("open", "error")); got != 0 {
		t.Errorf("backend errors = %v, want 0", got)
	}
}

// A full memory store fails a new key by the policy's mode, and its keys, bytes, evictions
// and refusals are exported.
func TestServiceStoreFullFollowsFailureMode(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := NewService(Config{Policies: []Policy{
		{Name: "open", Algorithm: FixedWindow, Limit: 5, Window: time.Minute},
		{Name: "closed", Algorithm: FixedWindow, Limit: 5, Window: time.Minute, OnBackendError: FailClosed},
	}, Memory: MemoryConfig{Shards: 1, MaxKeys: 1}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Unix(1_764_489_600, 0)
	for _, p := range []string{"open", "closed"} {
		if d, err := s.AllowN(ctx, p, "first", now, 1); err != nil || !d.Allowed {
			t.Fatalf("%s: first key %+v %v", p, d, err)
		}
	}
	if d, err := s.AllowN(ctx, "open", "second", now, 1); err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("open, store full: %+v %v; want an untracked admission marked degraded", d, err)
	}
	if _, err := s.AllowN(ctx, "closed", "second", now, 1); !errors.Is(err, ErrBackendUnavailable) || !errors.Is(err, ErrStoreFull) {
		t.Errorf("closed, store full: %v; want ErrBackendUnavailable (ErrStoreFull)", err)
	}
	want := `
# HELP slide_limiter_keys Keys held by the in-process limiter store, by policy (see --limiter-max-bytes).
# TYPE slide_limiter_keys gauge
slide_limiter_keys{policy="closed"} 1
slide_limiter_keys{policy="open"} 1
# HELP slide_limiter_store_full_total Requests refused because the in-process store held only live state (decided by on_backend_error: open admits untracked, closed answers 503), by policy.
# TYPE slide_limiter_store_full_total counter
slide_limiter_store_full_total{policy="closed"} 1
slide_limiter_store_full_total{policy="open"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "slide_limiter_keys", "slide_limiter_store_full_total"); err != nil {
		t.Error(err)
	}
}

// A calendar-day Redis policy's cached denial (the deny cache answers the second 429)
// reports the day's own length as its Window, as Redis's first denial does: not the
// calendar's longest span (25 h), which made RateLimit-Policy's w flip from 86400 to 90000
// between two 429s of the same day.
func TestDenyCacheCalendarWindow(t *testing.T) {
	fb := &fakeBackend{}
	s := newTestService(t, Config{Redis: fb, Policies: []Policy{
		{Name: "daily", Algorithm: FixedWindow, Limit: 1, Calendar: CalendarDay, Backend: BackendRedis},
		{Name: "monthly", Algorithm: FixedWindow, Limit: 1, Calendar: CalendarMonth, Backend: BackendRedis},
	}})
	ctx := context.Background()
	now := time.Date(2027, 2, 10, 12, 0, 0, 0, time.UTC)
	for name, want := range map[string]time.Duration{"daily": 24 * time.Hour, "monthly": 28 * 24 * time.Hour} {
		for i := range 3 {
			d, err := s.AllowN(ctx, name, "t1", now.Add(time.Duration(i)*time.Second), 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Window != want {
				t.Errorf("%s request %d (allowed %v): Window %s, want %s", name, i, d.Allowed, d.Window, want)
			}
		}
	}
	if hits := testutil.ToFloat64(s.metrics.cacheHits.WithLabelValues("daily")); hits != 1 {
		t.Errorf("deny cache hits = %v, want 1 (the third request)", hits)
	}
}
