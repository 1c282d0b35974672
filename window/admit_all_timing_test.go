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
	evs := spanRecords(rand.New(rand.NewPCG(27, 80)), perRecord, records, false)
	b.Run("ours", func(b *testing.B) { observeRecords(b, StoreConfig{}, evs, perRecord, true) })
	b.Run("anchor", func(b *testing.B) { observeRecords(b, StoreConfig{}, evs, perRecord, false) })
}

// BenchmarkExemplars: BenchmarkObserveFromAll's records, every span with a trace id,
// observed through ObserveFromAll by a store keeping exemplars (ours) and by one keeping
// none (the anchor): what --exemplars adds to a span's observation.
func BenchmarkExemplars(b *testing.B) {
	const perRecord, records = 80, 512
	evs := spanRecords(rand.New(rand.NewPCG(27, 81)), perRecord, records, true)
	b.Run("ours", func(b *testing.B) { observeRecords(b, StoreConfig{Exemplars: true}, evs, perRecord, true) })
	b.Run("anchor", func(b *testing.B) { observeRecords(b, StoreConfig{}, evs, perRecord, true) })
}

// observeRecords observes evs, records of perRecord events each, into a new store of cfg,
// b.N records, a record at a time through ObserveFromAll (all) or one event at a time
// through ObserveFrom, and reports the process's CPU time per event.
func observeRecords(b *testing.B, cfg StoreConfig, evs []Event, perRecord int, all bool) {
	s, _ := NewStore(cfg)
	src := Source{RecordTS: t0}
	records := len(evs) / perRecord
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

// spanRecords is the events of records OTLP records of perRecord spans each, as ingest
// observes them: of one service and three routes a record (4 services, their keys interned
// as the decoder interns them), lognormal durations, stamped over the last minute before
// t0; with ids, each span with a trace id and span id of its own.
func spanRecords(rng *rand.Rand, perRecord, records int, ids bool) []Event {
	vals := lognormal(rng, perRecord*records)
	keys := make([]string, 12) // 4 services × 3 routes
	for i := range keys {
		keys[i] = fmt.Sprintf("service-%d\xffhttp_route=/route-%d", i/3, i%3)
	}
	evs := make([]Event, perRecord*records)
	for i := range evs {
		rec := i / perRecord
		evs[i] = Event{Metric: "duration_ms", Key: keys[rec%4*3+rng.IntN(3)], Value: vals[i], Count: 1,
			TS: t0 - int64(rng.IntN(60_000)), Feed: FeedOf(1)}
		if ids {
			evs[i].TraceID, evs[i].SpanID = [16]byte{0: byte(i), 1: byte(i >> 8), 15: 1}, [8]byte{0: byte(i), 7: 1}
		}
	}
	return evs
}
