package ingest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

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
// over the 55 minutes before t0 (the shape of the measurement).
func history(b *testing.B, n, keys int, t0 time.Time) *kafkatest.Cluster {
	c := kafkatest.Start(b, "events", 1)
	const batch = 5_000
	msgs := make([]kafka.Message, 0, batch)
	span := (55 * time.Minute).Milliseconds()
	for i := range n {
		ev := window.Event{TS: t0.UnixMilli() - span + span*int64(i)/int64(n), Metric: "cost",
			Key: fmt.Sprintf("tenant-%d", i%keys), Value: float64(1 + i%97)}
		msgs = append(msgs, kafka.Message{Key: []byte(ev.Key), Value: AppendEvent(nil, ev), Time: t0})
		if len(msgs) == batch || i == n-1 {
			c.Produce(b, msgs...)
			msgs = msgs[:0]
		}
	}
	return c
}

// restoreOnce runs a consumer of group on c until it is ready and returns how long that
// took from Run, and its metrics. With seed, it then waits for a snapshot of the end of the
// log, for the next restore of the group to load.
func restoreOnce(b *testing.B, c *kafkatest.Cluster, group string, snaps SnapshotConfig, clock func() time.Time, seed bool) (time.Duration, *Consumer) {
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
	for seed && !coversEnd(cons) {
		time.Sleep(time.Millisecond)
	}
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
// partition holds a long history of cost events (1,000 keys over 55 minutes, one partition):
// "full_replay" (the anchor) replays the log; "snapshot" loads the latest snapshot of the
// same history and replays the log after it (nothing); "snapshot_2x" is the same with twice
// the history on the same keys. Sizes are 1M and 2M events, not the 10M: the shared
// benchmark machine produces and holds that much in an in-process broker in well under a
// minute. Group joins are part of every op.
func BenchmarkSnapshotRestore(b *testing.B) {
	const n, keys = 1_000_000, 1000
	t0 := time.Now()
	clock := func() time.Time { return t0 }
	one, two := history(b, n, keys, t0), history(b, 2*n, keys, t0)
	for _, c := range []*kafkatest.Cluster{one, two} {
		restoreOnce(b, c, "snap", SnapshotConfig{Interval: time.Millisecond}, clock, true)
	}
	// Restores measured with the default interval: the first snapshot comes 30 s after
	// assignment, outside the measurement.
	snaps := SnapshotConfig{Interval: DefaultSnapshotInterval}
	run := func(b *testing.B, c *kafkatest.Cluster, snaps SnapshotConfig, events int) {
		var busy time.Duration
		for i := 0; i < b.N; i++ {
			group := "snap"
			if snaps.Interval == 0 {
				group = fmt.Sprintf("replay-%d", i)
			}
			took, cons := restoreOnce(b, c, group, snaps, clock, false)
			busy += took
			loaded := sum(cons.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded))
			if (snaps.Interval > 0) != (loaded == 1) {
				b.Fatalf("restored from a snapshot %v times with snapshots %v", loaded, snaps)
			}
			if cons.store.Len() != keys {
				b.Fatalf("%d series restored, want %d", cons.store.Len(), keys)
			}
		}
		b.ReportMetric(busy.Seconds()/float64(b.N), "s/ready")
		b.ReportMetric(float64(events), "events")
	}
	b.Run("snapshot", func(b *testing.B) { run(b, one, snaps, n) })
	b.Run("full_replay", func(b *testing.B) { run(b, one, SnapshotConfig{}, n) })
	b.Run("snapshot_2x", func(b *testing.B) { run(b, two, snaps, 2*n) })
}

// BenchmarkSnapshotIngest is the events/s of a consumer reading a backlog of 1M latency
// events over 100,000 series (4 partitions) with snapshots ("ours") and without
// ("anchor"). Snapshots are taken every second, 30× as often as --snapshot-interval's
// default, so the run of a few seconds takes several of all 100,000 series; at 30 s their
// share is 30× smaller. The broker is in process and serves requests one at a time, so the
// snapshots' writes (20 MB a round) also hold up the fetches, which a real broker does not.
// encode_s/round is one round of snapshot encoding of all four partitions, alone, and
// %_of_30s its share of the default interval: the ingest time snapshots cost at 30 s.
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
		msgs = append(msgs, kafka.Message{Key: []byte(ev.Key), Value: AppendEvent(nil, ev)})
		if len(msgs) == batch {
			c.Produce(b, msgs...)
			msgs = msgs[:0]
		}
	}
	end := logEnd(b, c, c.Topic)
	run := func(b *testing.B, snaps SnapshotConfig) {
		var busy, round time.Duration
		var written float64
		for i := 0; i < b.N; i++ {
			cfg := Config{Brokers: []string{c.Addr}, Topic: c.Topic, Group: fmt.Sprintf("ingest-%v-%d", snaps.Interval, i),
				HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second, MaxWait: 200 * time.Millisecond, Snapshots: snaps}
			cons, err := New(cfg, newTestStore(b, 0), WithClock(clock))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- cons.Run(ctx) }()
			for !consumedAll(cons.Progress(), end) {
				time.Sleep(200 * time.Microsecond)
			}
			busy += time.Since(start)
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			if cons.store.Len() != keys {
				b.Fatalf("%d series, want %d", cons.store.Len(), keys)
			}
			written += sum(cons.sm.written)
			// What one round of snapshots costs the partitions' workers, alone: the share of a
			// 30 s interval it takes is the ingest time snapshots cost at the default.
			var buf []byte
			t := time.Now()
			for p := range int32(c.Partitions) {
				buf, _ = cons.store.AppendSnapshot(buf[:0], t0.UnixMilli(), p)
			}
			round += time.Since(t)
		}
		b.ReportMetric(float64(events*b.N)/busy.Seconds(), "events/s")
		b.ReportMetric(written/float64(b.N), "snapshot_bytes/op")
		b.ReportMetric(round.Seconds()/float64(b.N), "encode_s/round")
		b.ReportMetric(100*round.Seconds()/float64(b.N)/DefaultSnapshotInterval.Seconds(), "%_of_30s")
	}
	b.Run("ours", func(b *testing.B) { run(b, SnapshotConfig{Interval: time.Second}) })
	b.Run("anchor", func(b *testing.B) { run(b, SnapshotConfig{}) })
}
