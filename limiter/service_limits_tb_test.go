package limiter

import (
	"context"
	"testing"
	"time"
)

// A token bucket's reset is the time its tokens take to refill under the numbers in force:
// after capacity 5 at 0.1/s became 2 at 1/s, a bucket left with 1 token is full 1 s later
// (peek: ResetAfter 0, "t=0"), not when the old rate would have filled it (40 s on), and a
// denial half a second in says 0.5 s, as the Redis script (until_full of the refilled
// tokens) answers.
func TestSetLimitsTokenBucketReset(t *testing.T) {
	tb := Policy{Name: "tb", Algorithm: TokenBucket, Capacity: 5, RefillPerSecond: 0.1}
	s, err := NewService(Config{Policies: []Policy{tb}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	for _, k := range []string{"peek", "deny"} {
		if d, _ := s.AllowN(ctx, "tb", k, t0, 4); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("%s: cost 4 of 5: %+v", k, d)
		}
	}
	p := tb
	p.Capacity, p.RefillPerSecond = 2, 1
	if err := s.SetLimits([]Policy{p}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.AllowN(ctx, "tb", "peek", t0.Add(3*time.Second), 0)
	if d.Limit != 2 || d.Remaining != 2 || d.ResetAfter != 0 {
		t.Fatalf("peek 3 s after 2 at 1/s: limit %d remaining %d reset %v, want 2, 2 and 0 (full)", d.Limit, d.Remaining, d.ResetAfter)
	}
	d, _ = s.AllowN(ctx, "tb", "deny", t0.Add(500*time.Millisecond), 2)
	// RetryAfter may be a few ns short of 500 ms: the token slack (tokenSlack) holds it.
	if d.Allowed || d.Remaining != 1 || d.RetryAfter < 499*time.Millisecond || d.RetryAfter > 500*time.Millisecond || d.ResetAfter != 500*time.Millisecond {
		t.Fatalf("cost 2 with 1.5 tokens at 1/s: %+v, want denied, 1 left, retry and reset 500ms", d)
	}
}

// A leaky bucket's state is a time (docs/platform.md): 4 requests of capacity 5 at 0.1/s
// are 40 s of backlog, and still are at 1/s with capacity 2, so the next request waits
// 39 s (40 s plus its own 1 s, less the 2 s burst), never reporting remaining above 2.
func TestSetLimitsLeakyBucketKeepsTime(t *testing.T) {
	lb := Policy{Name: "lb", Algorithm: LeakyBucket, Capacity: 5, LeakPerSecond: 0.1}
	s, err := NewService(Config{Policies: []Policy{lb}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	if d, _ := s.AllowN(ctx, "lb", "k", t0, 4); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("cost 4 of 5: %+v", d)
	}
	p := lb
	p.Capacity, p.LeakPerSecond = 2, 1
	if err := s.SetLimits([]Policy{p}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.AllowN(ctx, "lb", "k", t0, 1)
	if d.Allowed || d.Limit != 2 || d.Remaining != 0 || d.RetryAfter != 39*time.Second || d.ResetAfter != 40*time.Second {
		t.Fatalf("after 2 at 1/s: %+v, want denied, limit 2, remaining 0, retry 39s, reset 40s", d)
	}
	if d, _ := s.AllowN(ctx, "lb", "k", t0.Add(39*time.Second), 1); !d.Allowed || d.Remaining > 2 {
		t.Fatalf("39 s on: %+v, want admitted", d)
	}
}
