package redislimit_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// declaredKeys records the KEYS of every script call a client sends.
type declaredKeys struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (k *declaredKeys) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (k *declaredKeys) record(cmd goredis.Cmder) {
	if n := cmd.Name(); n != "evalsha" && n != "eval" {
		return
	}
	args := cmd.Args() // evalsha SHA NUMKEYS KEY... ARG...
	numkeys, _ := args[2].(int)
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range args[3 : 3+numkeys] {
		k.keys[key.(string)] = true
	}
}

func (k *declaredKeys) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		k.record(cmd)
		return next(ctx, cmd)
	}
}

func (k *declaredKeys) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			k.record(cmd)
		}
		return next(ctx, cmds)
	}
}

// The fixed-window scripts touch only the keys they are given (Redis's
// scripting rules; Cluster checks declared keys): every command a script runs,
// as MONITOR shows it, names a key of its call's KEYS. Covers one decision,
// peeks, denials, coalesced calls and a pipeline of several requests.
func TestFixedWindowTouchesOnlyDeclaredKeys(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	// MONITOR on a raw connection: every command, those scripts run marked "lua".
	mon, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	if _, err := mon.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(mon)
	if l, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK") {
		t.Fatalf("MONITOR: %q, %v", l, err)
	}
	seen := make(chan []string, 1)
	go func() {
		var got []string
		for {
			l, err := rd.ReadString('\n')
			if err != nil || strings.Contains(l, `"PING" "end-of-test"`) {
				break
			}
			if strings.Contains(l, " lua] ") {
				got = append(got, l)
			}
		}
		seen <- got
	}()

	declared := &declaredKeys{keys: map[string]bool{}}
	p := limiter.Policy{Name: "fw", Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Minute}
	daily := limiter.Policy{Name: "daily", Algorithm: limiter.FixedWindow, Limit: 5, Window: 24 * time.Hour}
	for _, pipelines := range []int{0, -1} {
		c := newClient(t, srv.Addr)
		c.AddHook(declared)
		b, err := redislimit.New(c, redislimit.Config{Pipelines: pipelines, KeyPrefix: fmt.Sprintf("p%d:", pipelines)})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := b.Limiter(p)
		for i := range 5 { // admits, then denials
			if d, err := l.AllowN(ctx, "one", time.Now(), 1); err != nil || d.Allowed != (i < 3) {
				t.Fatalf("pipelines %d: call %d = %+v, %v", pipelines, i, d, err)
			}
		}
		if d, err := l.AllowN(ctx, "peek", time.Now(), 0); err != nil || !d.Allowed {
			t.Fatalf("peek = %+v, %v", d, err)
		}
		out := make([]limiter.Decision, 2)
		reqs := []limiter.BackendRequest{{Policy: &p, Key: "two", Cost: 1}, {Policy: &daily, Key: "two", Cost: 4}}
		if err := b.Decide(ctx, reqs, out); err != nil || !out[0].Allowed || out[1].Remaining != 1 {
			t.Fatalf("pipelines %d: Decide = %+v, %v", pipelines, out, err)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				out := make([]limiter.Decision, 1)
				if err := b.Decide(ctx, []limiter.BackendRequest{{Policy: &p, Key: "co" + string(rune('a'+g%3)), Cost: 1}}, out); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	plain := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer plain.Close()
	plain.Do(ctx, "PING", "end-of-test")
	var got []string
	select {
	case got = <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("MONITOR did not show the end of the test")
	}
	if len(got) < 20 {
		t.Fatalf("MONITOR showed %d script commands, want the test's (at least 20)", len(got))
	}
	for _, l := range got {
		// 1764600000.123456 [0 lua] "INCRBY" "rl:{one}:fw:fw:29410000" "1"
		f := strings.SplitN(l, `"`, 5)
		if len(f) >= 2 && f[1] == "TIME" {
			continue
		}
		if len(f) < 5 {
			t.Fatalf("MONITOR line %q", l)
		}
		if key := f[3]; !declared.keys[key] {
			t.Errorf("a script ran %s on %q, not in its KEYS (declared: %v)", f[1], key, declared.keys)
		}
	}
}

// A Backend whose idea of Redis's clock is an hour off names the wrong window;
// the script touches nothing and answers Redis's TIME, and the decision is
// asked again for Redis's window: the same answers as with the right clock,
// one extra round trip, and the next call names the right window at once.
func TestFixedWindowOtherClock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, pipelines := range []int{0, -1} {
		c := newClient(t, srv.Addr)
		var calls callCounter
		c.AddHook(&calls)
		b, err := redislimit.New(c, redislimit.Config{Pipelines: pipelines, KeyPrefix: "skew" + string(rune('0'+pipelines+1)) + ":"})
		if err != nil {
			t.Fatal(err)
		}
		p := limiter.Policy{Name: "fw", Algorithm: limiter.FixedWindow, Limit: 2, Window: time.Minute}
		for i, skew := range []time.Duration{time.Hour, -time.Hour, 0} {
			redislimit.SetClockSkew(b, skew)
			calls = callCounter{}
			out := make([]limiter.Decision, 1)
			err := b.Decide(ctx, []limiter.BackendRequest{{Policy: &p, Key: "k", Cost: 1}}, out)
			want := i < 2
			if err != nil || out[0].Allowed != want || out[0].ResetAfter <= 0 || out[0].ResetAfter > time.Minute {
				t.Errorf("pipelines %d, skew %s: %+v, %v; want allowed %v, reset within the minute", pipelines, skew, out[0], err, want)
			}
			if n, wantCalls := calls.evalsha.Load(), int64(2); skew == 0 && n != 1 || skew != 0 && n != wantCalls {
				t.Errorf("pipelines %d, skew %s: %d script calls", pipelines, skew, n)
			}
			if skew != 0 { // the reply taught the Backend Redis's clock
				calls = callCounter{}
				if err := b.Decide(ctx, []limiter.BackendRequest{{Policy: &p, Key: "peek", Cost: 0}}, out); err != nil || calls.evalsha.Load() != 1 {
					t.Errorf("pipelines %d: after skew %s, %d script calls (%v), want 1", pipelines, skew, calls.evalsha.Load(), err)
				}
			}
		}
		keys, _ := c.Keys(ctx, "skew"+string(rune('0'+pipelines+1))+":*").Result()
		if len(keys) != 1 {
			t.Errorf("pipelines %d: keys %q, want one window's counter", pipelines, keys)
		}
		// Several requests in one Decide (one script call, or a pipeline of them).
		daily := limiter.Policy{Name: "daily", Algorithm: limiter.FixedWindow, Limit: 5, Window: 24 * time.Hour}
		redislimit.SetClockSkew(b, 25*time.Hour)
		out := make([]limiter.Decision, 2)
		reqs := []limiter.BackendRequest{{Policy: &p, Key: "m", Cost: 1}, {Policy: &daily, Key: "m", Cost: 3}}
		if err := b.Decide(ctx, reqs, out); err != nil || !out[0].Allowed || out[0].Remaining != 1 || !out[1].Allowed || out[1].Remaining != 2 {
			t.Errorf("pipelines %d: two requests with the clock a day off: %+v, %v", pipelines, out, err)
		}
	}
}
