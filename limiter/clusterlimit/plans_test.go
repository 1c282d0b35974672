package clusterlimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limitertest"
)

const testPlans = `plans:
  gold:
    api: {limit: 7}
    daily: {limit: 6}
    bucket: {capacity: 4}
    org: {levels: [9, 5, 3]}
keys:
  tenant-gold: gold
  org-gold: gold
  "vip-*": gold
`

func testPolicies() []limiter.Policy {
	return []limiter.Policy{
		{Name: "api", Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Minute},
		{Name: "daily", Algorithm: limiter.FixedWindow, Limit: 4, Calendar: limiter.CalendarDay},
		{Name: "bucket", Algorithm: limiter.TokenBucket, Capacity: 2, RefillPerSecond: 0.01},
		limitertest.LevelsPolicy("org", 6, 4, 2),
	}
}

// TestPlansAndLevelsOverThreeInstances (issue #30: "plans, calendar windows and levels of the
// quota issue work here too"): the same requests decided by three instances of backend
// cluster, each sent to the next instance, and by one Service of backend memory with the
// same plans give the same decisions: a plan's numbers reach the owner, an org's levels are
// decided together at the org's owner, and a denial names its level and its plan.
func TestPlansAndLevelsOverThreeInstances(t *testing.T) {
	_, _, ins, oracle := plansOverThree(t)
	keys := map[string][]string{
		"api":    {"tenant-gold", "tenant-plain", "vip-1"},
		"daily":  {"tenant-gold", "tenant-plain"},
		"bucket": {"tenant-gold", "tenant-plain"},
		"org": {"org-gold/team-a/u1", "org-gold/team-a/u2", "org-gold/team-b/u1", "org-plain/team-a/u1",
			"org-plain/team-b/u2", "org-plain/team-b/u3", "org-gold"},
	}
	ctx := context.Background()
	forwarded := int64(0)
	step := 0
	for round := range 12 {
		for _, p := range []string{"api", "daily", "bucket", "org"} {
			for _, k := range keys[p] {
				now := limitertest.T0.Add(time.Duration(step) * 50 * time.Millisecond)
				in := ins[step%len(ins)]
				step++
				got, err := in.svc.AllowN(ctx, p, k, now, 1)
				if err != nil {
					t.Fatalf("round %d %s %s: %v", round, p, k, err)
				}
				want, err := oracle.AllowN(ctx, p, k, now, 1)
				if err != nil {
					t.Fatal(err)
				}
				g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want)
				if g != w {
					t.Fatalf("round %d %s %s:\n got %s\nwant %s", round, p, k, g, w)
				}
			}
		}
	}
	for _, in := range ins {
		forwarded += in.b.sent.Load()
	}
	if forwarded == 0 {
		t.Fatal("no decision was forwarded: the test decided everything locally")
	}
	// Every key of org-gold lives on one owner, with its org's counter.
	holders := 0
	for _, in := range ins {
		n := 0
		in.b.Memory("org").Export(limitertest.T0, func(k string) bool { return strings.HasPrefix(k, "org-gold") },
			func(string, int64, []byte) { n++ })
		if n > 0 {
			holders++
		}
	}
	if holders != 1 {
		t.Errorf("org-gold's levels are held by %d instances, want 1", holders)
	}
}

// TestPlansThatDisagreeAreRefused: a caller whose plans give a key other numbers than the
// owner's plans do is answered "policy differs" (on_backend_error: closed, unavailable), and
// the owner counts nothing; a key both agree on is decided.
func TestPlansThatDisagreeAreRefused(t *testing.T) {
	var cps []limiter.Policy
	for _, p := range testPolicies() {
		cps = append(cps, clusterPolicy(p, limiter.FailClosed, 10*time.Second))
	}
	tp, ins := startGroup(t, 2, cps...)
	const key = "tenant-gold"
	owner, caller := ownerOf(t, tp, ins, key)
	mine, err := limiter.ParsePlans([]byte(testPlans), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := limiter.ParsePlans([]byte(strings.Replace(testPlans, "api: {limit: 7}", "api: {limit: 8}", 1)), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := caller.svc.SetPlans(mine); err != nil {
		t.Fatal(err)
	}
	if err := owner.svc.SetPlans(theirs); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := caller.svc.Allow(ctx, "api", key); !errors.Is(err, limiter.ErrBackendUnavailable) || !strings.Contains(err.Error(), "policy differs") {
		t.Errorf("a plan that differs at the owner: %v; want ErrBackendUnavailable naming it", err)
	}
	if n := owner.b.Memory("api").Len(); n != 0 {
		t.Errorf("the owner counted %d keys decided by other numbers", n)
	}
	if d, err := caller.svc.Allow(ctx, "bucket", key); err != nil || !d.Allowed || d.Limit != 4 || d.Plan != "gold" {
		t.Errorf("a plan both agree on: %+v, %v; want allowed, capacity 4, plan gold", d, err)
	}
}

// plansOverThree starts 3 instances with testPolicies as cluster policies (their order
// kept) and testPlans, and a memory Service of the same policies and plans as the oracle.
func plansOverThree(t *testing.T) ([]limiter.Policy, *topo, []*instance, *limiter.Service) {
	t.Helper()
	plans, err := limiter.ParsePlans([]byte(testPlans), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cps []limiter.Policy
	for _, p := range testPolicies() {
		cps = append(cps, clusterPolicy(p, limiter.FailClosed, 10*time.Second))
	}
	tp, ins := startGroup(t, 3, cps...)
	for _, in := range ins {
		if err := in.svc.SetPlans(plans); err != nil {
			t.Fatal(err)
		}
	}
	oracle, err := limiter.NewService(limiter.Config{Policies: testPolicies()})
	if err != nil {
		t.Fatal(err)
	}
	if err := oracle.SetPlans(plans); err != nil {
		t.Fatal(err)
	}
	return cps, tp, ins, oracle
}
