package limithttp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

var t0 = time.Unix(1_764_489_600, 0)

func newTestService(t *testing.T, cfg limiter.Config) *limiter.Service {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = func() time.Time { return t0 }
	}
	s, err := limiter.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// downBackend is a Redis backend that is down: every call fails.
type downBackend struct{}

func (downBackend) Decide(context.Context, []limiter.BackendRequest, []limiter.Decision) error {
	return errors.New("connection refused")
}

func redisPolicy(name string, mode limiter.FailureMode) limiter.Policy {
	return limiter.Policy{Name: name, Algorithm: limiter.SlidingLog, Limit: 2, Window: time.Minute, Backend: limiter.BackendRedis,
		OnBackendError: mode, Timeout: 20 * time.Millisecond}
}
