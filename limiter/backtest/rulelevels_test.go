package backtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

// A usage rule with levels replays as the server decides it: a request is denied at the
// first level over its max, the level named; a plans file giving the rule a max is refused
// with its line, as at serve.
func TestUsageRuleLevelsReplay(t *testing.T) {
	_, rules, err := usage.ParseFile([]byte(`rules:
  - {name: org-quota, metric: cost, agg: sum, window: 1h, levels: {separator: "/", max: [1000, 500, 200]}}
`), "quota.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stores := window.StoreConfig{Ring: window.RingConfig{Slot: 10 * time.Second, Slots: 30},
		Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60}}}
	log := `{"ts":"2025-11-30T10:00:00Z","key":"org-1/team-a/user-1","metric":"cost","value":150}
{"ts":"2025-11-30T10:01:00Z","key":"org-1/team-a/user-2"}
{"ts":"2025-11-30T10:02:00Z","key":"org-1/team-a/user-2","metric":"cost","value":400}
{"ts":"2025-11-30T10:03:00Z","key":"org-1/team-a/user-3"}
{"ts":"2025-11-30T10:03:00Z","key":"org-1/team-b/user-1"}
{"ts":"2025-11-30T10:04:00Z","key":"org-1/team-b/user-1","metric":"cost","value":460}
{"ts":"2025-11-30T10:05:00Z","key":"org-1/team-c/user-1"}
`
	var levels []string
	r, err := New(Config{Rules: rules, Store: stores, OnDecision: func(_ Request, _ string, d limiter.Decision, err error) {
		if err != nil {
			t.Error(err)
		}
		levels = append(levels, d.Level)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ReadLog(strings.NewReader(log), func(req Request) error { return r.Replay(context.Background(), req) }); err != nil {
		t.Fatal(err)
	}
	// user-2 at 10:01: team 150, allowed; user-3 at 10:03: team 550 > 500; team-b's user:
	// org 550, allowed; team-c's at 10:05: org 1010 > 1000.
	if want := []string{"", "org-1/team-a", "", "org-1"}; strings.Join(levels, ",") != strings.Join(want, ",") {
		t.Fatalf("levels %q, want %q", levels, want)
	}
	if rep := r.Reports()[0]; rep.Allowed != 2 || rep.Denied != 2 {
		t.Fatalf("report %+v", rep)
	}

	ps, err := limiter.ParsePlans([]byte("plans:\n  pro: {org-quota: {max: 5000}}\nkeys:\n  org-1: pro\n"), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Rules: rules, Store: stores, Plans: ps}); err == nil || !strings.Contains(err.Error(), "plans.yaml:2") ||
		!strings.Contains(err.Error(), `rule "org-quota" has levels`) {
		t.Fatalf("a plan's max for a rule with levels: %v, want refused at plans.yaml:2", err)
	}
}
