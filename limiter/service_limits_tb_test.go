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
	if d.Allowed || d.Remaining != 1 || !nearly(d.RetryAfter, 500*time.Millisecond) || d.ResetAfter != 500*time.Millisecond {
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

// A token bucket's denial solved under one rate is not the answer under another: cut from
// 1/s to 0.1/s after a denial named t0+1s, a request at t0+1.5s (0.15 tokens) is denied
// with the 8.5 s the new rate needs, not with a RetryAfter of 0 (the old instant, past);
// raised to 10/s, a request at t0+0.2s (2 tokens at the new rate) is admitted, not held
// to the old rate's t0+1s.
func TestSetLimitsTokenBucketDenial(t *testing.T) {
	tb := Policy{Name: "tb", Algorithm: TokenBucket, Capacity: 5, RefillPerSecond: 1}
	s, err := NewService(Config{Policies: []Policy{tb}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	for _, k := range []string{"cut", "raised"} {
		if d, _ := s.AllowN(ctx, "tb", k, t0, 5); !d.Allowed {
			t.Fatalf("%s: cost 5 of 5: %+v", k, d)
		}
		if d, _ := s.AllowN(ctx, "tb", k, t0, 1); d.Allowed || !nearly(d.RetryAfter, time.Second) {
			t.Fatalf("%s: empty bucket: %+v, want denied for 1s", k, d)
		}
	}
	set := func(rate float64) {
		t.Helper()
		p := tb
		p.RefillPerSecond = rate
		if err := s.SetLimits([]Policy{p}); err != nil {
			t.Fatal(err)
		}
	}
	set(0.1)
	for _, cost := range []int64{1, 0} {
		d, _ := s.AllowN(ctx, "tb", "cut", t0.Add(1500*time.Millisecond), cost)
		if d.Allowed || !nearly(d.RetryAfter, 8500*time.Millisecond) {
			t.Fatalf("cost %d at 0.1/s with 0.15 tokens: %+v, want denied for 8.5s", cost, d)
		}
	}
	set(10)
	if d, _ := s.AllowN(ctx, "tb", "raised", t0.Add(200*time.Millisecond), 1); !d.Allowed {
		t.Fatalf("at 10/s 200ms after empty: %+v, want admitted", d)
	}
}

// nearly reports that got is want or up to a microsecond short of it: a bucket within the
// token slack (tokenSlack) of a whole token holds it, a few ns early at these rates.
func nearly(got, want time.Duration) bool { return got <= want && got > want-time.Microsecond }

// The flood fast path (a cost-1 denial before the kept instant) answers by the numbers in
// force too: capacity cut from 5 to 2 at the same 1/s, an emptied bucket half a second
// on is full 1.5 s later, not 4.5 s (the old capacity's).
func TestSetLimitsTokenBucketFloodReset(t *testing.T) {
	tb := Policy{Name: "tb", Algorithm: TokenBucket, Capacity: 5, RefillPerSecond: 1}
	s, err := NewService(Config{Policies: []Policy{tb}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	s.AllowN(ctx, "tb", "k", t0, 5)
	if d, _ := s.AllowN(ctx, "tb", "k", t0, 1); d.Allowed {
		t.Fatalf("empty bucket: %+v, want denied", d)
	}
	p := tb
	p.Capacity = 2
	if err := s.SetLimits([]Policy{p}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first denial under the new numbers, and the next from what it kept
		d, _ := s.AllowN(ctx, "tb", "k", t0.Add(500*time.Millisecond), 1)
		if d.Allowed || !nearly(d.RetryAfter, 500*time.Millisecond) || d.ResetAfter != 1500*time.Millisecond {
			t.Fatalf("capacity 2 at 1/s with 0.5 tokens: %+v, want denied, retry 500ms, reset 1.5s", d)
		}
	}
}
