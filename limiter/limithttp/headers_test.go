package limithttp

import (
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// Draft-10 of the IETF ratelimit headers defines RateLimit's t as the seconds until
// additional quota is made available, and a Retry-After never earlier than t. A denied
// token bucket (capacity 10 at 5/s, empty) has its next token in 200 ms: t=1, as
// Retry-After; t=2 (the time to a full bucket) told the client to wait twice as long and
// broke the draft's Retry-After ≥ t. A sliding log denied 2 s after its oldest entry: t is
// that entry's expiry (58), not the last one's (60). An admission keeps the time to full.
func TestRateLimitResetOnDenial(t *testing.T) {
	clk := &testClock{now: t0}
	s := newTestService(t, limiter.Config{Clock: clk.Now, Policies: []limiter.Policy{
		{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 5},
		{Name: "login", Algorithm: limiter.SlidingLog, Limit: 2, Window: time.Minute},
	}})
	h := AllowHandler(s)
	deny := func(policy, retryAfter, rateLimit string) {
		t.Helper()
		w := post(h, `{"policy":"`+policy+`","key":"k"}`)
		if w.Code != 429 || w.Header().Get(HeaderRetryAfter) != retryAfter || w.Header().Get(HeaderRateLimit) != rateLimit {
			t.Errorf("%s: status %d, Retry-After %q, RateLimit %q; want 429, %q, %q", policy, w.Code,
				w.Header().Get(HeaderRetryAfter), w.Header().Get(HeaderRateLimit), retryAfter, rateLimit)
		}
	}
	for range 10 {
		post(h, `{"policy":"api","key":"k"}`)
	}
	deny("api", "1", `"api";r=0;t=1`)
	post(h, `{"policy":"login","key":"k"}`)
	clk.Add(2 * time.Second)
	w := post(h, `{"policy":"login","key":"k"}`)
	if got, want := w.Header().Get(HeaderRateLimit), `"login";r=0;t=60`; got != want {
		t.Errorf("admitted: RateLimit %q, want %q", got, want)
	}
	deny("login", "58", `"login";r=0;t=58`)
	// The values come from the decision alone (rls formats the same bytes).
	d := limiter.Decision{Policy: "p", Limit: 5, RetryAfter: 1500 * time.Millisecond, ResetAfter: 9 * time.Second}
	if got := string(AppendRateLimitValue(nil, []limiter.Decision{d})); got != `"p";r=0;t=2` {
		t.Errorf("AppendRateLimitValue = %s", got)
	}
}
