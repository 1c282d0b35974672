package window

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkExemplars: BenchmarkObserveFromAll's records (80 spans of three series a record,
// stamped over the last minute), every span with a trace id, observed through ObserveFromAll
// by a store keeping exemplars (ours) and by one keeping none (the anchor): what
// --exemplars adds to a span's observation.
func BenchmarkExemplars(b *testing.B) {
	const perRecord, records = 80, 512
	rng := rand.New(rand.NewPCG(27, 81))
	vals := lognormal(rng, perRecord*records)
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("service-%d\xffhttp_route=/route-%d", i/3, i%3)
	}
	evs := make([]Event, perRecord*records)
	for i := range evs {
		rec := i / perRecord
		evs[i] = Event{Metric: "duration_ms", Key: keys[rec%4*3+rng.IntN(3)], Value: vals[i], Count: 1,
			TS: t0 - int64(rng.IntN(60_000)), Feed: FeedOf(1), TraceID: [16]byte{0: byte(i), 1: byte(i >> 8), 15: 1}, SpanID: [8]byte{0: byte(i)}}
	}
	src := Source{RecordTS: t0}
	run := func(b *testing.B, on bool) {
		s, _ := NewStore(StoreConfig{Exemplars: on})
		ptrs := make([]*Event, perRecord)
		errs := make([]error, perRecord)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		n := 0
		for i := range b.N {
			rec := evs[i%records*perRecord:][:perRecord]
			for k := range rec {
				ptrs[k] = &rec[k]
			}
			s.ObserveFromAll(t0, src, ptrs, errs)
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
