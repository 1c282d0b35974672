package rls_test

import (
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// TestFailOpenClaimsNoQuota: while Redis is down, a descriptor whose
// on_backend_error is open is admitted uncounted, and its status claims no
// quota (no current_limit, so neither Envoy's x-ratelimit headers nor
// LimitHeaders use it, no limit_remaining, no RateLimit entry), as
// envoyproxy/ratelimit claims none when Redis fails (the call fails; Envoy
// lets the request through without headers). It claimed the full quota, which
// invites a client that paces itself by the headers to spend it all at once.
// A local fallback counts, so its numbers stay.
func TestFailOpenClaimsNoQuota(t *testing.T) {
	down := downAddr(t)
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
	h := start(t, setup{cfg: cfg, redis: redisBackend(t, down), limitHdr: &names})

	resp := h.call(t, req("f", 0, desc("open", "x")))
	st := resp.GetStatuses()[0]
	if resp.GetOverallCode() != ok || st.GetCode() != ok {
		t.Fatalf("open during the outage: %v, want OK", resp)
	}
	if st.GetCurrentLimit() != nil || st.GetLimitRemaining() != 0 || st.GetDurationUntilReset() != nil {
		t.Errorf("open during the outage: status %v, want no current_limit, remaining or reset", st)
	}
	if hv := resp.GetResponseHeadersToAdd(); len(hv) != 0 {
		t.Errorf("open during the outage: headers %v, want none", hv)
	}

	// Beside a local fallback, the headers are the local decision's alone.
	resp = h.call(t, req("f", 0, desc("open", "x"), desc("local", "y")))
	if resp.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Errorf("open beside local: status %v, want no current_limit", resp.GetStatuses()[0])
	}
	checkStatus(t, "local during the outage", resp.GetStatuses()[1], want{ok, 2, pb.RateLimitResponse_RateLimit_MINUTE, 1})
	if got, want := header(resp, "ratelimit"), `"rls.f.local";r=1;t=60`; got != want {
		t.Errorf("open beside local: RateLimit %q, want %q", got, want)
	}
	if got := header(resp, names.Remaining); got != "1" {
		t.Errorf("open beside local: %s %q, want 1 (the local count)", names.Remaining, got)
	}

	// A limit override fails open too.
	resp = h.call(t, overridden("f", 3, typev3.RateLimitUnit_MINUTE, 0, "open", "x"))
	if st := resp.GetStatuses()[0]; st.GetCode() != ok || st.GetLimitRemaining() != 0 || len(resp.GetResponseHeadersToAdd()) != 0 {
		t.Errorf("override during the outage: %v, want OK claiming no quota", resp)
	}
}
