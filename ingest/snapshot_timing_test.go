package ingest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/window"
)

// costStore is a store whose cost series keep an hour (60 slots of a minute), as serve's.
func costStore(b testing.TB) *window.Store {
	s, err := window.NewStore(window.StoreConfig{Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60}}})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// history produces n cost events of keys keys to a one-partition topic, event times spread
// over the 55 minutes before t0 (the shape of the measurement), every record stamped
// t0, and feeds the same events to a store at t0, as a consumer replaying them at t0 would.
// The records are framed here (kafkatest.ProduceRecords), not by kafka-go's Writer: 10M
// records take seconds instead of a minute, and the broker holds the same log.
func history(b *testing.B, n, keys int, t0 time.Time) (*kafkatest.Cluster, *window.Store) {
	c := kafkatest.Start(b, "events", 1)
	store := costStore(b)
	names := make([][]byte, keys)
	for k := range names {
		names[k] = fmt.Appendf(nil, "tenant-%d", k)
	}
	const batch = 20_000
	msgs := make([]kafka.Message, 0, batch)
	arena := make([]byte, 0, batch*96)
	span := (55 * time.Minute).Milliseconds()
	for i := range n {
		ev := window.Event{TS: t0.UnixMilli() - span + span*int64(i)/int64(n), Metric: "cost",
			Key: string(names[i%keys]), Value: float64(1 + i%97), Feed: window.FeedOf(0)}
		if err := store.ObserveFrom(t0.UnixMilli(), window.Source{RecordTS: t0.UnixMilli()}, &ev); err != nil {
			b.Fatal(err)
		}
		at := len(arena)
		arena = event.Append(arena, ev)
		msgs = append(msgs, kafka.Message{Key: names[i%keys], Value: arena[at:len(arena):len(arena)], Time: t0})
		if len(msgs) == batch || i == n-1 {
			c.ProduceRecords(b, 0, msgs...)
			msgs, arena = msgs[:0], make([]byte, 0, batch*96)
		}
	}
	return c, store
}

// snapshotWriter is a consumer of group on c, never run, whose snapshot writer writes the
// snapshots of store: writeSnapshot then goes through the consumer's own encoding and writer.
func snapshotWriter(b *testing.B, c *kafkatest.Cluster, group string, store *window.Store) *Consumer {
	cfg := Config{Brokers: []string{c.Addr}, Topic: c.Topic, Group: group, Snapshots: SnapshotConfig{Interval: time.Minute}}
	cons, err := New(cfg, store)
	if err != nil {
		b.Fatal(err)
	}
	if ok, _ := cons.snap.ensureTopic(context.Background()); !ok {
		b.Fatal("no snapshot topic")
	}
	b.Cleanup(func() { cons.snap.w.Close() })
	return cons
}

// writeSnapshot encodes partition id's series of cons's store as of t0 and writes them as the
// snapshot of offset end, and returns the snapshot's size encoded and as written (compressed).
func writeSnapshot(b *testing.B, cons *Consumer, id int32, end int64, t0 time.Time) (encoded, written int) {
	p := &partition{id: id, label: partitionLabel(id), target: end}
	cons.mu.Lock()
	cons.parts[id] = p
	cons.mu.Unlock()
	cons.now = func() time.Time { return t0 }
	before := sum(cons.sm.written)
	p.snap.busy.Store(true)
	j, err := cons.snap.encode(p, end, nil)
	if err != nil {
		b.Fatal(err)
	}
	cons.snap.write(context.Background(), j)
	if p.snap.wroteOff.Load() != end {
		b.Fatalf("writing the snapshot of %d series of partition %d failed", j.series, id)
	}
	return int(j.raw), int(sum(cons.sm.written) - before)
}

// seedSnapshot writes the snapshot a consumer of group would have written of store (the
// state of c's whole partition 0 at t0), so the next restore of the group finds it. It
// spares a benchmark a full replay per history.
func seedSnapshot(b *testing.B, c *kafkatest.Cluster, group string, store *window.Store, t0 time.Time) {
	end := logEnd(b, c, c.Topic)[0]
	size, written := writeSnapshot(b, snapshotWriter(b, c, group, store), 0, end, t0)
	b.Logf("seeded a snapshot of %d series at offset %d: %d bytes, %d written", store.Len(), end, size, written)
}

