package redislimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

func newService(t testing.TB, b limiter.Backend, cfg limiter.Config) *limiter.Service {
	t.Helper()
	cfg.Redis = b
	s, err := limiter.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newBackend(t testing.TB, addr string, cfg redislimit.Config) *redislimit.Backend {
	t.Helper()
	b, err := redislimit.New(newClient(t, addr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Failure modes against a real outage: redis-server is stopped mid-test and
// started again on the same port. Every decision returns within the policy
// timeout and follows on_backend_error; decisions recover when Redis returns.
func TestOutageFollowsPolicyAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	b := newBackend(t, srv.Addr, redislimit.Config{})
	pol := func(name string, mode limiter.FailureMode) limiter.Policy {
		return limiter.Policy{Name: name, Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute,
			Backend: limiter.BackendRedis, OnBackendError: mode, Timeout: 50 * time.Millisecond}
	}
	s := newService(t, b, limiter.Config{Policies: []limiter.Policy{
		pol("open", limiter.FailOpen), pol("closed", limiter.FailClosed), pol("local", limiter.FailLocal),
	}})
	ctx := context.Background()
	const bound = 50*time.Millisecond + 150*time.Millisecond // timeout + scheduling slack under -race

	for _, p := range []string{"open", "closed", "local"} {
		if d, err := s.Allow(ctx, p, "u1"); err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("%s with Redis up: %+v, %v", p, d, err)
		}
	}

	check := func(phase string) {
		t.Helper()
		for _, c := range []struct {
			policy string
			want   func(limiter.Decision, error) bool
			what   string
		}{
			{"open", func(d limiter.Decision, err error) bool { return err == nil && d.Allowed && d.Degraded }, "allowed, degraded"},
			{"closed", func(d limiter.Decision, err error) bool {
				return errors.Is(err, limiter.ErrBackendUnavailable) && !d.Allowed
			}, "ErrBackendUnavailable"},
		} {
			start := time.Now()
			d, err := s.Allow(ctx, c.policy, "u1")
			if el := time.Since(start); el > bound {
				t.Errorf("%s, %s: decision took %s, want ≤ %s", phase, c.policy, el, bound)
			}
			if !c.want(d, err) {
				t.Errorf("%s, %s: %+v, %v; want %s", phase, c.policy, d, err, c.what)
			}
		}
	}

	// Down.
	srv.Stop()
	check("redis down")
	// local: the in-process fallback enforces limit 3 on its own.
	var got []bool
	for i := 0; i < 4; i++ {
		start := time.Now()
		d, err := s.Allow(ctx, "local", "u9")
		if el := time.Since(start); err != nil || !d.Degraded || el > bound {
			t.Fatalf("local, redis down: %+v, %v after %s", d, err, el)
		}
		got = append(got, d.Allowed)
	}
	if want := []bool{true, true, true, false}; !equalBools(got, want) {
		t.Errorf("local fallback decisions %v, want %v", got, want)
	}

	// Slow: the server is up but does not answer (CLIENT PAUSE); the 50 ms
	// timeout bounds each decision.
	srv.Start()
	waitRecovered(t, s)
	admin := newClient(t, srv.Addr)
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "400", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	check("redis paused")
	waitRecovered(t, s)

	// Down again and back: recovery is automatic.
	srv.Stop()
	check("redis down again")
	srv.Start()
	waitRecovered(t, s)
	for _, p := range []string{"open", "closed", "local"} {
		if d, err := s.Allow(ctx, p, "u2"); err != nil || !d.Allowed || d.Degraded {
			t.Errorf("%s after recovery: %+v, %v", p, d, err)
		}
	}
}

// waitRecovered polls (bounded) until the closed policy decides normally: the
// first calls after a restart may meet a dead pooled connection.
func waitRecovered(t *testing.T, s *limiter.Service) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		d, err := s.Allow(context.Background(), "closed", "probe")
		if err == nil && !d.Degraded {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery within 3s after Redis returned: %+v, %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The scale-out proof: 10 pods (separate clients and services), concurrent,
// send 1,000 requests for one key against 100 per minute. Through Redis
// exactly 100 are admitted; with per-pod memory limiters, 10× as many.
func TestScaleOut(t *testing.T) {
	srv := redistest.Start(t)
	scaleOut(t, func() limiter.Backend {
		return newBackend(t, srv.Addr, redislimit.Config{}) // own client: own connection pool
	}, true)
}

// scaleOut runs the 10-pod proof with backends from newPod (one per pod); withMemory
// also checks the per-pod memory limiters' multiplication.
func scaleOut(t *testing.T, newPod func() limiter.Backend, withMemory bool) {
	t.Helper()
	const pods, perPod = 10, 100
	run := func(policy limiter.Policy) (allowed int64, took time.Duration) {
		svcs := make([]*limiter.Service, pods)
		for i := range svcs {
			var b limiter.Backend
			if policy.Backend == limiter.BackendRedis {
				b = newPod()
			}
			svcs[i] = newService(t, b, limiter.Config{Policies: []limiter.Policy{policy}})
		}
		var n atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for _, s := range svcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perPod; i++ {
					d, err := s.Allow(context.Background(), policy.Name, "tenant-42")
					if err != nil {
						t.Error(err)
						return
					}
					if d.Degraded {
						t.Errorf("%s: degraded decision: %+v", policy.Name, d)
						return
					}
					if d.Allowed {
						n.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return n.Load(), time.Since(start)
	}
	// Fresh state per run: a name no earlier run of the same backend used.
	suffix := fmt.Sprintf("-%d", time.Now().UnixNano())
	redisLog := limiter.Policy{Name: "log" + suffix, Algorithm: limiter.SlidingLog, Limit: 100, Window: time.Minute,
		Backend: limiter.BackendRedis, OnBackendError: limiter.FailClosed, Timeout: time.Second}
	redisTB := limiter.Policy{Name: "bucket" + suffix, Algorithm: limiter.TokenBucket, Capacity: 100, RefillPerSecond: 100.0 / 60,
		Backend: limiter.BackendRedis, OnBackendError: limiter.FailClosed, Timeout: time.Second}
	memLog := limiter.Policy{Name: "log", Algorithm: limiter.SlidingLog, Limit: 100, Window: time.Minute}

	logAllowed, _ := run(redisLog)
	tbAllowed, tbTook := run(redisTB)
	if logAllowed != 100 {
		t.Errorf("redis sliding_log admitted %d, want exactly 100", logAllowed)
	}
	// The bucket refills 1.67 tokens/s, so exactly 100 needs the run to stay
	// under 0.6 s (it takes a few tens of ms).
	if tbAllowed != 100 {
		t.Errorf("redis token_bucket admitted %d in %s, want exactly 100", tbAllowed, tbTook)
	}
	if !withMemory {
		t.Logf("10 pods × 100 requests, limit 100/min: redis sliding_log %d, redis token_bucket %d", logAllowed, tbAllowed)
		return
	}
	memAllowed, _ := run(memLog)
	t.Logf("10 pods × 100 requests, limit 100/min: redis sliding_log %d, redis token_bucket %d, per-pod memory %d (%.0f×)",
		logAllowed, tbAllowed, memAllowed, float64(memAllowed)/100)
	if memAllowed < 9*100 {
		t.Errorf("per-pod memory admitted %d, want about 10× the limit (the silent multiplication)", memAllowed)
	}
}

// A hot key flooding at 10× its limit: with the deny cache, Redis calls per
// denied request drop by far more than 10×.
func TestHotKeyDenyCache(t *testing.T) {
	srv := redistest.Start(t)
	flood := func(cache bool) (calls, denied int64) {
		var n atomic.Int64
		b := newBackend(t, srv.Addr, redislimit.Config{OnScriptCall: func(string) { n.Add(1) }})
		name := "hot-nocache"
		if cache {
			name = "hot-cache"
		}
		s := newService(t, b, limiter.Config{
			Policies: []limiter.Policy{{Name: name, Algorithm: limiter.SlidingLog, Limit: 100, Window: time.Minute,
				Backend: limiter.BackendRedis, Timeout: time.Second}},
			DenyCache: limiter.DenyCacheConfig{Disabled: !cache},
		})
		b.Load(context.Background())
		n.Store(0)
		start := time.Now()
		for i := 0; i < 1000; i++ {
			d, err := s.Allow(context.Background(), name, "flooder")
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				denied++
				// The log's oldest entry is the flood's first request: the wait is the
				// window less the time the flood has taken (seconds on a loaded machine).
				if want := time.Minute - time.Since(start) - time.Second; d.RetryAfter <= want {
					t.Fatalf("denial with RetryAfter %s, want ≈60s less the %s the flood took", d.RetryAfter, time.Since(start))
				}
			}
		}
		return n.Load(), denied
	}
	withoutCalls, withoutDenied := flood(false)
	withCalls, withDenied := flood(true)
	if withoutDenied != 900 || withDenied != 900 {
		t.Fatalf("denied %d without cache, %d with; want 900 each", withoutDenied, withDenied)
	}
	// Calls for denied requests: total calls minus the 100 admitted ones.
	per := func(calls int64) float64 { return float64(calls-100) / 900 }
	ratio := per(withoutCalls) / per(withCalls)
	t.Logf("Redis calls per denied request: %.4f without deny cache, %.4f with (%.0f× fewer); script calls %d vs %d",
		per(withoutCalls), per(withCalls), ratio, withoutCalls, withCalls)
	if withoutCalls != 1000 || withCalls != 101 {
		t.Errorf("script calls %d without cache, %d with; want 1000 and 101", withoutCalls, withCalls)
	}
	if ratio < 10 {
		t.Errorf("deny cache cut calls per denied request by %.1f×, want ≥ 10×", ratio)
	}
}

// Several Redis policies in one request cost one round trip; a memory
// policy in the same request costs none.
func TestServiceMultiPolicyOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	var calls callCounter
	c.AddHook(&calls)
	b, _ := redislimit.New(c, redislimit.Config{})
	b.Load(context.Background())
	s := newService(t, b, limiter.Config{Policies: []limiter.Policy{
		{Name: "per-user", Algorithm: limiter.SlidingLog, Limit: 2, Window: time.Minute, Backend: limiter.BackendRedis},
		{Name: "per-tenant", Algorithm: limiter.SlidingCounter, Limit: 10, Window: time.Minute, Backend: limiter.BackendRedis},
		{Name: "local", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 1},
	}})
	h := limithttp.AllowHandler(s)
	var codes []int
	for i := 0; i < 3; i++ {
		calls = callCounter{}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/allow",
			strings.NewReader(`{"policies":["per-user","per-tenant","local"],"key":"u42"}`)))
		codes = append(codes, w.Code)
		if i < 2 && (calls.roundTrips.Load() != 1 || calls.evalsha.Load() != 2) {
			t.Errorf("request %d: %d round trips, %d evalsha; want 1 and 2", i, calls.roundTrips.Load(), calls.evalsha.Load())
		}
		if i == 2 {
			var r limithttp.AllowResponse
			json.Unmarshal(w.Body.Bytes(), &r)
			if r.Policy != "per-user" || len(r.Decisions) != 3 || r.RetryAfterMs <= 59000 || r.RetryAfterMs > 60000 {
				t.Errorf("denied body %s", w.Body)
			}
			if ra := w.Header().Get(limithttp.HeaderRetryAfter); ra != "60" {
				t.Errorf("Retry-After = %q, want 60", ra)
			}
		}
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != http.StatusTooManyRequests {
		t.Errorf("codes %v, want 200 200 429", codes)
	}
}
