package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limitertest"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

func newClient(t testing.TB, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(redislimit.Options(addr))
	t.Cleanup(func() { c.Close() })
	return c
}

// callCounter counts script commands (EVALSHA/EVAL) and the round trips
// that carry them (a pipeline is one), as a go-redis hook. Connection
// handshakes (HELLO, CLIENT SETINFO) are not counted.
type callCounter struct {
	evalsha, eval, roundTrips atomic.Int64
}

func (c *callCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *callCounter) count(cmd goredis.Cmder) bool {
	switch cmd.Name() {
	case "evalsha":
		c.evalsha.Add(1)
	case "eval":
		c.eval.Add(1)
	default:
		return false
	}
	return true
}

func (c *callCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if c.count(cmd) {
			c.roundTrips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *callCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		scripts := false
		for _, cmd := range cmds {
			scripts = c.count(cmd) || scripts
		}
		if scripts {
			c.roundTrips.Add(1)
		}
		return next(ctx, cmds)
	}
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	var n atomic.Int64
	limitertest.Run(t, func(t *testing.T, p limiter.Policy) limiter.Limiter {
		// A fresh key space per limiter: the tables reuse keys.
		b, err := redislimit.New(c, redislimit.Config{ClientClock: true, KeyPrefix: fmt.Sprintf("t%d:", n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		l, err := b.Limiter(p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func TestNewRefusesUnsafeClient(t *testing.T) {
	for name, o := range map[string]*goredis.Options{
		"retries":         {Addr: "127.0.0.1:1", ContextTimeoutEnabled: true},
		"ignores context": {Addr: "127.0.0.1:1", MaxRetries: -1},
	} {
		c := goredis.NewClient(o)
		_, err := redislimit.New(c, redislimit.Config{})
		c.Close()
		if !errors.Is(err, redislimit.ErrUnsafeClient) {
			t.Errorf("%s: New error = %v, want ErrUnsafeClient", name, err)
		}
	}
}

// The article's two scripts, as written (testdata/article_*.lua), with the
// article's printed lines. redis-cli prints an array reply one value a line;
// the article joins them with spaces.
func TestArticleScripts(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	ctx := context.Background()
	read := func(name string) string {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	line := func(v any) string {
		var parts []string
		for _, x := range v.([]any) {
			parts = append(parts, fmt.Sprint(x))
		}
		return strings.Join(parts, " ")
	}

	sliding := read("article_sliding.lua")
	var lines []string
	for i := 1; i <= 4; i++ {
		v, err := c.Eval(ctx, sliding, []string{"rl:{u42}"}, 60000, 3, fmt.Sprintf("req-%d", i)).Result()
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line(v))
	}
	enc, err := srv.Do("OBJECT", "ENCODING", "rl:{u42}")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := srv.Do("CONFIG", "GET", "zset-max-listpack-entries")
	if err != nil {
		t.Fatal(err)
	}
	lines = append(lines, enc, strings.ReplaceAll(cfg, "\n", " "))
	checkSlidingLines(t, lines)

	tb := read("article_token_bucket.lua")
	var got []string
	for i := 0; i < 6; i++ {
		v, err := c.Eval(ctx, tb, []string{"tb:{apiKey}"}, 5, 1, 1).Result()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, line(v))
	}
	if g, w := strings.Join(got, ", "), "1 4, 1 3, 1 2, 1 1, 1 0, 0 0"; g != w {
		t.Errorf("article token bucket: got %s, want %s", g, w)
	}
}

// checkSlidingLines asserts the article's output: `1 1 0`, `1 2 0`, `1 3 0`,
// `0 3 <retry ms in (59000, 60000]>`, `listpack`, `zset-max-listpack-entries 128`.
func checkSlidingLines(t *testing.T, lines []string) {
	t.Helper()
	if len(lines) != 6 {
		t.Fatalf("got %d lines: %q", len(lines), lines)
	}
	want := []string{"1 1 0", "1 2 0", "1 3 0", "", "listpack", "zset-max-listpack-entries 128"}
	for i, w := range want {
		if i == 3 {
			var retry int64
			if _, err := fmt.Sscanf(lines[3], "0 3 %d", &retry); err != nil || retry <= 59000 || retry > 60000 {
				t.Errorf("line 4 = %q, want `0 3 <retry ms in (59000, 60000]>`", lines[3])
			}
			continue
		}
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q", i+1, lines[i], w)
		}
	}
}

// The same runs through the production scripts (Redis TIME, no client
// clock), printed the article's way: allowed, count in window, retry ms.
func TestProductionScriptsReproduceArticle(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	ctx := context.Background()
	b, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	login := limiter.Policy{Name: "login", Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute}
	l, err := b.Limiter(login)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := 0; i < 4; i++ {
		d, err := l.AllowN(ctx, "u42", time.Time{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%d %d %d", b2i(d.Allowed), d.Limit-d.Remaining, d.RetryAfter.Milliseconds()))
	}
	key := b.Key(&login, "u42")
	if key != "rl:{u42}:login:sl" {
		t.Errorf("key = %q, want rl:{u42}:login:sl (hash tag on the caller's key)", key)
	}
	enc, _ := srv.Do("OBJECT", "ENCODING", key)
	cfg, _ := srv.Do("CONFIG", "GET", "zset-max-listpack-entries")
	lines = append(lines, enc, strings.ReplaceAll(cfg, "\n", " "))
	checkSlidingLines(t, lines)

	// TTL set by the same script: the key disappears when the window ends.
	if pttl, err := c.PTTL(ctx, key).Result(); err != nil || pttl <= 59*time.Second || pttl > time.Minute {
		t.Errorf("PTTL(%s) = %s, %v; want (59s, 60s]", key, pttl, err)
	}

	tb, err := b.Limiter(limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 5, RefillPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 6; i++ {
		d, err := tb.AllowN(ctx, "apiKey", time.Time{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %d", b2i(d.Allowed), d.Remaining))
	}
	if g, w := strings.Join(got, ", "), "1 4, 1 3, 1 2, 1 1, 1 0, 0 0"; g != w {
		t.Errorf("token bucket: got %s, want %s", g, w)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestScriptDetails(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	ctx := context.Background()
	b, err := redislimit.New(c, redislimit.Config{ClientClock: true})
	if err != nil {
		t.Fatal(err)
	}
	t0 := limitertest.T0

	t.Run("fractional tokens kept as a string", func(t *testing.T) {
		p := limiter.Policy{Name: "frac", Algorithm: limiter.TokenBucket, Capacity: 5, RefillPerSecond: 1}
		l, _ := b.Limiter(p)
		for i := 0; i < 5; i++ {
			l.AllowN(ctx, "k", t0, 1)
		}
		d, err := l.AllowN(ctx, "k", t0.Add(2500*time.Millisecond), 1) // 2.5 tokens → 1.5 left
		if err != nil || !d.Allowed || d.Remaining != 1 {
			t.Fatalf("decision %+v, %v", d, err)
		}
		if got, _ := srv.Do("HGET", b.Key(&p, "k"), "tokens"); got != "1.5" {
			t.Errorf("stored tokens = %q, want 1.5", got)
		}
		d, _ = l.AllowN(ctx, "k", t0.Add(3*time.Second), 2) // 2.0 tokens: the half token counted
		if !d.Allowed {
			t.Errorf("2 tokens after +0.5 s refill of 1.5: %+v, want allowed", d)
		}
	})

	t.Run("unique members in one instant", func(t *testing.T) {
		p := limiter.Policy{Name: "uniq", Algorithm: limiter.SlidingLog, Limit: 10, Window: time.Minute}
		l, _ := b.Limiter(p)
		for i := 0; i < 3; i++ {
			l.AllowN(ctx, "k", t0, 1) // same microsecond
		}
		d, _ := l.AllowN(ctx, "k", t0, 2)
		// One member per request, whatever its cost (a cost is never more than one entry),
		// none overwritten (a timestamp member would give 1).
		if n, _ := c.ZCard(ctx, b.Key(&p, "k")).Result(); n != 4 || d.Remaining != 5 {
			t.Errorf("ZCARD = %d and remaining %d after 4 requests of 5 units in one instant, want 4 and 5", n, d.Remaining)
		}
	})

	t.Run("ttl on every key", func(t *testing.T) {
		for _, p := range []limiter.Policy{
			{Name: "t1", Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Minute},
			{Name: "t2", Algorithm: limiter.SlidingLog, Limit: 5, Window: time.Minute},
			{Name: "t3", Algorithm: limiter.SlidingCounter, Limit: 5, Window: time.Minute},
			{Name: "t4", Algorithm: limiter.TokenBucket, Capacity: 5, RefillPerSecond: 1},
			{Name: "t5", Algorithm: limiter.LeakyBucket, Capacity: 5, LeakPerSecond: 1},
		} {
			l, _ := b.Limiter(p)
			if _, err := l.AllowN(ctx, "ttl", t0.Add(10*time.Second), 1); err != nil {
				t.Fatal(err)
			}
			pttl, err := c.PTTL(ctx, stateKey(t, c, b.Key(&p, "ttl"))).Result()
			if err != nil || pttl <= 0 || pttl > 2*time.Minute {
				t.Errorf("%s: PTTL = %s, %v; want a TTL within two windows", p.Algorithm, pttl, err)
			}
		}
	})

	t.Run("peek writes nothing", func(t *testing.T) {
		for _, p := range []limiter.Policy{
			{Name: "p1", Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Minute},
			{Name: "p2", Algorithm: limiter.SlidingLog, Limit: 5, Window: time.Minute},
			{Name: "p3", Algorithm: limiter.SlidingCounter, Limit: 5, Window: time.Minute},
			{Name: "p4", Algorithm: limiter.TokenBucket, Capacity: 5, RefillPerSecond: 1},
			{Name: "p5", Algorithm: limiter.LeakyBucket, Capacity: 5, LeakPerSecond: 1},
		} {
			l, _ := b.Limiter(p)
			d, err := l.AllowN(ctx, "peek", t0, 0)
			if err != nil || !d.Allowed || d.Remaining != 5 {
				t.Errorf("%s: peek on a new key = %+v, %v; want allowed, remaining 5", p.Algorithm, d, err)
			}
			if keys, _ := c.Keys(ctx, b.Key(&p, "peek")+"*").Result(); len(keys) != 0 {
				t.Errorf("%s: peek created the key", p.Algorithm)
			}
		}
	})
}

// stateKey is the one key holding the state of base (Backend.Key): base itself,
// or for a fixed window the counter of the current window, base:INDEX.
func stateKey(t *testing.T, c *goredis.Client, base string) string {
	t.Helper()
	keys, err := c.Keys(context.Background(), base+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys of %s: %q, %v; want one", base, keys, err)
	}
	return keys[0]
}

// NOSCRIPT (after SCRIPT FLUSH, a restart or a failover) is answered with
// one EVAL; nothing else is ever resent.
func TestNoScriptFallback(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	ctx := context.Background()
	var calls callCounter
	c.AddHook(&calls)
	b, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := limiter.Policy{Name: "ns", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Minute}
	l, _ := b.Limiter(p)

	// A fresh server has no scripts: EVALSHA fails with NOSCRIPT, then EVAL.
	if d, err := l.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
		t.Fatalf("first decision: %+v, %v", d, err)
	}
	if calls.evalsha.Load() != 1 || calls.eval.Load() != 1 {
		t.Errorf("first call: evalsha=%d eval=%d, want 1 and 1", calls.evalsha.Load(), calls.eval.Load())
	}
	// EVAL cached the script: the next decision is one EVALSHA.
	l.AllowN(ctx, "k", time.Time{}, 1)
	if calls.evalsha.Load() != 2 || calls.eval.Load() != 1 {
		t.Errorf("second call: evalsha=%d eval=%d, want 2 and 1", calls.evalsha.Load(), calls.eval.Load())
	}
	// A batch after a flush: its two fixed-window requests are one
	// fixed_window_batch call, EVALSHA then EVAL.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	calls = callCounter{}
	reqs := []limiter.BackendRequest{{Policy: &p, Key: "a", Cost: 1}, {Policy: &p, Key: "b", Cost: 1}}
	out := make([]limiter.Decision, 2)
	if err := b.Decide(ctx, reqs, out); err != nil || !out[0].Allowed || !out[1].Allowed {
		t.Fatalf("batch after flush: %+v, %v", out, err)
	}
	if calls.evalsha.Load() != 1 || calls.eval.Load() != 1 || calls.roundTrips.Load() != 2 {
		t.Errorf("batch after flush: evalsha=%d eval=%d round trips=%d, want 1, 1, 2",
			calls.evalsha.Load(), calls.eval.Load(), calls.roundTrips.Load())
	}
	if got, _ := c.Get(ctx, stateKey(t, c, b.Key(&p, "a"))).Result(); got != "1" {
		t.Errorf("key a counted %q times, want 1", got)
	}
	// Load makes the first decision a single EVALSHA.
	c.ScriptFlush(ctx)
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	calls = callCounter{}
	l.AllowN(ctx, "z", time.Time{}, 1)
	if calls.evalsha.Load() != 1 || calls.eval.Load() != 0 {
		t.Errorf("after Load: evalsha=%d eval=%d, want 1 and 0", calls.evalsha.Load(), calls.eval.Load())
	}
}

// A timeout is never retried: the command may already have run, and a second
// run would count the request twice.
func TestTimeoutIsNotRetried(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	ctx := context.Background()
	var calls callCounter
	c.AddHook(&calls)
	b, _ := redislimit.New(c, redislimit.Config{})
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	p := limiter.Policy{Name: "to", Algorithm: limiter.SlidingLog, Limit: 10, Window: time.Minute}
	l, _ := b.Limiter(p)

	admin := newClient(t, srv.Addr)
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "300", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	start := time.Now()
	_, err := l.AllowN(tctx, "k", time.Time{}, 1)
	elapsed := time.Since(start)
	cancel()
	if err == nil {
		t.Fatal("decision during CLIENT PAUSE succeeded, want a timeout")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("error: %v", err)
	}
	if elapsed > 250*time.Millisecond {
		t.Errorf("decision took %s, want about the 50ms timeout", elapsed)
	}
	if n := calls.evalsha.Load() + calls.eval.Load(); n != 1 {
		t.Errorf("script calls = %d, want exactly 1 (no retry after a timeout)", n)
	}
	// Once the pause ends the request is counted at most once (the server may
	// or may not have read it before the client dropped the connection).
	n, err := admin.ZCard(ctx, b.Key(&p, "k")).Result() // blocks until the pause ends
	if err != nil || n > 1 {
		t.Errorf("ZCARD after the pause = %d, %v; want 0 or 1", n, err)
	}
}

// Several policies of one request: one pipelined round trip.
func TestDecideBatchOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	ctx := context.Background()
	var calls callCounter
	c.AddHook(&calls)
	b, _ := redislimit.New(c, redislimit.Config{ClientClock: true})
	b.Load(ctx)
	user := limiter.Policy{Name: "per-user", Algorithm: limiter.SlidingLog, Limit: 2, Window: time.Minute}
	tenant := limiter.Policy{Name: "per-tenant", Algorithm: limiter.TokenBucket, Capacity: 5, RefillPerSecond: 1}
	daily := limiter.Policy{Name: "daily", Algorithm: limiter.FixedWindow, Limit: 100, Window: 24 * time.Hour}
	t0 := limitertest.T0
	reqs := []limiter.BackendRequest{
		{Policy: &user, Key: "u1", Now: t0, Cost: 1},
		{Policy: &tenant, Key: "t1", Now: t0, Cost: 1},
		{Policy: &daily, Key: "t1", Now: t0, Cost: 1},
	}
	out := make([]limiter.Decision, 3)
	calls = callCounter{}
	if err := b.Decide(ctx, reqs, out); err != nil {
		t.Fatal(err)
	}
	if calls.roundTrips.Load() != 1 || calls.evalsha.Load() != 3 {
		t.Errorf("round trips = %d, evalsha = %d; want 1 pipeline of 3", calls.roundTrips.Load(), calls.evalsha.Load())
	}
	for i, want := range []int64{1, 4, 99} {
		if !out[i].Allowed || out[i].Remaining != want || out[i].Policy != reqs[i].Policy.Name {
			t.Errorf("out[%d] = %+v, want allowed with remaining %d", i, out[i], want)
		}
	}
}

func TestDecideRejectsRequestWithoutPolicy(t *testing.T) {
	c := newClient(t, "127.0.0.1:1") // never dialled: the request fails first
	b, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]limiter.Decision, 2)
	for _, reqs := range [][]limiter.BackendRequest{
		{{Key: "k", Cost: 1}},
		{{Key: "k", Cost: 1}, {Policy: &limiter.Policy{Name: "x"}, Key: "k", Cost: 1}},
	} {
		if err := b.Decide(context.Background(), reqs, out); err == nil {
			t.Errorf("Decide(%+v) succeeded, want an error", reqs)
		}
	}
	if _, err := redislimit.New(c, redislimit.Config{KeyPrefix: "rl:{x}:"}); err == nil {
		t.Error("a key prefix with a hash tag was accepted")
	}
}

// usedMemory is Redis's INFO used_memory, in bytes.
func usedMemory(t *testing.T, c *goredis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// TestSlidingLogWithinMaxmemory is the third probe against a real redis-server
// with maxmemory and noeviction: sliding_log limit 100000 window 1h, new keys with cost
// 100000. Each call added 100,000 members (about 45 ms of Redis and 10 MB), its first
// write was a trim, so Redis 7 let the ZADD past maxmemory. Now a request is one member
// whatever its cost, and the scripts declare themselves (#!lua), so Redis refuses them
// with OOM before their first write once it is over maxmemory: used memory stays within
// one call of the limit.
func TestSlidingLogWithinMaxmemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	c := newClient(t, srv.Addr)
	b, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	limit := usedMemory(t, c) + 256<<10
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	p := limiter.Policy{Name: "big", Algorithm: limiter.SlidingLog, Limit: limiter.MaxLogLimit, Window: time.Hour, Backend: limiter.BackendRedis}
	l, err := b.Limiter(p)
	if err != nil {
		t.Fatal(err)
	}
	var oom, allowed int
	var peak int64
	for i := range 20_000 {
		d, err := l.AllowN(ctx, fmt.Sprintf("tenant-%d", i), time.Now(), limiter.MaxLogLimit)
		switch {
		case err != nil && strings.Contains(err.Error(), "OOM"):
			oom++
		case err != nil:
			t.Fatalf("call %d: %v", i, err)
		case d.Allowed:
			allowed++
		}
		if i%100 == 0 {
			peak = max(peak, usedMemory(t, c))
		}
		if oom > 10 {
			break
		}
	}
	peak = max(peak, usedMemory(t, c))
	if oom == 0 {
		t.Fatalf("no OOM refusal after %d admissions: the test did not reach maxmemory", allowed)
	}
	if peak > limit+64<<10 {
		t.Errorf("used memory %d past maxmemory %d by %d bytes", peak, limit, peak-limit)
	}
	if n, err := c.ZCard(ctx, b.Key(&p, "tenant-0")).Result(); err != nil || n != 1 {
		t.Errorf("a request of cost %d left %d members (%v), want 1", limiter.MaxLogLimit, n, err)
	}
	t.Logf("%d keys admitted at cost %d before OOM; used memory peaked %d bytes under maxmemory %d", allowed, limiter.MaxLogLimit, peak, limit)
}

// A sliding log written by an older slide (one member per unit, "id:i") is restarted once
// rather than failing every call on the new member format.
func TestSlidingLogOldFormatRestarts(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	b, _ := redislimit.New(c, redislimit.Config{})
	ctx := context.Background()
	p := limiter.Policy{Name: "old", Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute, Backend: limiter.BackendRedis}
	now := time.Now()
	for i := range 3 {
		c.ZAdd(ctx, b.Key(&p, "k"), goredis.Z{Score: float64(now.UnixMicro()), Member: fmt.Sprintf("abc:%d", i)})
	}
	l, _ := b.Limiter(p)
	d, err := l.AllowN(ctx, "k", now, 1)
	if err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("first call on an old-format log: %+v %v", d, err)
	}
}

// Concurrent fixed-window decisions on one server share script calls
// (Config.Pipelines) and stay exact: 32 callers, 4 keys of limit 300, 400
// requests each: exactly 300 admitted per key, in fewer script calls than
// decisions, and the counters hold what was admitted.
func TestCoalescedFixedWindowExact(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	var scriptCalls atomic.Int64
	b, err := redislimit.New(c, redislimit.Config{OnScriptCall: func(string) { scriptCalls.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	p := limiter.Policy{Name: "co", Algorithm: limiter.FixedWindow, Limit: 300, Window: time.Hour}
	const callers, perCaller, keys = 32, 50, 4
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range perCaller {
				k := (g + i) % keys
				out := make([]limiter.Decision, 1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := b.Decide(ctx, []limiter.BackendRequest{{Policy: &p, Key: "k" + strconv.Itoa(k), Cost: 1}}, out)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if out[0].Allowed {
					allowed[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		if n := allowed[k].Load(); n != 300 {
			t.Errorf("key %d: %d admitted of 400, want exactly 300", k, n)
		}
		if got, _ := c.Get(context.Background(), stateKey(t, c, b.Key(&p, "k"+strconv.Itoa(k)))).Result(); got != "300" {
			t.Errorf("key %d: counter %q, want 300 (denials are not counted)", k, got)
		}
	}
	if n := scriptCalls.Load(); n >= callers*perCaller {
		t.Errorf("%d script calls for %d decisions: concurrent calls were not gathered", n, callers*perCaller)
	} else {
		t.Logf("%d script calls for %d decisions", n, callers*perCaller)
	}
}

// Gathered fixed-window calls fail as fast as single ones when Redis dies: a
// refused dial answers the call, it does not wait out its timeout (each flush
// is a command, not a go-redis pipeline, which would hold later calls).
func TestCoalescedOutageFailsFast(t *testing.T) {
	srv := redistest.Start(t)
	c := goredis.NewClient(redislimit.Options(srv.Addr))
	t.Cleanup(func() { c.Close() })
	b, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := limiter.Policy{Name: "down", Algorithm: limiter.FixedWindow, Limit: 1000, Window: time.Minute}
	decide := func(k int) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.Decide(ctx, []limiter.BackendRequest{{Policy: &p, Key: "k" + strconv.Itoa(k), Cost: 1}}, make([]limiter.Decision, 1))
		return time.Since(start), err
	}
	if _, err := decide(0); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	decideDuringOutage(t, decide)
}

// TestFixedWindowWithinMaxmemory: over maxmemory under noeviction, the fixed
// window's scripts, one decision (fixed_window) and gathered ones
// (fixed_window_batch), are refused with OOM before they write (#!lua), and
// no counter is created.
func TestFixedWindowWithinMaxmemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	c := newClient(t, srv.Addr)
	b, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil { // already over it
		t.Fatal(err)
	}
	p := limiter.Policy{Name: "fw", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Minute, Backend: limiter.BackendRedis}
	l, err := b.Limiter(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AllowN(ctx, "one", time.Now(), 1); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("fixed_window over maxmemory: %v, want OOM", err)
	}
	cmd := c.EvalSha(ctx, redislimit.BatchScript().SHA, []string{b.Key(&p, "a") + ":0", b.Key(&p, "b") + ":0"}, "c", 1, 10, 0, 60_000_000, 1, 1)
	if err := cmd.Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("fixed_window_batch over maxmemory: %v, want OOM", err)
	}
	if n, _ := c.DBSize(ctx).Result(); n != 0 {
		t.Errorf("%d keys written over maxmemory, want 0", n)
	}
}