// restoreOnce runs a consumer of group on c until it is ready and returns how long that
// took from Run, and the consumer.
func restoreOnce(b *testing.B, c *kafkatest.Cluster, group string, snaps SnapshotConfig, clock func() time.Time) (time.Duration, *Consumer) {
	cfg := Config{Brokers: []string{c.Addr}, Topic: c.Topic, Group: group, Restore: 61 * time.Minute,
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second, MaxWait: 200 * time.Millisecond, Snapshots: snaps}
	cons, err := New(cfg, costStore(b), WithClock(clock))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- cons.Run(ctx) }()
	for !cons.Ready() {
		time.Sleep(200 * time.Microsecond)
	}
	took := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return took, cons
}

// coversEnd reports whether cons wrote a snapshot of each partition up to its target.
func coversEnd(cons *Consumer) bool {
	cons.mu.Lock()
	defer cons.mu.Unlock()
	for _, p := range cons.parts {
		if p.snap.written.Load() == 0 || p.snap.wroteOff.Load() < p.target {
			return false
		}
	}
	return len(cons.parts) > 0
}

// BenchmarkSnapshotRestore is the time from Run to Ready for a restarted instance whose
// partition holds a long history of cost events (1,000 keys over 55 minutes, one partition,
// one event a record): "full_replay" (the anchor) replays the 10M events of the log;
// "snapshot" loads the latest snapshot of the same history and replays the log after it
// (nothing); "snapshot_half" is the same with half the history (5M events) on the same
// keys, the anchor of the doubling goal. The snapshots are written by the consumer's own
// writer from a store fed the same events (seedSnapshot), and every restore is checked
// against it. Group joins are part of every op.
func BenchmarkSnapshotRestore(b *testing.B) {
	const n, keys = 10_000_000, 1000
	t0 := time.Now()
	clock := func() time.Time { return t0 }
	full, fullStore := history(b, n, keys, t0)
	half, halfStore := history(b, n/2, keys, t0)
	seedSnapshot(b, full, "snap", fullStore, t0)
	seedSnapshot(b, half, "snap", halfStore, t0)
	// Restores run with the default interval: the next snapshot would come 30 s after
	// assignment, outside the measurement.
	snaps := SnapshotConfig{Interval: DefaultSnapshotInterval}
	run := func(b *testing.B, c *kafkatest.Cluster, want *window.Store, snaps SnapshotConfig, events int) {
		var busy time.Duration
		for i := 0; i < b.N; i++ {
			group := "snap"
			if snaps.Interval == 0 {
				group = fmt.Sprintf("replay-%d", i)
			}
			runtime.GC() // the garbage of the op before (a full replay's) is not this op's cost
			took, cons := restoreOnce(b, c, group, snaps, clock)
			busy += took
			loaded := sum(cons.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded))
			if (snaps.Interval > 0) != (loaded == 1) {
				b.Fatalf("restored from a snapshot %v times with snapshots %v", loaded, snaps)
			}
			sameWindows(b, cons.store, want, t0, keys)
		}
		b.ReportMetric(busy.Seconds()/float64(b.N), "s/ready")
		b.ReportMetric(float64(events), "events")
	}
	// The two snapshot restores back to back, the doubling pair, then the long full replay.
	b.Run("snapshot", func(b *testing.B) { run(b, full, fullStore, snaps, n) })
	b.Run("snapshot_half", func(b *testing.B) { run(b, half, halfStore, snaps, n/2) })
	b.Run("full_replay", func(b *testing.B) { run(b, full, fullStore, SnapshotConfig{}, n) })
}

// sameWindows fails b unless got holds keys series whose hour windows equal want's.
func sameWindows(b *testing.B, got, want *window.Store, t0 time.Time, keys int) {
	if got.Len() != keys || want.Len() != keys {
		b.Fatalf("%d series restored, %d fed, want %d", got.Len(), want.Len(), keys)
	}
	for _, k := range []int{0, keys / 2, keys - 1} {
		key := fmt.Sprintf("tenant-%d", k)
		g, err1 := got.ReadAt(t0.UnixMilli(), "cost", key, time.Hour, []float64{0.5, 0.99})
		w, err2 := want.ReadAt(t0.UnixMilli(), "cost", key, time.Hour, []float64{0.5, 0.99})
		if err1 != nil || err2 != nil || g.Count != w.Count || g.Sum != w.Sum || g.Quantiles[1] != w.Quantiles[1] {
			b.Fatalf("%s: restored %+v (%v), fed %+v (%v)", key, g, err1, w, err2)
		}
	}
}

