// Package limitertest is the conformance suite every limiter.Limiter must
// pass: the same step tables (fixed instants, exact expected decisions) run
// over the memory backend and over a real redis-server.
package limitertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// Factory returns a limiter for p whose state is independent of every
// limiter returned before (fresh store or fresh key space). Its AllowN must
// use the now it is given (a Redis backend in ClientClock mode).
type Factory func(t *testing.T, p limiter.Policy) limiter.Limiter

// T0 is the first instant of every table: a real date (16-digit µs, as Redis
// TIME gives) aligned to the minute.
var T0 = time.Unix(1_764_489_600, 0)

// Tolerance is how far a duration may be from the table: Redis computes in
// whole microseconds, the memory backend in nanoseconds.
const Tolerance = time.Microsecond

// Step is one request and the decision it must get.
type Step struct {
	At        time.Duration // since T0
	Cost      int64
	Allowed   bool
	Remaining int64
	Retry     time.Duration
	Reset     time.Duration
	Delay     time.Duration
	// Window is the decision's Window when it is not the policy's QuotaWindow (a
	// calendar period's own length); 0: QuotaWindow.
	Window time.Duration
}

// Case is a policy and a sequence of steps on one key.
type Case struct {
	Name   string
	Policy limiter.Policy
	Steps  []Step
	// Start is the instant Step.At counts from; zero: T0.
	Start time.Time
}

const ms = time.Millisecond
const sec = time.Second

// Cases returns the conformance tables, one or more per algorithm.
func Cases() []Case {
	return append(baseCases(), CalendarCases()...)
}

