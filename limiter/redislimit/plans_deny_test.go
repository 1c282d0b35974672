package redislimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// A key denied under a small plan and then moved to a bigger one, by the plans topic
// (SetKeyPlans) or a new plans file (SetPlans), is admitted at once, as a limit raised by
// SetLimits is: the deny cache held the small plan's denial until its window ended.
// SetLimits's numbers, raised or lowered, are followed too.
func TestDenyCacheFollowsPlanChange(t *testing.T) {
	srv := redistest.Start(t)
	for _, how := range []string{"topic", "file", "limits"} {
		t.Run(how, func(t *testing.T) {
			policy := "api-" + how // own Redis keys per subtest
			s := newService(t, newBackend(t, srv.Addr, redislimit.Config{}), limiter.Config{Policies: []limiter.Policy{
				{Name: policy, Algorithm: limiter.SlidingLog, Limit: 100, Window: time.Minute, Backend: limiter.BackendRedis},
			}})
			if how == "limits" {
				testSetLimitsDenyCache(t, srv.Addr)
				return
			}
			small := "plans:\n  free: {" + policy + ": {limit: 2}}\n  pro: {" + policy + ": {limit: 10}}\nkeys:\n  tenant-1: free\n"
			ps, err := limiter.ParsePlans([]byte(small), "plans.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetPlans(ps); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i, want := range []bool{true, true, false, false} { // the second denial comes from the cache
				if d, err := s.Allow(ctx, policy, "tenant-1"); err != nil || d.Allowed != want || d.Plan != "free" {
					t.Fatalf("free request %d: %+v, %v; want allowed=%v", i, d, err, want)
				}
			}
			switch how {
			case "topic":
				err = s.SetKeyPlans(map[string]string{"tenant-1": "pro"})
			case "file":
				ps, err = limiter.ParsePlans([]byte(small[:len(small)-len("free\n")]+"pro\n"), "plans.yaml")
				if err == nil {
					err = s.SetPlans(ps)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			d, err := s.Allow(ctx, policy, "tenant-1")
			if err != nil || !d.Allowed || d.Plan != "pro" || d.Limit != 10 || d.Remaining != 7 {
				t.Errorf("after the move to pro: %+v, %v; want allowed, limit 10, remaining 7", d, err)
			}
		})
	}
}

func testSetLimitsDenyCache(t *testing.T, addr string) {
	pol := limiter.Policy{Name: "api-limits", Algorithm: limiter.SlidingLog, Limit: 2, Window: time.Minute, Backend: limiter.BackendRedis}
	s := newService(t, newBackend(t, addr, redislimit.Config{}), limiter.Config{Policies: []limiter.Policy{pol}})
	ctx := context.Background()
	step := func(what string, limit int64, want bool, remaining int64) {
		t.Helper()
		if limit > 0 {
			p := pol
			p.Limit = limit
			if err := s.SetLimits([]limiter.Policy{p}); err != nil {
				t.Fatal(err)
			}
		}
		if d, err := s.Allow(ctx, pol.Name, "k"); err != nil || d.Allowed != want || d.Remaining != remaining {
			t.Fatalf("%s: %+v, %v; want allowed=%v, remaining %d", what, d, err, want, remaining)
		}
	}
	step("1 of 2", 0, true, 1)
	step("2 of 2", 0, true, 0)
	step("over 2", 0, false, 0)
	step("over 2, cached", 0, false, 0)
	step("raised to 4", 4, true, 1)
	step("4 of 4", 0, true, 0)
	step("over 4", 0, false, 0)
	step("back to 2", 2, false, 0)
	step("raised to 6", 6, true, 1)
}
