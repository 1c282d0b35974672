package limithttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
)

func ExampleAllowHandler() {
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
	h := limithttp.AllowHandler(s)
	for i := 0; i < 4; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/allow", strings.NewReader(`{"policy":"login","key":"u42"}`)))
		fmt.Print(w.Code, " ", w.Body.String())
		if w.Code == http.StatusTooManyRequests {
			fmt.Println(limithttp.HeaderRetryAfter+":", w.Header().Get(limithttp.HeaderRetryAfter))
			fmt.Println(limithttp.HeaderRateLimitPolicy+":", w.Header().Get(limithttp.HeaderRateLimitPolicy))
			fmt.Println(limithttp.HeaderRateLimit+":", w.Header().Get(limithttp.HeaderRateLimit))
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
	// RateLimit: "login";r=0;t=57
}

func ExampleNewMiddleware() {
	s, err := limiter.NewService(limiter.Config{Policies: []limiter.Policy{
		{Name: "per-key", Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute},
	}})
	if err != nil {
		panic(err)
	}
	mw, err := limithttp.NewMiddleware(s, limithttp.WithPolicies("per-key"),
		limithttp.WithKeyFunc(limithttp.KeyByHeader("X-API-Key")))
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
		fmt.Println(w.Code, w.Header().Get(limithttp.HeaderXRateLimitRemaining))
	}
	// Output:
	// 200 0
	// 429 0
}
