package window

import (
	"strconv"
	"testing"
)

// BenchmarkObserveLevels: one event through ObserveFrom into an existing series of a metric
// that a rule with levels indexes (org/team/user, two prefixes: one atomic add each) vs the
// same event into the same series of a metric without an index.
func BenchmarkObserveLevels(b *testing.B) {
	for _, c := range []struct {
		name    string
		indexed bool
	}{{"ours", true}, {"anchor", false}} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := NewStore(StoreConfig{})
			for i := range 300 {
				_ = s.ObserveAt(t0, Event{TS: t0, Metric: "cost", Key: "org-" + strconv.Itoa(i%3) + "/team-" + strconv.Itoa(i%30) + "/user-" + strconv.Itoa(i), Value: 1})
			}
			if c.indexed {
				s.IndexLevels("cost", "/", 2)
			}
			ev := Event{TS: t0, Metric: "cost", Key: "org-1/team-4/user-4", Value: 1, Feed: FeedOf(3)}
			src := Source{RecordTS: t0}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				_ = s.ObserveFrom(t0, src, &ev)
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
		})
	}
}
