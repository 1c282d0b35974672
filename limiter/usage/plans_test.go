package usage_test

import (
	"context"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
)

// A plan sets a usage rule's max per key through the Service (CheckMax): tenant-1 on pro
// may spend 5000 an hour, tenant-2 without a plan the rule's 1000; the denial's RetryAfter
// is the plan's bound's.
func TestPlanSetsRuleMax(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, usage.Rule{Name: "tenant-quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1000})
	s, err := limiter.NewService(limiter.Config{Checkers: []limiter.Checker{c}})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := limiter.ParsePlans([]byte("plans:\n  pro: {tenant-quota: {max: 5000}}\nkeys:\n  tenant-1: pro\n"), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPlans(ps); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ { // 3000 each over half an hour
		at := t0.Add(time.Duration(i) * time.Minute)
		observe(t, st, at, "cost", "tenant-1", 100, 1)
		observe(t, st, at, "cost", "tenant-2", 100, 1)
	}
	now := t0.Add(30 * time.Minute)
	d1, err := s.AllowN(context.Background(), "tenant-quota", "tenant-1", now, 1)
	if err != nil || !d1.Allowed || d1.Limit != 5000 || d1.Remaining != 2000 || d1.Plan != "pro" {
		t.Errorf("tenant-1 (pro): %+v %v, want allowed, limit 5000, 2000 left, plan pro", d1, err)
	}
	d2, err := s.AllowN(context.Background(), "tenant-quota", "tenant-2", now, 1)
	if err != nil || d2.Allowed || d2.Limit != 1000 || d2.Plan != "" || d2.RetryAfter <= 0 {
		t.Errorf("tenant-2 (no plan): %+v %v, want denied at the rule's 1000", d2, err)
	}
	bad, _ := limiter.ParsePlans([]byte("plans:\n  pro: {tenant-quota: {limit: 5}}\n"), "plans.yaml")
	if err := s.SetPlans(bad); err == nil {
		t.Error("a plan giving a usage rule a limit was accepted")
	}
}
