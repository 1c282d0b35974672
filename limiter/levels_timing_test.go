package limiter

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU is the CPU time of the calling thread (the benchmark loop runs on one, locked
// by the caller): on a loaded machine it leaves out the time the loop waited for a core,
// which the wall time per op does not.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLevels compares one Service decision (what POST /v1/allow and Decide do) of a
// three-level fixed window in memory (org-1/team-a/user-7: three hashes, the shards
// locked in order, three lookups, each level decided on a copy and written back) with a
// one-level fixed window deciding the same key, time advancing, every decision admitted.
// Goal (#29): ≤ 2×. BenchmarkLevelsStore is the same without the Service (stated).
func BenchmarkLevels(b *testing.B) {
	for _, c := range levelsBenchPolicies {
		b.Run(c.name, func(b *testing.B) {
			s, err := NewService(Config{Policies: []Policy{c.p}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			now := time.Unix(1_764_489_600, 0)
			s.AllowN(ctx, c.p.Name, levelsBenchKey, now, 1)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := threadCPU()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Microsecond)
				if d, _ := s.AllowN(ctx, c.p.Name, levelsBenchKey, now, 1); !d.Allowed {
					b.Fatal("denied")
				}
			}
			b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "cpu_ns/op")
		})
	}
}

const levelsBenchKey = "org-1/team-a/user-7"

var levelsBenchPolicies = []struct {
	name string
	p    Policy
}{
	{"ours", Policy{Name: "lv", Algorithm: FixedWindow, Window: time.Minute,
		Levels: Levels{Separator: "/", N: 3, Limits: [MaxLevels]int64{MaxQuota, MaxQuota, MaxQuota}}}},
	{"anchor", Policy{Name: "one", Algorithm: FixedWindow, Window: time.Minute, Limit: MaxQuota}},
}

// BenchmarkLevelsStore is BenchmarkLevels on the bare memory limiter, without the
// Service's part of a decision (stated).
func BenchmarkLevelsStore(b *testing.B) {
	for _, c := range levelsBenchPolicies {
		b.Run(c.name, func(b *testing.B) {
			m, err := NewMemory(c.p, MemoryConfig{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			now := time.Unix(1_764_489_600, 0)
			m.AllowN(ctx, levelsBenchKey, now, 1)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := threadCPU()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Microsecond)
				if d, _ := m.AllowN(ctx, levelsBenchKey, now, 1); !d.Allowed {
					b.Fatal("denied")
				}
			}
			b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "cpu_ns/op")
		})
	}
}

// BenchmarkPlanLookup compares a Service's memory fixed-window decision for a key listed
// in a plans file of 1,000 exact keys and two globs (the plan's limit applies) with the
// same decision and no plans. Goal (#29): a plan lookup adds at most 50 ns, reported as
// the ratio (the ns difference is stated with it).
func BenchmarkPlanLookup(b *testing.B) {
	for _, name := range []string{"ours", "anchor"} {
		b.Run(name, func(b *testing.B) {
			s, err := NewService(Config{Policies: []Policy{{Name: "daily", Algorithm: FixedWindow, Window: time.Minute, Limit: MaxQuota}}})
			if err != nil {
				b.Fatal(err)
			}
			if name == "ours" {
				src := "plans:\n  pro: {daily: {limit: 1000000000}}\n  free: {daily: {limit: 100}}\nkeys:\n  \"trial-*\": free\n  \"org-*\": free\n"
				for i := 0; i < 1000; i++ {
					src += "  tenant-" + itoa(i) + ": pro\n"
				}
				ps, err := ParsePlans([]byte(src), "plans.yaml")
				if err != nil {
					b.Fatal(err)
				}
				if err := s.SetPlans(ps); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			now := time.Unix(1_764_489_600, 0)
			s.AllowN(ctx, "daily", "tenant-42", now, 1)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := threadCPU()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Microsecond)
				if d, _ := s.AllowN(ctx, "daily", "tenant-42", now, 1); !d.Allowed {
					b.Fatal("denied")
				}
			}
			b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "cpu_ns/op")
		})
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for ; i > 0; i /= 10 {
		n--
		b[n] = byte('0' + i%10)
	}
	return string(b[n:])
}
