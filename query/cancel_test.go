package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// cancelEnv is a server over many series, each read visit counted by the hook: a test
// cancels its request at visit cancelAt and counts how much more the read did.
type cancelEnv struct {
	*env
	visits   int
	cancelAt int
	cancel   context.CancelFunc
}

func newCancelEnv(t *testing.T, mod func(*query.Config)) *cancelEnv {
	c := &cancelEnv{env: newEnv(t, mod)}
	query.SetVisitHook(c.srv, func() {
		c.visits++
		if c.visits == c.cancelAt && c.cancel != nil {
			c.cancel() // the client goes away in the middle of the read
		}
	})
	return c
}

// serve runs path in process with a context cancelled at visit cancelAt (0: never) and
// returns the status, the body length and the series visited.
func (c *cancelEnv) serve(t *testing.T, path string, cancelAt int) (int, int, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.visits, c.cancelAt, c.cancel = 0, cancelAt, cancel
	w := httptest.NewRecorder()
	c.srv.Handler().ServeHTTP(w, httptest.NewRequestWithContext(ctx, "GET", path, nil))
	return w.Code, w.Body.Len(), c.visits
}

// scanSlack is how many series a read may visit after its request is cancelled: the
// handlers look at the context every 256 series (query.scanCheck), a store scan up to
// one more check's worth.
const scanSlack = 2 * 256

// Every read that loops over series stops within a few hundred series of its client going
// away, and answers nothing: the glob window and range merges, top, and the series list
// over every metric.
// The same reads run to the end without a cancel, so the hook counts the real work.
func TestReadsStopWhenTheClientGoes(t *testing.T) {
	const series, metrics, cancelAt = 20_000, 2_000, 1_000
	c := newCancelEnv(t, nil)
	for i := range series {
		ev := window.Event{TS: t0, Metric: "latency_ms", Key: fmt.Sprintf("tenant-%05d", i), Value: float64(i % 100), Count: 1}
		if err := c.store.ObserveAt(t0, ev); err != nil {
			t.Fatal(err)
		}
	}
	for i := range metrics { // many metrics, for the series list over all of them
		if err := c.store.ObserveAt(t0, window.Event{TS: t0, Metric: fmt.Sprintf("m%04d", i), Key: "k", Value: 1, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		path       string
		fullVisits int // at least, uncancelled
		slack      int
	}{
		{"/v1/window?metric=latency_ms&key=tenant-*&window=5m&q=0.99", series, scanSlack},
		{"/v1/range?metric=latency_ms&key=tenant-*&window=1m&step=1m", series, scanSlack},
		{"/v1/top?metric=latency_ms&by=p95&k=5&window=5m", series, scanSlack},
		{"/v1/top?metric=latency_ms&by=count&key=tenant-1*", series / 10, scanSlack},
		// The series of every metric: one pass over the store (it was a pass per metric).
		{"/v1/series?prefix=k&limit=1000", series + metrics, scanSlack},
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, n, full := c.serve(t, tc.path, 0)
			if code != http.StatusOK || n == 0 || full < tc.fullVisits {
				t.Fatalf("uncancelled: %d, %d bytes, %d series visited; want 200 and at least %d visits", code, n, full, tc.fullVisits)
			}
			code, n, visits := c.serve(t, tc.path, cancelAt)
			if visits > cancelAt+tc.slack {
				t.Errorf("cancelled at visit %d: %d visited (of %d uncancelled), want at most %d", cancelAt, visits, full, cancelAt+tc.slack)
			}
			if code == http.StatusOK && n > 0 {
				t.Errorf("cancelled request answered 200 with %d bytes", n)
			}
			// A request already cancelled when it arrives reads (almost) nothing.
			if _, _, visits := c.serve(t, tc.path, 1); visits > 1 {
				t.Errorf("cancelled at its first visit: %d series visited", visits)
			}
		})
	}
}

// Through a cluster, top's merged series are visited one by one as well, and stop with the
// client.
func TestClusterTopStopsWhenTheClientGoes(t *testing.T) {
	e, _, _ := clusterEnv(t) // 20 keys, half here, half on the peer
	c := &cancelEnv{env: e}
	query.SetVisitHook(e.srv, func() {
		c.visits++
		if c.visits == c.cancelAt && c.cancel != nil {
			c.cancel()
		}
	})
	const path = "/v1/top?metric=latency_ms&by=count&k=3"
	if code, _, full := c.serve(t, path, 0); code != 200 || full != 20 {
		t.Fatalf("uncancelled: %d with %d visits, want 200 and 20", code, full)
	}
	code, n, visits := c.serve(t, path, 1)
	if visits != 1 || (code == 200 && n > 0) {
		t.Fatalf("cancelled at the first series: %d visits, status %d with %d bytes; want 1 and no answer", visits, code, n)
	}
}

// A read that takes longer than Config.ReadTimeout stops and says so with a 503 timeout,
// while its client still waits: an http.Server's WriteTimeout neither ends the handler nor
// cancels its context, so a costly match= over many series (key=~"(.*){1000}" costs about
// 1 ms a series) went on for minutes after its answer could no longer be sent. The hook
// stalls the scan at series 1,000 past the deadline.
func TestReadsStopAtTheReadTimeout(t *testing.T) {
	const series, stallAt, timeout = 5_000, 1_000, 50 * time.Millisecond
	e := newEnv(t, func(c *query.Config) { c.ReadTimeout = timeout })
	visits := 0
	query.SetVisitHook(e.srv, func() {
		if visits++; visits == stallAt {
			time.Sleep(4 * timeout) // a slow regexp, or a slow machine
		}
	})
	for i := range series {
		if err := e.store.ObserveAt(t0, window.Event{TS: t0, Metric: "latency_ms", Key: fmt.Sprintf("tenant-%05d", i), Value: 1, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{
		"/v1/window?metric=latency_ms&key=tenant-*",
		"/v1/window?metric=latency_ms&by=key&key=tenant-0*",
		"/v1/range?metric=latency_ms&key=tenant-*",
		"/v1/top?metric=latency_ms&by=p95",
		"/v1/series?prefix=tenant-",
	} {
		visits = 0
		code, b, h := e.do("GET", path, nil)
		var a errorAnswer
		_ = json.Unmarshal(b, &a)
		if code != http.StatusServiceUnavailable || a.Error.Code != "timeout" || !strings.Contains(a.Error.Message, "50ms") || h.Get("Retry-After") != "" {
			t.Errorf("%s: %d %.200s (Retry-After %q), want 503 timeout after 50ms without Retry-After", path, code, b, h.Get("Retry-After"))
		}
		if visits > stallAt+scanSlack {
			t.Errorf("%s: %d series visited after the deadline at %d", path, visits, stallAt)
		}
	}
	// A read of one series, which scans nothing, answers.
	if code, b, _ := e.do("GET", "/v1/window?metric=latency_ms&key=tenant-00001", nil); code != 200 {
		t.Errorf("a read within the timeout: %d %.200s", code, b)
	}
}
