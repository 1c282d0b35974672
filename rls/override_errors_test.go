package rls_test

import (
	"net"
	"testing"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// TestOverrideBackendErrorsCounted: a Redis failure while deciding a limit
// override counts in slide_limiter_backend_errors_total{policy="rls-override.UNIT"}
// by reason, as a configured descriptor's does. It was not counted at all
// (only as a decision result="error"), so an alert on backend errors missed
// an outage that only override traffic met.
func TestOverrideBackendErrorsCounted(t *testing.T) {
	down := downAddr(t)
	cfg, err := rls.Parse([]byte(`domain: f
descriptors:
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 5, on_backend_error: open, timeout: 1s}
`), "failure.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg, redis: redisBackend(t, down)})
	h.call(t, req("f", 0, desc("open", "x")))
	h.call(t, overridden("f", 3, typev3.RateLimitUnit_MINUTE, 0, "open", "x"))
	h.call(t, overridden("f", 3, typev3.RateLimitUnit_MINUTE, 0, "open", "y"))
	for _, c := range []struct {
		policy string
		want   float64
	}{{"rls.f.open", 1}, {"rls-override.minute", 2}} {
		if got := counter(t, h.reg, limiter.MetricBackendErrors, map[string]string{"policy": c.policy, "reason": "error"}); got != c.want {
			t.Errorf("%s{policy=%q,reason=error} = %v, want %v", limiter.MetricBackendErrors, c.policy, got, c.want)
		}
	}

	// A Redis that accepts and never answers times out (the override's 50 ms).
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	h = start(t, setup{cfg: cfg, redis: redisBackend(t, hang.Addr().String())})
	h.call(t, overridden("f", 3, typev3.RateLimitUnit_HOUR, 0, "open", "x"))
	if got := counter(t, h.reg, limiter.MetricBackendErrors, map[string]string{"policy": "rls-override.hour", "reason": "timeout"}); got != 1 {
		t.Errorf("%s{policy=rls-override.hour,reason=timeout} = %v, want 1", limiter.MetricBackendErrors, got)
	}
}