func baseCases() []Case {
	return []Case{
		{
			Name:   "fixed_window",
			Policy: limiter.Policy{Name: "fw", Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Minute},
			Steps: []Step{
				{At: 0, Cost: 1, Allowed: true, Remaining: 2, Reset: 60 * sec},
				{At: 10 * sec, Cost: 1, Allowed: true, Remaining: 1, Reset: 50 * sec},
				{At: 20 * sec, Cost: 1, Allowed: true, Remaining: 0, Reset: 40 * sec},
				{At: 30 * sec, Cost: 1, Allowed: false, Remaining: 0, Retry: 30 * sec, Reset: 30 * sec},
				{At: 30 * sec, Cost: 0, Allowed: false, Remaining: 0, Retry: 30 * sec, Reset: 30 * sec},
				{At: 60 * sec, Cost: 0, Allowed: true, Remaining: 3, Reset: 0},
				{At: 60 * sec, Cost: 2, Allowed: true, Remaining: 1, Reset: 60 * sec},
				{At: 60 * sec, Cost: 2, Allowed: false, Remaining: 1, Retry: 60 * sec, Reset: 60 * sec},
				{At: 119*sec + 999*ms, Cost: 1, Allowed: true, Remaining: 0, Reset: 1 * ms},
			},
		},
		{
			Name:   "sliding_log",
			Policy: limiter.Policy{Name: "sl", Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute},
			Steps: []Step{
				{At: 0, Cost: 1, Allowed: true, Remaining: 2, Reset: 60 * sec},
				{At: 1 * sec, Cost: 1, Allowed: true, Remaining: 1, Reset: 60 * sec},
				{At: 2 * sec, Cost: 1, Allowed: true, Remaining: 0, Reset: 60 * sec},
				{At: 3 * sec, Cost: 1, Allowed: false, Remaining: 0, Retry: 57 * sec, Reset: 59 * sec},
				{At: 3 * sec, Cost: 0, Allowed: false, Remaining: 0, Retry: 57 * sec, Reset: 59 * sec},
				// (now-60s, now]: the entry at 0 leaves exactly at 60 s.
				{At: 60 * sec, Cost: 1, Allowed: true, Remaining: 0, Reset: 60 * sec},
				// cost 2 must wait for the second-oldest entry (2 s) to leave.
				{At: 60*sec + 500*ms, Cost: 2, Allowed: false, Remaining: 0, Retry: 1500 * ms, Reset: 59500 * ms},
				{At: 62 * sec, Cost: 2, Allowed: true, Remaining: 0, Reset: 60 * sec},
			},
		},
		{
			Name:   "sliding_counter",
			Policy: limiter.Policy{Name: "sc", Algorithm: limiter.SlidingCounter, Limit: 10, Window: 10 * sec},
			Steps: append(repeat(10, func(i int) Step {
				return Step{At: 0, Cost: 1, Allowed: true, Remaining: int64(9 - i), Reset: 20 * sec}
			}),
				// est 10: only the next window frees room, 1 ns (1 µs in Redis) after it starts.
				Step{At: 5 * sec, Cost: 1, Allowed: false, Remaining: 0, Retry: 5*sec + 1, Reset: 15 * sec},
				// half way through window 1: prev 10 weighs 5.
				Step{At: 15 * sec, Cost: 1, Allowed: true, Remaining: 4, Reset: 15 * sec},
				Step{At: 15 * sec, Cost: 4, Allowed: true, Remaining: 0, Reset: 15 * sec},
				Step{At: 15 * sec, Cost: 1, Allowed: false, Remaining: 0, Retry: 1, Reset: 15 * sec},
				// window 2: prev 5 weighs floor(2.5) = 2.
				Step{At: 25 * sec, Cost: 0, Allowed: true, Remaining: 8, Reset: 5 * sec},
				// window 4 after an idle window: nothing carries over.
				Step{At: 45 * sec, Cost: 1, Allowed: true, Remaining: 9, Reset: 15 * sec},
			),
		},
		{
			Name:   "token_bucket",
			Policy: limiter.Policy{Name: "tb", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 5},
			Steps: append(append(append(repeat(10, func(i int) Step {
				return Step{At: 0, Cost: 1, Allowed: true, Remaining: int64(9 - i), Reset: time.Duration(i+1) * 200 * ms}
			}),
				Step{At: 0, Cost: 1, Allowed: false, Remaining: 0, Retry: 200 * ms, Reset: 2 * sec},
				Step{At: 0, Cost: 1, Allowed: false, Remaining: 0, Retry: 200 * ms, Reset: 2 * sec},
			), repeat(5, func(i int) Step {
				return Step{At: sec, Cost: 1, Allowed: true, Remaining: int64(4 - i), Reset: time.Duration(6+i) * 200 * ms}
			})...),
				Step{At: sec, Cost: 1, Allowed: false, Remaining: 0, Retry: 200 * ms, Reset: 2 * sec},
				Step{At: sec, Cost: 0, Allowed: false, Remaining: 0, Retry: 200 * ms, Reset: 2 * sec},
				Step{At: 1100 * ms, Cost: 1, Allowed: false, Remaining: 0, Retry: 100 * ms, Reset: 1900 * ms},
				Step{At: 3 * sec, Cost: 3, Allowed: true, Remaining: 7, Reset: 600 * ms},
				Step{At: 3 * sec, Cost: 0, Allowed: true, Remaining: 7, Reset: 600 * ms},
				Step{At: 3 * sec, Cost: 8, Allowed: false, Remaining: 7, Retry: 200 * ms, Reset: 600 * ms},
			),
		},
		{
			Name:   "leaky_bucket",
			Policy: limiter.Policy{Name: "lb", Algorithm: limiter.LeakyBucket, Capacity: 3, LeakPerSecond: 1},
			Steps: []Step{
				{At: 0, Cost: 1, Allowed: true, Remaining: 2, Reset: 1 * sec},
				{At: 0, Cost: 1, Allowed: true, Remaining: 1, Reset: 2 * sec},
				{At: 0, Cost: 1, Allowed: true, Remaining: 0, Reset: 3 * sec},
				{At: 0, Cost: 1, Allowed: false, Remaining: 0, Retry: 1 * sec, Reset: 3 * sec},
				{At: 0, Cost: 0, Allowed: false, Remaining: 0, Retry: 1 * sec, Reset: 3 * sec},
				{At: 1 * sec, Cost: 1, Allowed: true, Remaining: 0, Reset: 3 * sec},
				{At: 5 * sec, Cost: 1, Allowed: true, Remaining: 2, Reset: 1 * sec},
			},
		},
		{
			Name: "leaky_bucket_shaping",
			Policy: limiter.Policy{Name: "lbs", Algorithm: limiter.LeakyBucket, Capacity: 2, LeakPerSecond: 10,
				MaxDelay: 300 * ms},
			Steps: []Step{
				{At: 0, Cost: 1, Allowed: true, Remaining: 1, Reset: 100 * ms},
				{At: 0, Cost: 1, Allowed: true, Remaining: 0, Reset: 200 * ms},
				// would overflow: admitted with a delay instead of denied
				{At: 0, Cost: 1, Allowed: true, Remaining: 0, Reset: 300 * ms, Delay: 100 * ms},
				{At: 0, Cost: 1, Allowed: true, Remaining: 0, Reset: 400 * ms, Delay: 200 * ms},
				{At: 0, Cost: 1, Allowed: true, Remaining: 0, Reset: 500 * ms, Delay: 300 * ms},
				// beyond max_delay: denied until the delay would fit again
				{At: 0, Cost: 1, Allowed: false, Remaining: 0, Retry: 100 * ms, Reset: 500 * ms},
				{At: 100 * ms, Cost: 1, Allowed: true, Remaining: 0, Reset: 500 * ms, Delay: 300 * ms},
			},
		},
	}
}

