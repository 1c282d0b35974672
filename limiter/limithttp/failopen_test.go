package limithttp

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// TestFailOpenClaimsNoQuota: while Redis is down, a policy whose
// on_backend_error is open admits uncounted, so /v1/allow claims no quota
// for it, as rls does for such a descriptor: no RateLimit or RateLimit-Policy
// entry, no X-RateLimit-* from it, and "remaining":0 beside "degraded":true.
// It claimed the full quota (r=5, X-RateLimit-Remaining: 5), which tells a
// client that paces itself by the headers to spend it all while nothing counts.
// Beside a policy that did count, the headers are that policy's alone.
func TestFailOpenClaimsNoQuota(t *testing.T) {
	open := redisPolicy("api", limiter.FailOpen)
	open.Limit = 5
	s := newTestService(t, limiter.Config{Redis: downBackend{}, Policies: []limiter.Policy{
		open,
		{Name: "local", Algorithm: limiter.SlidingLog, Limit: 100, Window: time.Minute},
		redisPolicy("fallback", limiter.FailLocal),
	}})
	h := AllowHandler(s)
	rateHeaders := []string{HeaderRateLimit, HeaderRateLimitPolicy, HeaderXRateLimitLimit, HeaderXRateLimitRemaining, HeaderXRateLimitReset, HeaderRetryAfter}

	w := post(h, `{"policy":"api","key":"u1"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("open during the outage: status %d %s, want 200", w.Code, w.Body)
	}
	for _, k := range rateHeaders {
		if v, ok := w.Header()[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("open during the outage: %s: %q, want no such header", k, v)
		}
	}
	if got, want := w.Body.String(), `{"allowed":true,"policy":"api","limit":5,"remaining":0,"retry_after_ms":0,"reset_after_ms":0,"degraded":true}`+"\n"; got != want {
		t.Errorf("open during the outage: body\n got  %s want %s", got, want)
	}

	w = post(h, `{"policies":["api","local"],"key":"u1"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("open beside local: status %d %s, want 200", w.Code, w.Body)
	}
	for _, c := range []struct{ name, want string }{
		{HeaderRateLimitPolicy, `"local";q=100;w=60`},
		{HeaderRateLimit, `"local";r=99;t=60`},
		{HeaderXRateLimitLimit, "100"},
		{HeaderXRateLimitRemaining, "99"},
		{HeaderXRateLimitReset, "1764489660"},
	} {
		if got := w.Header().Get(c.name); got != c.want {
			t.Errorf("open beside local: %s %q, want %q", c.name, got, c.want)
		}
	}
	if body := w.Body.String(); !strings.Contains(body, `"decisions":[{"allowed":true,"policy":"api","limit":5,"remaining":0,`) {
		t.Errorf("open beside local: body %s, want the api decision with remaining 0", body)
	}

	// A local fallback counted the request in memory: its numbers stay.
	w = post(h, `{"policy":"fallback","key":"u1"}`)
	if got, want := w.Header().Get(HeaderRateLimit), `"fallback";r=1;t=60`; got != want {
		t.Errorf("local fallback: RateLimit %q, want %q", got, want)
	}
	if !strings.Contains(w.Body.String(), `"remaining":1,`) {
		t.Errorf("local fallback: body %s, want remaining 1", w.Body)
	}
}
