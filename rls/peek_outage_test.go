package rls_test

import (
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// peek is a request of one descriptor with hits_addend 0: it checks without charging.
func peek(domain string, kv ...string) *pb.RateLimitRequest {
	r := req(domain, 0, kv)
	r.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	return r
}

// TestLocalFallbackPeekReportsLocalCount: while Redis is down (a real redis-server
// stopped), a peek (hits_addend 0) of a descriptor whose on_backend_error is local
// reports the in-memory count as any local decision does (current_limit,
// limit_remaining, RateLimit headers), as envoyproxy/ratelimit answers a peek with its
// counter (INCRBY 0) and slide answers it with Redis up. A fresh key's peek was taken
// for an admission nothing counted (remaining equal to the limit) and got no quota at
// all, like a fail-open descriptor; an open descriptor's peek still claims none.
func TestLocalFallbackPeekReportsLocalCount(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := rls.Parse([]byte(`domain: f
descriptors:
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 5, on_backend_error: open, timeout: 1s}
  - key: local
    rate_limit: {unit: minute, requests_per_unit: 2, on_backend_error: local, timeout: 1s}
`), "failure.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if err != nil {
		t.Fatal(err)
	}
	names := rls.DefaultLimitHeaderNames
	h := start(t, setup{cfg: cfg, redis: redisBackend(t, srv.Addr), limitHdr: &names, realClock: true})
	minute := pb.RateLimitResponse_RateLimit_MINUTE

	checkPeek := func(what string, resp *pb.RateLimitResponse, remaining uint32, rateLimit string) {
		t.Helper()
		checkStatus(t, what, resp.GetStatuses()[0], want{ok, 2, minute, remaining})
		if got := header(resp, "ratelimit"); !strings.HasPrefix(got, rateLimit) {
			t.Errorf("%s: RateLimit %q, want %q…", what, got, rateLimit)
		}
		if got, want := header(resp, names.Remaining), string(rune('0'+remaining)); got != want {
			t.Errorf("%s: %s %q, want %q", what, names.Remaining, got, want)
		}
	}
	checkPeek("peek with Redis up", h.call(t, peek("f", "local", "up")), 2, `"rls.f.local";r=2;t=`)

	srv.Stop()
	checkPeek("peek of a fresh key, Redis down", h.call(t, peek("f", "local", "y")), 2, `"rls.f.local";r=2;t=`)
	checkStatus(t, "a request, Redis down", h.call(t, req("f", 0, desc("local", "y"))).GetStatuses()[0], want{ok, 2, minute, 1})
	checkPeek("peek after one, Redis down", h.call(t, peek("f", "local", "y")), 1, `"rls.f.local";r=1;t=`)

	resp := h.call(t, peek("f", "open", "y"))
	if st := resp.GetStatuses()[0]; st.GetCode() != ok || st.GetCurrentLimit() != nil || len(resp.GetResponseHeadersToAdd()) != 0 {
		t.Errorf("open peek, Redis down: %v, want OK claiming no quota", resp)
	}
}
