package limithttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

func TestMiddleware(t *testing.T) {
	s := newTestService(t, limiter.Config{Policies: []limiter.Policy{
		{Name: "api", Algorithm: limiter.FixedWindow, Limit: 2, Window: time.Minute},
	}})
	mw, err := NewMiddleware(s, WithPolicies("api"), WithKeyFunc(KeyByHeader("X-API-Key")))
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		w.WriteHeader(http.StatusNoContent)
	}))
	do := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/things", nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i := 0; i < 2; i++ {
		if w := do("k1"); w.Code != 204 || w.Header().Get(HeaderRateLimit) != `"api";r=`+string(rune('1'-i))+`;t=60` {
			t.Fatalf("request %d: %d %v", i, w.Code, w.Header())
		}
	}
	w := do("k1")
	if w.Code != 429 || served != 2 || w.Header().Get(HeaderRetryAfter) != "60" {
		t.Fatalf("3rd: %d served=%d headers %v", w.Code, served, w.Header())
	}
	var r AllowResponse
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.Allowed || r.Policy != "api" || r.RetryAfterMs != 60000 {
		t.Errorf("429 body %s", w.Body)
	}
	if w := do(""); w.Code != 400 || served != 2 {
		t.Errorf("missing key: %d %s", w.Code, w.Body)
	}
	if w := do("k2"); w.Code != 204 {
		t.Errorf("other key: %d", w.Code)
	}

	if _, err := NewMiddleware(s); err == nil {
		t.Error("NewMiddleware without policies succeeded")
	}
	if _, err := NewMiddleware(s, WithPolicies("nope")); err == nil {
		t.Error("NewMiddleware with an unknown policy succeeded")
	}
	called := false
	mw2, _ := NewMiddleware(s, WithPolicies("api"), WithKeyFunc(KeyByHeader("X-API-Key")),
		WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) { called = true; w.WriteHeader(401) }))
	w = httptest.NewRecorder()
	mw2.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if !called || w.Code != 401 {
		t.Errorf("custom error handler: called=%v status %d", called, w.Code)
	}
}

// With a leaky bucket that shapes, the middleware holds the request for
// Decision.Delay before serving it (fake time: testing/synctest).
func TestMiddlewareShapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := limiter.NewService(limiter.Config{Policies: []limiter.Policy{
			{Name: "smooth", Algorithm: limiter.LeakyBucket, Capacity: 1, LeakPerSecond: 10, MaxDelay: 250 * time.Millisecond},
		}})
		if err != nil {
			t.Fatal(err)
		}
		mw, _ := NewMiddleware(s, WithPolicies("smooth"))
		var servedAt []time.Duration
		start := time.Now()
		h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			servedAt = append(servedAt, time.Since(start))
		}))
		codes := []int{}
		for i := 0; i < 4; i++ {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil)) // serial: each waits its delay
			codes = append(codes, w.Code)
		}
		// 0 ms, then one per 100 ms: shaped to the leak rate, never denied.
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
		for i := range want {
			if codes[i] != 200 || i >= len(servedAt) || servedAt[i] != want[i] {
				t.Fatalf("codes %v served at %v, want all 200 at %v", codes, servedAt, want)
			}
		}
	})
}
