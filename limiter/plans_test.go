package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const goodPlans = `plans:
  free: {daily-requests: {limit: 2}, burst: {capacity: 1}}
  pro:  {daily-requests: {limit: 5}}
keys:
  tenant-1: pro
  "trial-*": free
  "trial-vip-*": pro
`

func plansService(t *testing.T, reg prometheus.Registerer) *Service {
	t.Helper()
	s, err := NewService(Config{Registerer: reg, Policies: []Policy{
		{Name: "daily-requests", Algorithm: FixedWindow, Limit: 3, Calendar: CalendarDay},
		{Name: "burst", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustPlans(t *testing.T, src string) *Plans {
	t.Helper()
	ps, err := ParsePlans([]byte(src), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// Each key gets its plan's limit (exact beats glob, the more specific glob beats the
// other), a key without a plan the policy's own, and every decision names the plan.
func TestPlansDecide(t *testing.T) {
	s := plansService(t, nil)
	if err := s.SetPlans(mustPlans(t, goodPlans)); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		key, plan string
		limit     int64
	}{
		{"tenant-1", "pro", 5}, {"trial-7", "free", 2}, {"trial-vip-1", "pro", 5}, {"someone", "", 3},
	} {
		admitted := 0
		var last Decision
		for range 10 {
			d, err := s.AllowN(context.Background(), "daily-requests", c.key, now, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
			last = d
		}
		if int64(admitted) != c.limit || last.Limit != c.limit || last.Plan != c.plan {
			t.Errorf("%s: admitted %d, limit %d, plan %q; want %d, %d, %q", c.key, admitted, last.Limit, last.Plan, c.limit, c.limit, c.plan)
		}
	}
	// The free plan's capacity 1 refuses a cost of 2 as over its quota; the policy's own 10 does not.
	if _, err := s.AllowN(context.Background(), "burst", "trial-3", now, 2); !errors.Is(err, ErrCostOverLimit) {
		t.Errorf("cost 2 on free's capacity 1: %v, want ErrCostOverLimit", err)
	}
	if d, err := s.AllowN(context.Background(), "burst", "tenant-1", now, 2); err != nil || !d.Allowed || d.Limit != 10 || d.Plan != "pro" {
		t.Errorf("pro does not list burst: got %+v %v, want the policy's capacity 10 named pro", d, err)
	}
}

// Bad plans are refused with file:line, every problem at once, and the plans in use stay.
func TestPlansErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"negative", "plans:\n  free: {daily-requests: {limit: -1}}\n", []string{`plans.yaml:2: plan "free": "daily-requests": limit -1 is negative`}},
		{"duplicate key", "plans:\n  free: {daily-requests: {limit: 1}}\nkeys:\n  a: free\n  a: free\n", []string{`plans.yaml:5: key "a" given twice (first at plans.yaml:4)`}},
		{"glob to nothing listed", "plans:\n  free: {daily-requests: {limit: 1}}\nkeys:\n  \"t-*\": gold\n", []string{`plans.yaml:4: glob "t-*" names plan "gold", which is not listed under plans: (free)`}},
		{"unknown field", "plans:\n  free: {daily-requests: {limt: 1}}\n", []string{`plans.yaml:2: plan "free": "daily-requests": unknown field "limt"`}},
		{"not yaml", "plans: [\n", []string{"plans.yaml:1: not YAML"}},
		// 0 was read as "not given" and the policy's own number applied: a plan meant to
		// block (limit: 0) admitted the policy's 100 a day.
		{"zero limit", "plans:\n  blocked: {daily-requests: {limit: 0}}\n", []string{`plans.yaml:2: plan "blocked": "daily-requests": limit 0: must be at least 1 (leave it out to keep the policy's own)`}},
		{"zero rate", "plans:\n  blocked:\n    burst: {capacity: 0, refill_per_second: 0}\n", []string{
			`plans.yaml:3: plan "blocked": "burst": capacity 0: must be at least 1`,
			`plans.yaml:3: plan "blocked": "burst": refill_per_second 0: must be above 0`}},
	} {
		_, err := ParsePlans([]byte(c.yaml), "plans.yaml")
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) || !errors.Is(err, ErrInvalidPlans) {
				t.Errorf("%s: got %v, want %q", c.name, err, w)
			}
		}
	}
	reg := prometheus.NewRegistry()
	s := plansService(t, reg)
	if err := s.SetPlans(mustPlans(t, goodPlans)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"plans:\n  gold: {hourly: {limit: 1}}\n", `plans.yaml:2: plan "gold": unknown policy or rule "hourly" (known: daily-requests, burst)`},
		{"plans:\n  gold:\n    burst: {capacity: 5, limit: 3}\n", `plans.yaml:3: plan "gold": policy "burst": limit: does not apply to token_bucket`},
		{"plans:\n  gold:\n    daily-requests: {max: 3}\n", `plans.yaml:3: plan "gold": max applies to usage rules`},
	} {
		err := s.SetPlans(mustPlans(t, c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if s.PlanOf("tenant-1") != "pro" {
		t.Errorf("a refused update replaced the plans: tenant-1 is on %q", s.PlanOf("tenant-1"))
	}
	if got := testutil.ToFloat64(s.metrics.plans.WithLabelValues("file", "refused")); got != 3 {
		t.Errorf("refused updates counted %v, want 3", got)
	}
}

// The topic's plans win over the file's, a plan the file does not list is refused and the
// key's plan kept, and a file reload keeps the topic's.
func TestKeyPlans(t *testing.T) {
	s := plansService(t, nil)
	if err := s.SetKeyPlans(map[string]string{"tenant-1": "pro"}); !errors.Is(err, ErrUnknownPlan) {
		t.Errorf("no plans file: %v, want ErrUnknownPlan", err)
	}
	if err := s.SetPlans(mustPlans(t, goodPlans)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetKeyPlans(map[string]string{"tenant-1": "free", "trial-2": "pro"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetKeyPlans(map[string]string{"tenant-1": "gold"}); !errors.Is(err, ErrUnknownPlan) {
		t.Errorf("plan gold: %v, want ErrUnknownPlan", err)
	}
	if s.PlanOf("tenant-1") != "free" || s.PlanOf("trial-2") != "pro" || s.PlanOf("trial-3") != "free" {
		t.Errorf("plans %q %q %q, want free pro free", s.PlanOf("tenant-1"), s.PlanOf("trial-2"), s.PlanOf("trial-3"))
	}
	if err := s.SetPlans(mustPlans(t, goodPlans)); err != nil || s.PlanOf("tenant-1") != "free" {
		t.Errorf("after a file reload tenant-1 is on %q (%v), want the topic's free", s.PlanOf("tenant-1"), err)
	}
	if err := s.SetKeyPlans(map[string]string{"tenant-1": ""}); err != nil || s.PlanOf("tenant-1") != "pro" {
		t.Errorf("after the topic dropped tenant-1 it is on %q (%v), want the file's pro", s.PlanOf("tenant-1"), err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		p, k string
		ok   bool
	}{
		{"trial-*", "trial-1", true}, {"trial-*", "trial-", true}, {"trial-*", "tria", false},
		{"org-1/*", "org-1/team/user", true}, {"*-x-*", "a-x-b", true}, {"*-x-*", "a-y-b", false},
		{"a?c", "abc", true}, {"a?c", "ac", false}, {"*", "", true}, {"**a", "bba", true}, {"a*b*c", "abxbc", true}, {"a*b*c", "acb", false},
	} {
		if got := globMatch(c.p, c.k); got != c.ok {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.p, c.k, got, c.ok)
		}
	}
}

func FuzzParsePlans(f *testing.F) {
	f.Add([]byte(goodPlans))
	f.Add([]byte("plans:\n  free: {daily-requests: {limit: -1}}\nkeys:\n  a: free\n  a: free\n"))
	f.Add([]byte("plans: {x: 1}\nkeys: [1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := ParsePlans(data, "f.yaml")
		if err != nil {
			if !errors.Is(err, ErrInvalidPlans) {
				t.Fatalf("error %v does not wrap ErrInvalidPlans", err)
			}
			return
		}
		for _, k := range []string{"tenant-1", "trial-x", ""} {
			ps.Lookup(k)
		}
	})
}

// Each level's limit comes from the plan of that level's own key: org-1 on pro gets pro's
// org limit whichever of its users asks, a user on pro pro's user limit, a team without a
// plan the policy's team limit.
func TestPlansPerLevel(t *testing.T) {
	s, err := NewService(Config{Policies: []Policy{{Name: "lv", Algorithm: FixedWindow, Window: time.Minute,
		Levels: Levels{Separator: "/", N: 3, Limits: [MaxLevels]int64{5, 3, 2}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPlans(mustPlans(t, "plans:\n  pro: {lv: {levels: [8, 6, 3]}}\nkeys:\n  org-1: pro\n  org-1/team-a/vip: pro\n")); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_764_489_600, 0)
	ctx := context.Background()
	for i, c := range []struct {
		key     string
		allowed bool
		level   string
	}{
		{"org-1/team-a/vip", true, ""}, {"org-1/team-a/vip", true, ""}, {"org-1/team-a/vip", true, ""}, // pro's user 3
		{"org-1/team-a/vip", false, "org-1/team-a"},                // team-a (no plan): the policy's 3
		{"org-1/team-b/u", true, ""}, {"org-1/team-b/u", true, ""}, // the policy's user 2
		{"org-1/team-b/u", false, "org-1/team-b/u"},
		{"org-1/team-c/u", true, ""}, {"org-1/team-c/u", true, ""}, // org-1: 7 of pro's 8
		{"org-1/team-d/u", true, ""},
		{"org-1/team-d/u", false, "org-1"},
	} {
		d, err := s.AllowN(ctx, "lv", c.key, now, 1)
		if err != nil || d.Allowed != c.allowed || d.Level != c.level {
			t.Errorf("step %d %s: allowed=%v level=%q (%v), want %v %q", i, c.key, d.Allowed, d.Level, err, c.allowed, c.level)
		}
	}
	q, err := s.Quota(ctx, "lv", "org-1/team-b/u", now)
	if err != nil || len(q.Levels) != 3 || q.Levels[0].Limit != 8 || q.Levels[1].Limit != 3 || q.Levels[2].Limit != 2 || q.Plan != "" {
		t.Errorf("quota %+v %v, want levels 8 (pro), 3, 2 and no plan for the key", q, err)
	}
}

// TestClusterPoliciesTakePlansAndLevels (issue #30: "plans, calendar windows and levels of
// the quota issue work here too"): a cluster policy loads with levels and takes a plan's
// numbers; its keys are placed by their first level (RouteKey), so one owner holds an
// org's every level.
func TestClusterPoliciesTakePlansAndLevels(t *testing.T) {
	ps, err := ParsePolicies([]byte("policies:\n  - {name: org, algorithm: fixed_window, window: 60s, backend: cluster, levels: {separator: /, limits: [50, 30]}}\n"), "p.yaml")
	if err != nil {
		t.Fatalf("levels on a cluster policy: %v", err)
	}
	for key, want := range map[string]string{"org-1/team-a/u": "org-1", "org-1": "org-1", "": ""} {
		if got := ps[0].RouteKey(key); got != want {
			t.Errorf("RouteKey(%q) = %q, want %q", key, got, want)
		}
	}
	one := Policy{Name: "api", Algorithm: FixedWindow, Limit: 10, Window: time.Minute, Backend: BackendCluster}
	if got := one.RouteKey("org-1/team-a"); got != "org-1/team-a" {
		t.Errorf("RouteKey without levels = %q", got)
	}
	l := PlanLimits{Limit: 100, Source: "plans.yaml:3"}
	if p, err := l.Apply(one); err != nil || p.Limit != 100 {
		t.Errorf("a plan for a cluster policy: %+v, %v", p, err)
	}
}

// TestPlanUpdatesStartAtZero: slide_limiter_plan_updates_total has every source and result
// at 0 from the start, so increase(…{result="refused"}[10m]) > 0 sees the first refused
// reload of a plans file, which would otherwise appear at 1 with nothing to rise from.
func TestPlanUpdatesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	plansService(t, reg)
	want := strings.NewReader(`# HELP slide_limiter_plan_updates_total Plan updates by source (file: a plans file loaded or reloaded; topic: a plans-topic record) and result (applied, or refused: the old plans kept).
# TYPE slide_limiter_plan_updates_total counter
slide_limiter_plan_updates_total{result="applied",source="file"} 0
slide_limiter_plan_updates_total{result="applied",source="topic"} 0
slide_limiter_plan_updates_total{result="refused",source="file"} 0
slide_limiter_plan_updates_total{result="refused",source="topic"} 0
`)
	if err := testutil.GatherAndCompare(reg, want, MetricPlanUpdates); err != nil {
		t.Error(err)
	}
}
