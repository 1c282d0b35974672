package redislimit_test

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// TestAllowFailOpenBesideCountedAgrees: a POST /v1/allow of two policies while Redis is
// down (a real redis-server stopped), one on Redis failing open (limit 5, admitted
// uncounted) and one in memory (limit 100, counted): the top-level JSON and the
// X-RateLimit-* headers describe the same decision, the counted one. The fail-open
// policy's full quota (5) ranked as the least remaining and decided the request, so the
// JSON said policy "api", limit 5, remaining 0 while the headers said 100 and 99.
func TestAllowFailOpenBesideCountedAgrees(t *testing.T) {
	srv := redistest.Start(t)
	s := newService(t, newBackend(t, srv.Addr, redislimit.Config{}), limiter.Config{Policies: []limiter.Policy{
		{Name: "api", Algorithm: limiter.SlidingLog, Limit: 5, Window: time.Minute, Backend: limiter.BackendRedis,
			OnBackendError: limiter.FailOpen, Timeout: time.Second},
		{Name: "mem", Algorithm: limiter.SlidingLog, Limit: 100, Window: time.Minute},
	}})
	srv.Stop()
	h := limithttp.AllowHandler(s)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/allow", strings.NewReader(`{"policies":["api","mem"],"key":"u1"}`)))
	var r limithttp.AllowResponse
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || w.Code != 200 || len(r.Decisions) != 2 {
		t.Fatalf("status %d, body %s (%v)", w.Code, w.Body, err)
	}
	if xl, xr := w.Header().Get(limithttp.HeaderXRateLimitLimit), w.Header().Get(limithttp.HeaderXRateLimitRemaining); r.Policy != "mem" ||
		strconv.FormatInt(r.Limit, 10) != xl || strconv.FormatInt(r.Remaining, 10) != xr || r.Remaining != 99 {
		t.Errorf("JSON policy %q limit %d remaining %d, X-RateLimit-Limit %s, -Remaining %s; want mem, 100, 99 in both\n%s",
			r.Policy, r.Limit, r.Remaining, xl, xr, w.Body)
	}
	if api := r.Decisions[0]; api.Policy != "api" || !api.Degraded || api.Remaining != 0 {
		t.Errorf("the fail-open policy's own decision %+v, want degraded with remaining 0", api)
	}
	if r.DecisionJSON != r.Decisions[1] {
		t.Errorf("top level %+v, want the mem decision %+v", r.DecisionJSON, r.Decisions[1])
	}
}