// BenchmarkSnapshotIngest is the events/s of a consumer reading a backlog of 1M latency
// events over 100,000 series (4 partitions) with snapshots and without ("anchor"). "ours"
// takes them every second, 30× as often as --snapshot-interval's default, so the run of a
// few seconds takes several of all 100,000 series: a bound, not the goal's setting. The
// broker is in process and serves requests one at a time, so the snapshots' writes (20 MB a
// round) also hold up the fetches, which a real broker does not.
//
// "ours_30s" is the goal's setting, which a run of seconds cannot include: it ingests with a
// 30 s interval (no snapshot falls in the run), then writes one round of snapshots of all
// four partitions through the consumer's own encoder and writer, timed alone, and charges
// the ingest one round per 30 s of its own time: events / (ingest + round × ingest / 30 s).
// Charging the whole round to ingest is pessimistic: the encoding stalls only its own
// partition's worker, and the write runs beside the fetches. round_s is that round.
func BenchmarkSnapshotIngest(b *testing.B) {
	const events, keys = 1_000_000, 100_000
	c := kafkatest.Start(b, "events", 4)
	t0 := time.Now()
	clock := func() time.Time { return t0 }
	const batch = 5_000
	msgs := make([]kafka.Message, 0, batch)
	for i := range events {
		ev := window.Event{TS: t0.UnixMilli() - int64(events-i)/4, Metric: "latency_ms",
			Key: fmt.Sprintf("tenant-%d", i%keys), Value: float64(1 + i%997)}
		msgs = append(msgs, kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)})
		if len(msgs) == batch {
			c.Produce(b, msgs...)
			msgs = msgs[:0]
		}
	}
	end := logEnd(b, c, c.Topic)
	// once consumes the whole backlog as group and returns how long it took.
	once := func(b *testing.B, group string, snaps SnapshotConfig) (time.Duration, Config, *Consumer) {
		if snaps.Interval > 0 {
			// A topic of its own: kfake never compacts, and finding no snapshot of a new
			// group in a topic other runs filled reads all of it.
			snaps.Topic = "snapshots-" + group
		}
		cfg := Config{Brokers: []string{c.Addr}, Topic: c.Topic, Group: group,
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second, MaxWait: 200 * time.Millisecond, Snapshots: snaps}
		cons, err := New(cfg, newTestStore(b, 0), WithClock(clock))
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- cons.Run(ctx) }()
		for !consumedAll(cons.Progress(), end) {
			time.Sleep(200 * time.Microsecond)
		}
		took := time.Since(start)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if cons.store.Len() != keys {
			b.Fatalf("%d series, want %d", cons.store.Len(), keys)
		}
		return took, cfg, cons
	}
	// Untimed, first: whichever run read the log first was up to 1.6× slower than the next
	// (a cold broker and heap), so it is none of the measured ones.
	once(b, "warm-up", SnapshotConfig{})
	run := func(b *testing.B, snaps SnapshotConfig, scaled bool) {
		var busy, round time.Duration
		var written float64
		for i := 0; i < b.N; i++ {
			took, cfg, cons := once(b, fmt.Sprintf("ingest-%v-%d", snaps.Interval, i), snaps)
			if scaled {
				w := snapshotWriter(b, c, cfg.Group+"-round", cons.store)
				t := time.Now()
				for p := range int32(c.Partitions) {
					_, n := writeSnapshot(b, w, p, end[p], t0)
					written += float64(n)
				}
				r := time.Since(t)
				round += r
				took += time.Duration(float64(r) * took.Seconds() / DefaultSnapshotInterval.Seconds())
			} else {
				written += sum(cons.sm.written)
			}
			busy += took
		}
		b.ReportMetric(float64(events*b.N)/busy.Seconds(), "events/s")
		b.ReportMetric(written/float64(b.N), "snapshot_bytes/op")
		if scaled {
			b.ReportMetric(round.Seconds()/float64(b.N), "round_s")
		}
	}
	// The goal's pair back to back, before the 1 s bound fills the broker with snapshots.
	b.Run("anchor", func(b *testing.B) { run(b, SnapshotConfig{}, false) })
	b.Run("ours_30s", func(b *testing.B) { run(b, SnapshotConfig{Interval: DefaultSnapshotInterval}, true) })
	b.Run("ours", func(b *testing.B) { run(b, SnapshotConfig{Interval: time.Second}, false) })
}
