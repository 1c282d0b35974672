package limiter_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// The article's token bucket: capacity 10, refilled at 5 per second.
func ExampleMemory_AllowN() {
	m, err := limiter.NewMemory(limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket,
		Capacity: 10, RefillPerSecond: 5}, limiter.MemoryConfig{})
	if err != nil {
		panic(err)
	}
	ctx, t0 := context.Background(), time.Unix(0, 0)
	allowed, last := 0, limiter.Decision{}
	for i := 0; i < 12; i++ {
		last, _ = m.AllowN(ctx, "tenant-42", t0, 1)
		if last.Allowed {
			allowed++
		}
	}
	fmt.Printf("t=0 burst of 12: %d allowed, retryAfterMs = %d\n", allowed, last.RetryAfter.Milliseconds())
	var at1 []string
	for i := 0; i < 6; i++ {
		d, _ := m.AllowN(ctx, "tenant-42", t0.Add(time.Second), 1)
		at1 = append(at1, fmt.Sprint(d.Allowed))
	}
	fmt.Println("t=1s:", strings.Join(at1, ","))
	// Output:
	// t=0 burst of 12: 10 allowed, retryAfterMs = 200
	// t=1s: true,true,true,true,true,false
}

func ExampleService_AllowHandler() {
	policies, err := limiter.ParsePolicies([]byte(`
policies:
  - name: login
    algorithm: sliding_log
    limit: 3
    window: 60s
`), "policies.yaml")
	if err != nil {
		panic(err)
	}
	now := time.Unix(1_764_489_600, 0)
	s, err := limiter.NewService(limiter.Config{Policies: policies, Clock: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	h := s.AllowHandler()
	for i := 0; i < 4; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/allow", strings.NewReader(`{"policy":"login","key":"u42"}`)))
		fmt.Print(w.Code, " ", w.Body.String())
		if w.Code == http.StatusTooManyRequests {
			fmt.Println(limiter.HeaderRetryAfter+":", w.Header().Get(limiter.HeaderRetryAfter))
			fmt.Println(limiter.HeaderRateLimitPolicy+":", w.Header().Get(limiter.HeaderRateLimitPolicy))
			fmt.Println(limiter.HeaderRateLimit+":", w.Header().Get(limiter.HeaderRateLimit))
		}
		now = now.Add(time.Second)
	}
	// Output:
	// 200 {"allowed":true,"policy":"login","limit":3,"remaining":2,"retry_after_ms":0,"reset_after_ms":60000}
	// 200 {"allowed":true,"policy":"login","limit":3,"remaining":1,"retry_after_ms":0,"reset_after_ms":60000}
	// 200 {"allowed":true,"policy":"login","limit":3,"remaining":0,"retry_after_ms":0,"reset_after_ms":60000}
	// 429 {"allowed":false,"policy":"login","limit":3,"remaining":0,"retry_after_ms":57000,"reset_after_ms":59000}
	// Retry-After: 57
	// RateLimit-Policy: "login";q=3;w=60
	// RateLimit: "login";r=0;t=59
}

func ExampleNewMiddleware() {
	s, err := limiter.NewService(limiter.Config{Policies: []limiter.Policy{
		{Name: "per-key", Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute},
	}})
	if err != nil {
		panic(err)
	}
	mw, err := limiter.NewMiddleware(s, limiter.WithPolicies("per-key"),
		limiter.WithKeyFunc(limiter.KeyByHeader("X-API-Key")))
	if err != nil {
		panic(err)
	}
	app := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	for i := 0; i < 2; i++ {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "k1")
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get(limiter.HeaderXRateLimitRemaining))
	}
	// Output:
	// 200 0
	// 429 0
}
