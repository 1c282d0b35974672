package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/internal/logrepeat"
	"github.com/slide-metrics/slide/internal/proctest"
)

// A Redis that is down fails every dial alike: go-redis's line is written once, not once a
// second for as long as the outage lasts; another failure is still written.
func TestRedisLoggerSaysARepeatOnce(t *testing.T) {
	var logs proctest.Buffer
	l := redisLogger{log: slog.New(slog.NewTextHandler(&logs, nil)), every: rate.NewLimiter(rate.Inf, 1), rep: logrepeat.New(time.Minute)}
	for range 100 {
		l.Printf(context.Background(), "redis: %s:%d: %s", "pool.go", 120, "dial tcp 127.0.0.1:6399: connect: connection refused")
	}
	l.Printf(context.Background(), "redis: %s:%d: %s", "pool.go", 120, "NOAUTH Authentication required.")
	got := logs.String()
	if n := strings.Count(got, "connection refused"); n != 1 {
		t.Errorf("the same dial failure 100 times wrote %d lines, want 1:\n%s", n, got)
	}
	if !strings.Contains(got, "NOAUTH") {
		t.Errorf("another failure was held back:\n%s", got)
	}
}
