package window

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkObserveFromAll: the events of OTLP records as ingest observes them (80 spans a
// record, of one service and three routes: three series, stamped over the last minute) a
// record at a time through ObserveFromAll against one at a time through ObserveFrom, the call
// it replaces. cpu_ns/event is the process's CPU time per event.
func BenchmarkObserveFromAll(b *testing.B) {
	const perRecord, records = 80, 512
	rng := rand.New(rand.NewPCG(27, 80))
	vals := lognormal(rng, perRecord*records)
	keys := make([]string, 12) // 4 services × 3 routes, interned as the decoder does
	for i := range keys {
		keys[i] = fmt.Sprintf("service-%d\xffhttp_route=/route-%d", i/3, i%3)
	}
	evs := make([]Event, perRecord*records)
	for i := range evs {
		rec := i / perRecord
		evs[i] = Event{Metric: "duration_ms", Key: keys[rec%4*3+rng.IntN(3)], Value: vals[i], Count: 1,
			TS: t0 - int64(rng.IntN(60_000)), Feed: FeedOf(1)}
	}
	src := Source{RecordTS: t0}
	run := func(b *testing.B, all bool) {
		s, _ := NewStore(StoreConfig{})
		ptrs := make([]*Event, perRecord)
		errs := make([]error, perRecord)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		n := 0
		for i := range b.N {
			rec := evs[i%records*perRecord:][:perRecord]
			if all {
				for k := range rec {
					ptrs[k] = &rec[k]
				}
				s.ObserveFromAll(t0, src, ptrs, errs)
			} else {
				for k := range rec {
					errs[k] = s.ObserveFrom(t0, src, &rec[k])
				}
			}
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			n += perRecord
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(n), "cpu_ns/event")
	}
	b.Run("ours", func(b *testing.B) { run(b, true) })
	b.Run("anchor", func(b *testing.B) { run(b, false) })
}