func repeat(n int, f func(i int) Step) []Step {
	s := make([]Step, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

func near(got, want time.Duration) bool {
	d := got - want
	return d >= -Tolerance && d <= Tolerance
}

// Run runs every conformance test against f.
func Run(t *testing.T, f Factory) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) { RunCase(t, f, c) })
	}
	t.Run("article_boundary_burst", func(t *testing.T) { testBoundaryBurst(t, f) })
	t.Run("article_token_bucket", func(t *testing.T) { testArticleTokenBucket(t, f) })
	t.Run("token_bucket_exact", func(t *testing.T) { testTokenBucketExact(t, f) })
	t.Run("article_window_counter", func(t *testing.T) { testWindowCounter(t, f) })
	t.Run("bad_input", func(t *testing.T) { testBadInput(t, f) })
	t.Run("keys_are_independent", func(t *testing.T) { testKeysIndependent(t, f) })
	t.Run("concurrent_exact", func(t *testing.T) { testConcurrent(t, f) })
	t.Run("levels", func(t *testing.T) { testLevels(t, f) })
	t.Run("levels_concurrent", func(t *testing.T) { testLevelsConcurrent(t, f) })
}

// RunCase runs one step table on a fresh key.
func RunCase(t *testing.T, f Factory, c Case) {
	t.Helper()
	l := f(t, c.Policy)
	ctx := context.Background()
	start := c.Start
	if start.IsZero() {
		start = T0
	}
	for i, s := range c.Steps {
		d, err := l.AllowN(ctx, "k1", start.Add(s.At), s.Cost)
		if err != nil {
			t.Fatalf("step %d (t=%s cost %d): %v", i, s.At, s.Cost, err)
		}
		if d.Allowed != s.Allowed || d.Remaining != s.Remaining || !near(d.RetryAfter, s.Retry) ||
			!near(d.ResetAfter, s.Reset) || !near(d.Delay, s.Delay) {
			t.Errorf("step %d (t=%s cost %d): got allowed=%v remaining=%d retry=%s reset=%s delay=%s\n"+
				"                          want allowed=%v remaining=%d retry=%s reset=%s delay=%s",
				i, s.At, s.Cost, d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay,
				s.Allowed, s.Remaining, s.Retry, s.Reset, s.Delay)
		}
		w := s.Window
		if w == 0 {
			w = c.Policy.QuotaWindow()
		}
		if d.Limit != c.Policy.Quota() || d.Policy != c.Policy.Name || d.Window != w {
			t.Errorf("step %d: limit=%d policy=%q window=%s, want %d %q %s", i, d.Limit, d.Policy, d.Window,
				c.Policy.Quota(), c.Policy.Name, w)
		}
	}
}

