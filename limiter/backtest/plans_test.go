package backtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// A replay with plans, a calendar day in New York across the spring DST change and an
// org > team > user policy: each key gets its plan's daily limit, the day resets at local
// midnight (a 23-hour day), a level's denial charges no level, and the report names the
// denied keys' plans.
func TestReplayPlansCalendarLevels(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatalf("time zone missing (install tzdata): %v", err)
	}
	ps, err := limiter.ParsePlans([]byte(`plans:
  pro: {daily: {limit: 5}, org: {levels: [10, 6, 4]}}
  free: {daily: {limit: 2}}
keys:
  tenant-1: pro
  "trial-*": free
  org-1: pro
  "org-1/*": pro
`), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Plans: ps, Bucket: time.Hour, Policies: []limiter.Policy{
		{Name: "daily", Algorithm: limiter.FixedWindow, Limit: 3, Calendar: limiter.CalendarDay, Location: ny},
		{Name: "org", Algorithm: limiter.FixedWindow, Calendar: limiter.CalendarMonth, Location: ny,
			Levels: limiter.Levels{Separator: "/", N: 3, Limits: [limiter.MaxLevels]int64{5, 3, 2}}},
	}}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	replay := func(at time.Time, policy, key string, n int) {
		for i := 0; i < n; i++ {
			if err := r.Replay(ctx, Request{Time: at.Add(time.Duration(i) * time.Millisecond), Policy: policy, Key: key, Cost: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 23:00 EST on the 7th, then 00:30 EST and 23:30 EDT on the 8th (a 23-hour day), each 6
	// requests per tenant: tenant-1 (pro, 5 a day), trial-9 (free, 2), other (the policy's 3).
	for _, at := range []time.Time{
		time.Date(2026, 3, 7, 23, 0, 0, 0, ny),
		time.Date(2026, 3, 8, 0, 30, 0, 0, ny),
		time.Date(2026, 3, 8, 23, 30, 0, 0, ny),
	} {
		for i := 0; i < 6; i++ {
			for _, k := range []string{"tenant-1", "trial-9", "other"} {
				replay(at.Add(time.Duration(i)*time.Millisecond), "daily", k, 1)
			}
		}
	}
	// The 8th's two bursts share a day: tenant-1 gets 5 of 12 on it, 5 on the 7th.
	// org-1 (pro: 10 / 6 / 4): user-1 takes 4 of 6; user-2 the team's last 2 of 6; team-b's
	// user-3 takes 4 more (org at 10); user-4 is stopped by the org.
	base := time.Date(2026, 3, 20, 12, 0, 0, 0, ny)
	replay(base, "org", "org-1/team-a/user-1", 6)
	replay(base.Add(time.Second), "org", "org-1/team-a/user-2", 6)
	replay(base.Add(2*time.Second), "org", "org-1/team-b/user-3", 6)
	replay(base.Add(3*time.Second), "org", "org-1/team-c/user-4", 1)
	// org-2 has no plan: the policy's own 5 / 3 / 2.
	replay(base.Add(4*time.Second), "org", "org-2/team-a/user-1", 3)
	reps := r.Reports()
	daily, org := reps[0], reps[1]
	if daily.Allowed != 5+5+2+2+3+3 || daily.Denied != 54-20 {
		t.Errorf("daily: allowed %d denied %d, want 20 and 34", daily.Allowed, daily.Denied)
	}
	plans := map[string]string{}
	for _, k := range daily.TopDenied {
		plans[k.Key] = k.Plan
	}
	if plans["tenant-1"] != "pro" || plans["trial-9"] != "free" || plans["other"] != "" {
		t.Errorf("denied keys' plans %v", plans)
	}
	if org.Allowed != 4+2+4+0+2 || org.Denied != 2+4+2+1+1 {
		t.Errorf("org: allowed %d denied %d, want 12 and 10", org.Allowed, org.Denied)
	}
	if got := strings.Join([]string{daily.Timeline[0].Start.Format(time.RFC3339), daily.Timeline[1].Start.Format(time.RFC3339)}, " "); got != "2026-03-08T04:00:00Z 2026-03-08T05:00:00Z" {
		t.Errorf("denial timeline starts %s", got)
	}
	if _, err := New(Config{Plans: ps, Policies: cfg.Policies[:1]}); err == nil || !strings.Contains(err.Error(), `plans.yaml:2: plan "pro": unknown policy or rule "org"`) {
		t.Errorf("a plan naming a policy not replayed: %v", err)
	}
}
