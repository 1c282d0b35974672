package usage_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
)

// threadCPU is the CPU time of the calling thread (the loop runs on one, locked): on a
// loaded machine it leaves out the time the loop waited for a core, as limiter's does.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRuleLevels: an allowed decision of a three-level sum rule (org/team/user, each
// level read whole) vs a one-level one, same key, on a store of 300 series of the metric
// (3 orgs × 10 teams × 10 users). A level above the last is a read of the store's level
// index: the prefix's cached aggregate, as nothing is written between checks here
// (BenchmarkRuleLevelsWritten measures the fold of the prefix's series; see doc.go).
func BenchmarkRuleLevels(b *testing.B) {
	st := newStore(b)
	for o := range 3 {
		for t := range 10 {
			for u := range 10 {
				observe(b, st, t0, "cost", fmt.Sprintf("org-%d/team-%d/user-%d", o, t, u), 1, 1)
			}
		}
	}
	sum := usage.Agg{Kind: usage.KindSum}
	for _, c := range []struct {
		name string
		r    usage.Rule
	}{
		{"ours", usage.Rule{Name: "q", Metric: "cost", Agg: sum, Window: time.Hour,
			Levels: usage.RuleLevels{Separator: "/", Max: [limiter.MaxLevels]float64{1e9, 1e9, 1e9}, N: 3}}},
		{"anchor", usage.Rule{Name: "q", Metric: "cost", Agg: sum, Window: time.Hour, Max: 1e9}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ck := mustChecker(b, st, c.r)
			ctx, now := context.Background(), t0.Add(time.Minute)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			cpu0 := threadCPU()
			for b.Loop() {
				if d, err := ck.Check(ctx, "org-1/team-5/user-5", now, 1); err != nil || !d.Allowed {
					b.Fatalf("%+v %v", d, err)
				}
			}
			b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "cpu_ns/op")
		})
	}
}

// BenchmarkRuleLevelsWritten: BenchmarkRuleLevels with an event of another user of the same
// team recorded before each check, so that every level read above the key misses the level
// index's cache and folds the prefix's own series (100 for the org, 10 for the team); the
// anchor records the same event before its one-level check.
func BenchmarkRuleLevelsWritten(b *testing.B) {
	st := newStore(b)
	for o := range 3 {
		for t := range 10 {
			for u := range 10 {
				observe(b, st, t0, "cost", fmt.Sprintf("org-%d/team-%d/user-%d", o, t, u), 1, 1)
			}
		}
	}
	sum := usage.Agg{Kind: usage.KindSum}
	for _, c := range []struct {
		name string
		r    usage.Rule
	}{
		{"ours", usage.Rule{Name: "q", Metric: "cost", Agg: sum, Window: time.Hour,
			Levels: usage.RuleLevels{Separator: "/", Max: [limiter.MaxLevels]float64{1e12, 1e12, 1e12}, N: 3}}},
		{"anchor", usage.Rule{Name: "q", Metric: "cost", Agg: sum, Window: time.Hour, Max: 1e12}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ck := mustChecker(b, st, c.r)
			ctx, now := context.Background(), t0.Add(time.Minute)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			cpu0 := threadCPU()
			for b.Loop() {
				observe(b, st, now, "cost", "org-1/team-5/user-6", 1, 1)
				if d, err := ck.Check(ctx, "org-1/team-5/user-5", now, 1); err != nil || !d.Allowed {
					b.Fatalf("%+v %v", d, err)
				}
			}
			b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "cpu_ns/op")
		})
	}
}
