package rls_test

import (
	"path/filepath"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// TestReloadedLimitHoldsInLocalFallback: requests_per_unit raised from 2 to 4 by a
// reload, then Redis goes down (a real redis-server stopped): the local fallback
// (on_backend_error: local) counts to the new limit, 4, as Redis did. It kept the
// limit of the start, 2, denying the third request while its status said 4.
func TestReloadedLimitHoldsInLocalFallback(t *testing.T) {
	srv := redistest.Start(t)
	file := filepath.Join(t.TempDir(), "local.yaml")
	body := func(n string) string {
		return "domain: f\ndescriptors:\n  - key: local\n    rate_limit: {unit: minute, requests_per_unit: " + n +
			", on_backend_error: local, timeout: 1s}\n"
	}
	opt := rls.LoadOptions{DefaultBackend: limiter.BackendRedis}
	writeReload(t, file, body("2"))
	cfg, err := rls.Load(file, opt)
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg, redis: redisBackend(t, srv.Addr), realClock: true})
	writeReload(t, file, body("4"))
	if _, err := h.server.ReloadFile(file, opt); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	minute := pb.RateLimitResponse_RateLimit_MINUTE
	for i, w := range []want{{ok, 4, minute, 3}, {ok, 4, minute, 2}, {ok, 4, minute, 1}, {ok, 4, minute, 0}, {over, 4, minute, 0}} {
		checkStatus(t, "request "+string(rune('1'+i))+", Redis down", h.call(t, req("f", 0, desc("local", "k"))).GetStatuses()[0], w)
	}
}
