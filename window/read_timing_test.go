package window

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// readBench is the store BenchmarkRead reads: one full series (30 slots of 1,000 lognormal
// latencies, 29 packed), 1,000 series of 10 slots × 20 events for the globs, and 1,000
// sparse series of 3 events, every ring advanced by its writes to now.
func readBench(b *testing.B) (*Store, int64) {
	b.Helper()
	s := newTestStore(b, StoreConfig{})
	rng := rand.New(rand.NewPCG(25, 1))
	now := t0 + 299_999
	for slot := range int64(30) {
		for _, v := range lognormal(rng, 1000) {
			if err := s.ObserveAt(t0+slot*10_000, Event{TS: t0 + slot*10_000, Metric: "latency_ms", Key: "tenant-42", Value: v}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range 1000 {
		key := fmt.Sprintf("g-%04d", i)
		for slot := int64(20); slot < 30; slot++ {
			for _, v := range lognormal(rng, 20) {
				if err := s.ObserveAt(t0+slot*10_000, Event{TS: t0 + slot*10_000, Metric: "latency_ms", Key: key, Value: v, Feed: FeedOf(int32(i % 4))}); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, v := range lognormal(rng, 3) {
			if err := s.ObserveAt(now, Event{TS: now, Metric: "latency_ms", Key: fmt.Sprintf("s-%04d", i), Value: v}); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Every ring at now, as ingest leaves the rings it writes to.
	if n := s.Evict(now); n != 0 {
		b.Fatalf("%d series evicted", n)
	}
	return s, now
}

// BenchmarkRead: the window package's read paths at a now in the rings' current slot (the
// hot case: reads at the clock the rings were written at), each API once: one series' full
// and one-minute windows (ReadAt), the glob reads the query API and the cluster use
// (ReadMerged, MergePartial with and without bins, EachPartial), one key's partial
// (MergeKey), the exporter's VisitWindowAt, and a sparse series. The pair for issue #25's
// non-mutating reads is this benchmark on the build before and after, alternated.
func BenchmarkRead(b *testing.B) {
	s, now := readBench(b)
	qs := []float64{0.5, 0.95, 0.99}
	glob := func(k string) bool { return MatchKey("g-*", k) }
	part := func(k string, _ int32) bool { return MatchKey("g-*", k) }
	anyPart := func(int32) bool { return true }
	var scratch sketch.Bins
	cases := []struct {
		name string
		read func() error
	}{
		{"ReadAt_5m", func() error { _, err := s.ReadAt(now, "latency_ms", "tenant-42", 5*time.Minute, qs); return err }},
		{"ReadAt_1m", func() error { _, err := s.ReadAt(now, "latency_ms", "tenant-42", time.Minute, qs); return err }},
		{"ReadAt_sparse_5m", func() error { _, err := s.ReadAt(now, "latency_ms", "s-0042", 5*time.Minute, qs); return err }},
		{"ReadMerged_glob_5m", func() error { _, err := s.ReadMerged(now, "latency_ms", glob, 5*time.Minute, qs); return err }},
		{"MergePartial_glob_5m", func() error {
			var p Partial
			return s.MergePartial(now, "latency_ms", part, 5*time.Minute, &p)
		}},
		{"MergePartial_glob_5m_nobins", func() error {
			p := Partial{NoBins: true}
			return s.MergePartial(now, "latency_ms", part, 5*time.Minute, &p)
		}},
		{"EachPartial_glob_5m_nobins", func() error {
			return s.EachPartial(now, "latency_ms", part, 5*time.Minute, false, func(string, int32, *Partial) {})
		}},
		{"MergeKey_5m", func() error {
			var p Partial
			return s.MergeKey(now, "latency_ms", "tenant-42", anyPart, 5*time.Minute, &p)
		}},
		{"VisitWindowAt_5m", func() error {
			return s.VisitWindowAt(now, "latency_ms", "tenant-42", 5*time.Minute, &scratch, func(Agg, *sketch.Bins) {})
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU() // the machine is shared: CPU time is steadier than wall time
			for b.Loop() {
				if err := c.read(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
		})
	}
}

// BenchmarkReadAhead: a read one slot past the rings' current slot, which since #25
// computes the window there without moving the ring (ours: the kept aggregate plus the
// slot that joins, minus the one that leaves, into scratch), against the same read at a
// now in the current slot (anchor). Before #25 the first such read moved every ring and
// the later ones were the anchor's.
func BenchmarkReadAhead(b *testing.B) {
	s, now := readBench(b)
	qs := []float64{0.5, 0.95, 0.99}
	part := func(k string, _ int32) bool { return MatchKey("g-*", k) }
	for _, c := range []struct {
		name string
		read func(now int64) error
	}{
		{"ReadAt_5m", func(now int64) error {
			_, err := s.ReadAt(now, "latency_ms", "tenant-42", 5*time.Minute, qs)
			return err
		}},
		{"MergePartial_glob_5m", func(now int64) error {
			var p Partial
			return s.MergePartial(now, "latency_ms", part, 5*time.Minute, &p)
		}},
	} {
		for _, at := range []struct {
			name string
			now  int64
		}{{"ours", now + 10_000}, {"anchor", now}} {
			b.Run(c.name+"/"+at.name, func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if err := c.read(at.now); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
			})
		}
	}
}