// The article: 100 requests at 59.9 s and 100 at 60.1 s, limit 100/min.
func testBoundaryBurst(t *testing.T, f Factory) {
	ctx := context.Background()
	count := func(p limiter.Policy) int {
		l := f(t, p)
		n := 0
		for i := 0; i < 200; i++ {
			at := 59_900 * ms
			if i >= 100 {
				at = 60_100 * ms
			}
			d, err := l.AllowN(ctx, "burst", T0.Add(at), 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				n++
			}
		}
		return n
	}
	fw := count(limiter.Policy{Name: "fw", Algorithm: limiter.FixedWindow, Limit: 100, Window: time.Minute})
	sw := count(limiter.Policy{Name: "sw", Algorithm: limiter.SlidingCounter, Limit: 100, Window: time.Minute})
	got := fmt.Sprintf("fixed window allowed: %d | sliding counter allowed: %d", fw, sw)
	if want := "fixed window allowed: 200 | sliding counter allowed: 101"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// The article: capacity 10, 5/s; 12 requests at t=0, then 6 at t=1 s.
func testArticleTokenBucket(t *testing.T, f Factory) {
	ctx := context.Background()
	l := f(t, limiter.Policy{Name: "tb", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 5})
	allowed, last := 0, limiter.Decision{}
	for i := 0; i < 12; i++ {
		d, err := l.AllowN(ctx, "tb", T0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
		last = d
	}
	var at1 []string
	for i := 0; i < 6; i++ {
		d, err := l.AllowN(ctx, "tb", T0.Add(sec), 1)
		if err != nil {
			t.Fatal(err)
		}
		at1 = append(at1, fmt.Sprint(d.Allowed))
	}
	got := fmt.Sprintf("t=0 burst of 12: %d allowed, retryAfterMs = %d\nt=1s: %s",
		allowed, last.RetryAfter.Milliseconds(), strings.Join(at1, ","))
	want := "t=0 burst of 12: 10 allowed, retryAfterMs = 200\nt=1s: true,true,true,true,true,false"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// The article's WindowCounter: requests in (now-60s, now] after each hit,
// which a sliding log with a large limit reports as Limit - Remaining.
func testWindowCounter(t *testing.T, f Factory) {
	ctx := context.Background()
	l := f(t, limiter.Policy{Name: "wc", Algorithm: limiter.SlidingLog, Limit: 1000, Window: time.Minute})
	var out []string
	for _, at := range []time.Duration{0, 10_000 * ms, 30_000 * ms, 59_999 * ms, 60_000 * ms, 90_001 * ms} {
		d, err := l.AllowN(ctx, "wc", T0.Add(at), 1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%gs:%d", at.Seconds(), d.Limit-d.Remaining))
	}
	if got, want := strings.Join(out, " "), "0s:1 10s:2 30s:3 59.999s:4 60s:4 90.001s:3"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func testBadInput(t *testing.T, f Factory) {
	ctx := context.Background()
	l := f(t, limiter.Policy{Name: "bad", Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Minute})
	for _, c := range []struct {
		key  string
		cost int64
		want error
	}{
		{"", 1, limiter.ErrInvalidKey},
		{strings.Repeat("k", limiter.MaxKeyLen+1), 1, limiter.ErrInvalidKey},
		{"a\nb", 1, limiter.ErrInvalidKey},
		{"\xff", 1, limiter.ErrInvalidKey},
		{"csi\u009b31m", 1, limiter.ErrInvalidKey}, // a C1 control
		{"rlo\u202ex", 1, limiter.ErrInvalidKey},   // a bidi override
		{"ok", -1, limiter.ErrInvalidCost},
		{"ok", 6, limiter.ErrCostOverLimit},
	} {
		if _, err := l.AllowN(ctx, c.key, T0, c.cost); !errors.Is(err, c.want) {
			t.Errorf("AllowN(%q, cost %d) error = %v, want %v", c.key, c.cost, err, c.want)
		}
	}
	if d, err := l.AllowN(ctx, strings.Repeat("k", limiter.MaxKeyLen), T0, 5); err != nil || !d.Allowed {
		t.Errorf("longest key, cost = limit: %+v, %v; want allowed", d, err)
	}
}

func testKeysIndependent(t *testing.T, f Factory) {
	ctx := context.Background()
	l := f(t, limiter.Policy{Name: "ind", Algorithm: limiter.SlidingLog, Limit: 1, Window: time.Minute})
	for _, key := range []string{"a", "b", "{a}", "a}b"} {
		d, err := l.AllowN(ctx, key, T0, 1)
		if err != nil || !d.Allowed {
			t.Errorf("first request of key %q: %+v, %v; want allowed", key, d, err)
		}
	}
	if d, _ := l.AllowN(ctx, "a", T0, 1); d.Allowed {
		t.Errorf("second request of key a allowed, want denied")
	}
}

// 8 goroutines × 25 requests for one key at one instant, quota 50: exactly
// 50 are admitted by every algorithm (no lost or double updates).
func testConcurrent(t *testing.T, f Factory) {
	for _, p := range []limiter.Policy{
		{Name: "cfw", Algorithm: limiter.FixedWindow, Limit: 50, Window: time.Minute},
		{Name: "csl", Algorithm: limiter.SlidingLog, Limit: 50, Window: time.Minute},
		{Name: "csc", Algorithm: limiter.SlidingCounter, Limit: 50, Window: time.Minute},
		{Name: "ctb", Algorithm: limiter.TokenBucket, Capacity: 50, RefillPerSecond: 1},
		{Name: "clb", Algorithm: limiter.LeakyBucket, Capacity: 50, LeakPerSecond: 1},
	} {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			l := f(t, p)
			var allowed atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 25; i++ {
						d, err := l.AllowN(context.Background(), "hot", T0, 1)
						if err != nil {
							errs <- err
							return
						}
						if d.Allowed {
							allowed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := allowed.Load(); got != 50 {
				t.Errorf("allowed %d of 200 concurrent requests, want exactly 50", got)
			}
		})
	}
}
