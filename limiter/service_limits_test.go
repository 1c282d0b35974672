package limiter

import (
	"context"
	"errors"
	"testing"
	"time"
)

// SetLimits changes a policy's numbers and keeps its count: 3 used of 5 leave 1 of 4 and
// none of 2; plans resolve over the new numbers; a new window is refused, nothing changed.
func TestSetLimits(t *testing.T) {
	fw := Policy{Name: "fw", Algorithm: FixedWindow, Limit: 5, Window: time.Minute}
	s, err := NewService(Config{Policies: []Policy{fw, {Name: "other", Algorithm: FixedWindow, Limit: 1, Window: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(1_700_000_040, 0) // 0 s into a minute
	for range 3 {
		if d, _ := s.AllowN(ctx, "fw", "k", t0, 1); !d.Allowed {
			t.Fatal("denied under the limit")
		}
	}
	set := func(limit int64) {
		t.Helper()
		p := fw
		p.Limit = limit
		if err := s.SetLimits([]Policy{p}); err != nil {
			t.Fatal(err)
		}
	}
	set(4)
	if d, _ := s.AllowN(ctx, "fw", "k", t0, 0); d.Limit != 4 || d.Remaining != 1 {
		t.Fatalf("after 5 → 4: limit %d remaining %d, want 4 and 1 (the count of 3 kept)", d.Limit, d.Remaining)
	}
	if p, _ := s.Policy("fw"); p.Limit != 4 {
		t.Fatalf("Policy says limit %d, want 4", p.Limit)
	}
	set(2)
	if d, _ := s.AllowN(ctx, "fw", "k", t0, 1); d.Allowed {
		t.Fatal("after 4 → 2 with 3 used: admitted")
	}
	if d, _ := s.AllowN(ctx, "other", "k", t0, 1); !d.Allowed || d.Limit != 1 {
		t.Fatalf("a policy not given keeps its numbers: %+v", d)
	}
	if err := s.SetPlans(mustPlans(t, "plans:\n  big: {fw: {limit: 10}}\nkeys:\n  vip: big\n")); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.AllowN(ctx, "fw", "vip", t0, 0); d.Limit != 10 {
		t.Fatalf("a plan's numbers win: limit %d", d.Limit)
	}
	set(5) // back to the policy's own numbers, plans kept
	if d, _ := s.AllowN(ctx, "fw", "k", t0, 1); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after 2 → 5: %+v, want admitted with 1 left", d)
	}
	if d, _ := s.AllowN(ctx, "fw", "vip", t0, 0); d.Limit != 10 || d.Plan != "big" {
		t.Fatalf("plans lost by SetLimits: %+v", d)
	}

	p := fw
	p.Limit, p.Window = 1, time.Hour
	if err := s.SetLimits([]Policy{p}); !errors.Is(err, ErrNotNumbers) {
		t.Fatalf("a new window: %v, want ErrNotNumbers", err)
	}
	if err := s.SetLimits([]Policy{{Name: "nope", Algorithm: FixedWindow, Limit: 1, Window: time.Minute}}); !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("an unknown policy: %v, want ErrUnknownPolicy", err)
	}
	if d, _ := s.AllowN(ctx, "fw", "k", t0, 0); d.Limit != 5 {
		t.Fatalf("a refused SetLimits changed the limit to %d", d.Limit)
	}
}
