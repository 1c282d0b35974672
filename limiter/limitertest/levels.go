package limitertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// LevelsPolicy is org > team > user: 5, 3 and 2 a minute.
func LevelsPolicy(name string, limits ...int64) limiter.Policy {
	p := limiter.Policy{Name: name, Algorithm: limiter.FixedWindow, Window: time.Minute,
		Levels: limiter.Levels{Separator: "/", N: len(limits)}}
	copy(p.Levels.Limits[:], limits)
	return p
}

// testLevels: each request charges its org, team and user; a denial names the first level
// without room and charges no level.
func testLevels(t *testing.T, f Factory) {
	l := f(t, LevelsPolicy("org-budget", 5, 3, 2))
	ctx := context.Background()
	for i, s := range []struct {
		key     string
		allowed bool
		level   string
		limit   int64
		left    int64
	}{
		{"org-1/team-a/user-7", true, "", 2, 1},
		{"org-1/team-a/user-7", true, "", 2, 0},
		{"org-1/team-a/user-7", false, "org-1/team-a/user-7", 2, 0}, // user's 2 spent
		{"org-1/team-a/user-8", true, "", 3, 0},                     // team-a: 3 of 3
		{"org-1/team-a/user-8", false, "org-1/team-a", 3, 0},
		{"org-1/team-b/user-1", true, "", 5, 1}, // org: 4 of 5 (the denials charged nothing)
		{"org-1/team-b/user-2", true, "", 5, 0},
		{"org-1/team-b/user-3", false, "org-1", 5, 0},
		{"org-2", true, "", 5, 4}, // one level: the org alone
	} {
		d, err := l.AllowN(ctx, s.key, T0.Add(time.Duration(i)*time.Second), 1)
		if err != nil {
			t.Fatalf("step %d %s: %v", i, s.key, err)
		}
		if d.Allowed != s.allowed || d.Level != s.level || d.Limit != s.limit || d.Remaining != s.left {
			t.Errorf("step %d %s: allowed=%v level=%q limit=%d remaining=%d, want %v %q %d %d",
				i, s.key, d.Allowed, d.Level, d.Limit, d.Remaining, s.allowed, s.level, s.limit, s.left)
		}
		if !s.allowed && d.RetryAfter != 60*time.Second-time.Duration(i)*time.Second {
			t.Errorf("step %d: retry %s, want the window's end", i, d.RetryAfter)
		}
	}
	if d, err := l.AllowN(ctx, "org-1/team-b/user-3", T0.Add(time.Minute), 1); err != nil || !d.Allowed {
		t.Errorf("next window: %+v %v, want allowed", d, err)
	}
	if _, err := l.AllowN(ctx, "/team/user", T0, 1); err == nil {
		t.Error("a key whose first level is empty was decided, want ErrInvalidKey")
	}
}

// testLevelsConcurrent: 8 goroutines decide 16 users of 4 teams of one org at once; no
// level is ever charged past its limit, and the org, which the teams and users could
// overfill, ends exactly full.
func testLevelsConcurrent(t *testing.T, f Factory) {
	l := f(t, LevelsPolicy("org-budget-c", 40, 15, 5))
	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 48; i++ {
				team, user := (i+g)%4, (i/4+g)%4
				key := fmt.Sprintf("org-1/team-%d/user-%d", team, user)
				d, err := l.AllowN(context.Background(), key, T0, 1)
				if err != nil {
					errs <- err
					return
				}
				if d.Allowed {
					mu.Lock()
					counts["org-1"]++
					counts[fmt.Sprintf("org-1/team-%d", team)]++
					counts[key]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, n := range counts {
		limit := map[int]int{0: 40, 1: 15, 2: 5}[strings.Count(k, "/")]
		if n > limit {
			t.Errorf("%s admitted %d, over its limit %d", k, n, limit)
		}
	}
	if counts["org-1"] != 40 {
		t.Errorf("org admitted %d of 384 requests, want exactly 40", counts["org-1"])
	}
}
