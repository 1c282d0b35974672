package rls_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
	"github.com/slide-metrics/slide/rls"
)

func redisBackend(t testing.TB, addr string) *redislimit.Backend {
	t.Helper()
	c := goredis.NewClient(redislimit.Options(addr))
	t.Cleanup(func() { c.Close() })
	be, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

const redisConfig = `
domain: api
descriptors:
  - key: user
    rate_limit:
      algorithm: sliding_log
      unit: minute
      requests_per_unit: 100
      # A slow call must fail the test, not pass as a degraded OK (the default
      # open mode) on a loaded machine under the race detector.
      on_backend_error: closed
      timeout: 5s
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: 5
      on_backend_error: closed
      timeout: 5s
`

// TestRedisSlidingLogTenClients: ten gRPC clients, each on its own
// connection, send 30 requests each for one descriptor limited to 100 a
// minute by a Redis sliding log: exactly 100 are OK.
func TestRedisSlidingLogTenClients(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := rls.Parse([]byte(redisConfig), "redis.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg, redis: redisBackend(t, srv.Addr), realClock: true})
	var mu sync.Mutex
	codes := map[pb.RateLimitResponse_Code]int{}
	var wg sync.WaitGroup
	for range 10 {
		client := pb.NewRateLimitServiceClient(dial(t, h.addr))
		wg.Go(func() {
			for range 30 {
				resp, err := client.ShouldRateLimit(context.Background(), req("api", 0, desc("user", "u42")))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				codes[resp.GetOverallCode()]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if codes[ok] != 100 || codes[over] != 200 {
		t.Errorf("codes %v, want exactly 100 OK and 200 OVER_LIMIT", codes)
	}
	if n, err := srv.Do("ZCARD", "rl:{u42}:rls.api.user:sl"); err != nil || n != "100" {
		t.Errorf("ZCARD of the descriptor's log: %q, %v; want 100", n, err)
	}
}

// TestRedisFixedWindowKey: the default algorithm is envoyproxy/ratelimit's
// fixed window, kept in Redis under rl:{values}:policy:fw.
func TestRedisFixedWindowKey(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := rls.Parse([]byte(redisConfig), "redis.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg, redis: redisBackend(t, srv.Addr), realClock: true})
	for i := range 7 {
		resp := h.call(t, req("api", 0, desc("tenant", "t|1")))
		if (resp.GetOverallCode() == ok) != (i < 5) {
			t.Errorf("request %d: %v", i+1, resp)
		}
	}
	keys, err := srv.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(keys, `rl:{t\|1}:rls.api.tenant:`) || strings.Contains(keys, "\n") {
		t.Errorf("Redis keys %q, want the one fixed-window key of value t|1 escaped", keys)
	}
}

const failureConfig = `
domain: f
descriptors:
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 5, on_backend_error: open, timeout: 1s}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 5, on_backend_error: closed, timeout: 1s}
  - key: local
    rate_limit: {unit: minute, requests_per_unit: 2, on_backend_error: local, timeout: 1s}
`

// TestRedisOutageFailureModes: with redis-server killed, each descriptor
// follows its on_backend_error: open answers OK, local decides in memory,
// closed fails the call with Unavailable; all recover when Redis returns.
func TestRedisOutageFailureModes(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := rls.Parse([]byte(failureConfig), "failure.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg, redis: redisBackend(t, srv.Addr), realClock: true})
	for _, k := range []string{"open", "closed", "local"} {
		if resp := h.call(t, req("f", 0, desc(k, "x"))); resp.GetOverallCode() != ok {
			t.Fatalf("%s before the outage: %v", k, resp)
		}
	}
	srv.Stop()
	if resp := h.call(t, req("f", 0, desc("open", "x"))); resp.GetOverallCode() != ok {
		t.Errorf("open during the outage: %v", resp)
	}
	var got []pb.RateLimitResponse_Code
	for range 3 {
		got = append(got, h.call(t, req("f", 0, desc("local", "x"))).GetOverallCode())
	}
	if got[0] != ok || got[1] != ok || got[2] != over {
		t.Errorf("local during the outage: %v, want OK OK OVER_LIMIT (2 a minute in memory)", got)
	}
	_, err = h.client.ShouldRateLimit(context.Background(), req("f", 0, desc("closed", "x"), desc("open", "y")))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "rls.f.closed") {
		t.Errorf("closed during the outage: %v, want Unavailable naming the policy", err)
	}
	srv.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := h.client.ShouldRateLimit(context.Background(), req("f", 0, desc("closed", "x")))
		if err == nil && resp.GetOverallCode() == ok && resp.GetStatuses()[0].GetLimitRemaining() == 3 {
			break // Redis's own count again: 2 of 5 spent
		}
		if time.Now().After(deadline) {
			t.Fatalf("closed after Redis returned: %v, %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := counter(t, h.reg, rls.MetricErrors, map[string]string{"reason": "unavailable"}); n < 1 {
		t.Errorf("unavailable errors %v", n)
	}
}

// TestRedisLimitOverride: with Redis, a descriptor's limit override counts
// there (shared by every instance), under rl:{domain|key=value}:rls-override.UNIT:fw:N.
func TestRedisLimitOverride(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := rls.Parse([]byte(redisConfig), "redis.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if err != nil {
		t.Fatal(err)
	}
	be := redisBackend(t, srv.Addr)
	a := start(t, setup{cfg: cfg, redis: be, realClock: true})
	b := start(t, setup{cfg: cfg, redis: be, realClock: true}) // a second instance on the same Redis
	var oks int
	for i := range 6 {
		h := a
		if i%2 == 1 {
			h = b
		}
		if h.call(t, overridden("api", 4, typev3.RateLimitUnit_HOUR, 0, "tenant", "t1")).GetOverallCode() == ok {
			oks++
		}
	}
	if oks != 4 {
		t.Errorf("%d of 6 OK across two instances with an override of 4 per hour, want 4", oks)
	}
	keys, err := srv.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(keys, `rl:{api|tenant=t1}:rls-override.hour:fw:`) || strings.Contains(keys, "\n") {
		t.Errorf("Redis keys %q, want the override's one counter", keys)
	}
}
