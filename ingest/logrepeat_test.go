package ingest

import (
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/internal/proctest"
)

// A broker that is down fails every retry alike: the consumer says so once, not once a
// retry (a few lines a second, ten thousand an hour, before logrepeat). The "broker" here
// accepts each connection and closes it at once, so the test counts the retries.
func TestBrokerDownWarnsOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			conn.Close()
		}
	}()
	cfg := Config{Brokers: []string{ln.Addr().String()}, Topic: "events", Group: "down",
		JoinGroupBackoff: 5 * time.Millisecond}
	var logs proctest.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := start(t, cfg, newTestStore(t, 0), time.Now())
	eventually(t, 20*time.Second, "200 connections to the broker that is down", func() bool { return dials.Load() >= 200 },
		func() string { return logs.String() })
	r.stop(t)
	// A line is what it says, without its time and a connection's local port (a new one
	// each retry). The broker closing a connection reads as EOF or as a reset: 4 texts.
	lines := map[string]int{}
	for l := range strings.Lines(logs.String()) {
		l = l[strings.Index(l, " level="):]
		if i := strings.Index(l, "->"); i >= 0 {
			l = l[:strings.LastIndex(l[:i], " ")] + l[i:]
		}
		l, _, _ = strings.Cut(l, " repeated=")
		lines[l]++
	}
	if len(lines) == 0 {
		t.Fatal("no warning while the broker was down")
	}
	for l, n := range lines {
		if n > 1 {
			t.Errorf("%d lines over %d retries, want 1 (the same failure once a minute):%s", n, dials.Load(), l)
		}
	}
	if t.Failed() {
		t.Logf("the log:\n%s", logs.String())
	}
}

// A line the rate limit over all lines refused (a burst of other failures took the second's
// lines) was lost, and its text silenced for a whole minute after: the next retry's line
// must be written as soon as the rate limit lets one through, saying one was held.
func TestWarnRefusedByTheRateLimitIsWrittenNext(t *testing.T) {
	var logs proctest.Buffer
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Topic: "events", Group: "burst",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	c, err := New(cfg, newTestStore(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	c.errLim = rate.NewLimiter(0, 0) // every line of this second taken by other failures
	c.warn("ingest: joining consumer group", "group", "burst", "err", "EOF")
	if logs.String() != "" {
		t.Fatalf("written past the rate limit: %s", logs.String())
	}
	c.errLim = rate.NewLimiter(rate.Inf, 0) // the next second
	c.warn("ingest: joining consumer group", "group", "burst", "err", "EOF")
	if got := logs.String(); !strings.Contains(got, `msg="ingest: joining consumer group" group=burst err=EOF repeated=1`) {
		t.Errorf("the retry's line after the rate limit's refusal: %q; want it written, repeated=1", got)
	}
}
