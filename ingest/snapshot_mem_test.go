package ingest

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// TestSnapshotTakeHoldsNoEncoding: a partition's snapshot is compressed as it is encoded, so
// taking one allocates about its compressed size and nothing of it stays once it is written.
// It held the whole encoding (a buffer kept per partition for the next snapshot, 4-5 times
// the payload written): 100,000 latency series in 4 partitions kept 257 MB of heap beside a
// 268 MB store, and a pod sized for the store was OOM-killed at its first snapshot.
func TestSnapshotTakeHoldsNoEncoding(t *testing.T) {
	t0 := time.UnixMilli(1_764_489_600_000)
	store := newTestStore(t, 0)
	// 400 busy latency series of partition 0 (every slot of 30, 3 lognormal values with
	// three decimals each, as the measured ones), 20 of partition 1.
	rnd := rand.New(rand.NewPCG(1, 2))
	for k := range 420 {
		feed := window.FeedOf(0)
		if k >= 400 {
			feed = window.FeedOf(1)
		}
		key := "k-" + string(rune('a'+k%26)) + time.Duration(k).String()
		for s := range 30 {
			for range 3 {
				v := math.Round(math.Exp(4+rnd.NormFloat64())*1000) / 1000
				ev := window.Event{TS: t0.UnixMilli() - int64(s)*10_000, Metric: "latency_ms", Key: key, Value: v, Feed: feed}
				if err := store.ObserveFrom(t0.UnixMilli(), window.Source{RecordTS: t0.UnixMilli()}, &ev); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	encoded := int64(len(must(store.AppendSnapshot(make([]byte, 0, 4<<20), t0.UnixMilli(), 0))))
	cons, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Topic: "events", Group: "g",
		Snapshots: SnapshotConfig{Interval: time.Minute, ChunkBytes: 64 << 10}}, store)
	if err != nil {
		t.Fatal(err)
	}
	cons.now = func() time.Time { return t0 }
	cons.snap.ready.Store(true)
	p0, p1 := &partition{id: 0, label: "0"}, &partition{id: 1, label: "1"}
	cons.parts[0], cons.parts[1] = p0, p1 // owned, as while the consumer runs

	cons.snap.maybeTake(p1) // a first snapshot of a smaller partition: the compressor's own setup
	<-cons.snap.jobs
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	cons.snap.maybeTake(p0)
	runtime.ReadMemStats(&after)
	if len(cons.snap.jobs) != 1 {
		t.Fatal("no snapshot of partition 0 taken")
	}
	<-cons.snap.jobs // as if written: the writer drops it
	allocated := int64(after.TotalAlloc - before.TotalAlloc)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("encoded %d B; the take allocated %d B, %d B held after it", encoded, allocated, held)
	if allocated > encoded/2 {
		t.Errorf("taking a snapshot of %d encoded bytes allocated %d B (more than half of them): it built the encoding whole", encoded, allocated)
	}
	if held > encoded/8 {
		t.Errorf("after a snapshot of %d encoded bytes was taken and let go, %d B more are held", encoded, held)
	}
	runtime.KeepAlive(cons)
}

func must[T any](v T, _ int) T { return v }

// A final snapshot (a stop's or a handover's) whose write its 5 s deadline cuts is skipped,
// not a write error: slide_snapshot_write_errors_total pages (SlideSnapshotWriteErrors), and a
// slow handover is no failure of the snapshot topic. It was counted as one.
func TestFinalWriteCutByItsDeadlineIsNoError(t *testing.T) {
	t0 := time.UnixMilli(1_764_489_600_000)
	store := newTestStore(t, 0)
	ev := window.Event{TS: t0.UnixMilli(), Metric: "latency_ms", Key: "k", Value: 1, Feed: window.FeedOf(0)}
	if err := store.ObserveFrom(t0.UnixMilli(), window.Source{RecordTS: t0.UnixMilli()}, &ev); err != nil {
		t.Fatal(err)
	}
	cons, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Topic: "events", Group: "g",
		Snapshots: SnapshotConfig{Interval: time.Minute}}, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.snap.w.Close() })
	cons.now = func() time.Time { return t0 }
	p := &partition{id: 0, label: "0"}
	cons.parts[0] = p
	j, err := cons.snap.encode(p, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cons.snap.write(ctx, j)
	if errs, skipped := sum(cons.sm.writeErrors), sum(cons.sm.skipped); errs != 0 || skipped != 1 {
		t.Fatalf("a write past its deadline: %v write errors, %v skipped; want 0 and 1", errs, skipped)
	}
}
