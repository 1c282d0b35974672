package ingest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/polltest"
	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/window"
)

func TestManifestRoundTrip(t *testing.T) {
	m := manifest{id: 42, set: 'b', offset: 123456, taken: 1_764_489_600_000, chunks: 3, size: 1 << 20, codec: codecZstd, raw: 5 << 20, crc: 0xdeadbeef}
	v := m.append(nil)
	got, reason := parseManifest(v)
	if reason != "" || got != m {
		t.Fatalf("round trip: %+v (%s), want %+v", got, reason, m)
	}
	for i := range v {
		bad := append([]byte(nil), v...)
		bad[i] ^= 0x40
		if _, reason := parseManifest(bad); reason == "" {
			t.Errorf("byte %d flipped: accepted", i)
		}
	}
	if _, reason := parseManifest(v[:len(v)-1]); reason != reasonCorrupt {
		t.Errorf("truncated: %q", reason)
	}
	// A version 1 manifest (before compression) still reads, as an uncompressed payload.
	v1 := append([]byte(nil), manifestMagic[:]...)
	v1 = append(v1, snapRecordVersion)
	v1 = binary.LittleEndian.AppendUint64(v1, m.id)
	v1 = append(v1, m.set)
	v1 = binary.AppendVarint(v1, m.offset)
	v1 = binary.AppendVarint(v1, m.taken)
	v1 = binary.AppendUvarint(v1, m.chunks)
	v1 = binary.AppendUvarint(v1, m.size)
	v1 = binary.LittleEndian.AppendUint32(v1, m.crc)
	v1 = binary.LittleEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	old := m
	old.codec, old.raw = codecNone, m.size
	if got, reason := parseManifest(v1); reason != "" || got != old {
		t.Errorf("version 1: %+v (%s), want %+v", got, reason, old)
	}
	// A decoded size beyond what the payload can inflate to is refused before any decoding.
	huge := m
	huge.raw = m.size*maxInflation + 1
	if _, reason := parseManifest(huge.append(nil)); reason != reasonCorrupt {
		t.Errorf("decoded size %d of a %d-byte payload: %q", huge.raw, huge.size, reason)
	}
	id, i, data, reason := parseChunk(chunkValue(7, 2, []byte("xyz")))
	if id != 7 || i != 2 || string(data) != "xyz" || reason != "" {
		t.Errorf("chunk round trip: %d %d %q %q", id, i, data, reason)
	}
}

// In process, under -race: a consumer writes snapshots in small chunks while it ingests, a
// second one of the same group loads them, replays the rest, reports where it restored from
// in Progress, and ends with the same windows as the first.
func TestSnapshotRestoreInProcess(t *testing.T) {
	c := kafkatest.Start(t, "events", 2)
	t0 := time.Now()
	produce := func(from, n int) {
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			ev := window.Event{TS: t0.UnixMilli() - int64(n-i)*10, Metric: "latency_ms", Key: fmt.Sprintf("k%d", (from+i)%50), Value: float64(1 + (from+i)%300)}
			msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)}
		}
		c.Produce(t, msgs...)
	}
	produce(0, 3000)
	cfg := testConfig(c, "snap")
	cfg.Snapshots = SnapshotConfig{Interval: 20 * time.Millisecond, ChunkBytes: 256}
	first := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "first consumer caught up", func() bool { return caughtUp(t, c, first) }, progress(first))
	eventually(t, 20*time.Second, "snapshots of the end", func() bool { return coversEnd(first.Consumer) })
	first.stop(t)
	produce(3000, 500) // after the snapshots: replayed from the log

	second := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "second consumer caught up", func() bool { return caughtUp(t, c, second) }, progress(second))
	if got := sum(second.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded)); got != 2 {
		t.Errorf("%v partitions loaded from a snapshot, want 2", got)
	}
	pr, _ := json.Marshal(second.Progress())
	if !strings.Contains(string(pr), `"source":"snapshot"`) || !strings.Contains(string(pr), `"phase":"live"`) {
		t.Errorf("progress does not say where it restored from: %s", pr)
	}
	reference := start(t, testConfig(c, "reference"), newTestStore(t, 0), t0) // a full replay
	eventually(t, 20*time.Second, "reference caught up", func() bool { return caughtUp(t, c, reference) }, progress(reference))
	now := t0.UnixMilli()
	for k := range 50 {
		key := fmt.Sprintf("k%d", k)
		want, err1 := reference.store.ReadAt(now, "latency_ms", key, 5*time.Minute, []float64{0.5, 0.99})
		got, err2 := second.store.ReadAt(now, "latency_ms", key, 5*time.Minute, []float64{0.5, 0.99})
		if err1 != nil || err2 != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: restored %+v (%v), full replay %+v (%v)", key, got, err2, want, err1)
		}
	}
}

// A consumer that stops writes a final snapshot of every partition it owns, and so does one
// whose partitions a rebalance may move: with an interval far longer than the test, the
// next owner still restores from a snapshot of the end of the log and replays only what was
// produced after it, and its windows equal a full replay's.
func TestSnapshotFinalOnShutdownAndRevocation(t *testing.T) {
	c := kafkatest.Start(t, "events", 2)
	t0 := time.Now()
	produce := func(from, n int) {
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			ev := window.Event{TS: t0.UnixMilli() - int64(n-i)*10, Metric: "latency_ms", Key: fmt.Sprintf("k%d", (from+i)%50), Value: float64(1 + (from+i)%300)}
			msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)}
		}
		c.Produce(t, msgs...)
	}
	produce(0, 2000)
	cfg := testConfig(c, "final")
	cfg.Snapshots = SnapshotConfig{Interval: time.Hour, ChunkBytes: 1024}
	first := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "first consumer caught up", func() bool { return caughtUp(t, c, first) }, progress(first))
	// A periodic write that the stop cuts short (its context canceled) is not a failed write:
	// slide_snapshot_write_errors_total stays 0 through a deploy, and the partition is free
	// for the final snapshot.
	stopping, cancel := context.WithCancel(context.Background())
	cancel()
	first.mu.Lock()
	p := first.parts[0]
	first.mu.Unlock()
	p.snap.busy.Store(true) // as maybeTake hands a job over
	j, err := first.snap.encode(p, p.next.Load(), nil)
	if err != nil {
		t.Fatal(err)
	}
	first.snap.write(stopping, j)
	if got := sum(first.sm.writeErrors); got != 0 || p.snap.busy.Load() {
		t.Fatalf("a write cut short by the stop: %v write errors (want 0), partition still busy: %v", got, p.snap.busy.Load())
	}
	first.stop(t)
	if got := sum(first.sm.writes); got != 2 || !coversEnd(first.Consumer) {
		t.Fatalf("shutdown wrote %v snapshots (covering the end: %v), want one per partition", got, coversEnd(first.Consumer))
	}

	stopped := logEnd(t, c, c.Topic)
	produce(2000, 300)
	second := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "second consumer caught up", func() bool { return caughtUp(t, c, second) }, progress(second))
	for _, pp := range second.Progress().Partitions {
		if pp.Snapshot == nil || pp.Snapshot.Source != sourceSnapshot || pp.From != stopped[pp.Partition] {
			t.Errorf("partition %d restored from %+v at %d, want the snapshot of offset %d", pp.Partition, pp.Snapshot, pp.From, stopped[pp.Partition])
		}
	}

	// A third instance joins: the generation ends, second snapshots both partitions before
	// it rejoins, and third takes one over from that snapshot.
	produce(2300, 200)
	eventually(t, 20*time.Second, "second consumer caught up again", func() bool { return caughtUp(t, c, second) }, progress(second))
	before := logEnd(t, c, c.Topic)
	third := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 30*time.Second, "partitions split", func() bool { return caughtUp(t, c, second, third) && len(third.Progress().Partitions) == 1 },
		progress(second, third))
	pp := third.Progress().Partitions[0]
	if pp.Snapshot == nil || pp.Snapshot.Source != sourceSnapshot || pp.From != before[pp.Partition] {
		t.Errorf("third restored partition %d from %+v at %d, want the final snapshot of offset %d", pp.Partition, pp.Snapshot, pp.From, before[pp.Partition])
	}

	reference := start(t, testConfig(c, "reference"), newTestStore(t, 0), t0) // a full replay
	eventually(t, 20*time.Second, "reference caught up", func() bool { return caughtUp(t, c, reference) }, progress(reference))
	now := t0.UnixMilli()
	for k := range 50 {
		key := fmt.Sprintf("k%d", k)
		want, err1 := reference.store.ReadAt(now, "latency_ms", key, 5*time.Minute, []float64{0.5, 0.99})
		owner := second
		if murmurPartition(key, 2) == int(pp.Partition) {
			owner = third
		}
		got, err2 := owner.store.ReadAt(now, "latency_ms", key, 5*time.Minute, []float64{0.5, 0.99})
		if err1 != nil || err2 != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: restored %+v (%v), full replay %+v (%v)", key, got, err2, want, err1)
		}
	}
}

// snapshotAges is slide_snapshot_age_seconds by partition, as /metrics shows it.
func snapshotAges(t *testing.T, r *running) map[string]float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ages := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "slide_snapshot_age_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			ages[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return ages
}

// slide_snapshot_age_seconds is what operating.md says to alert on ("when it passes a few
// --snapshot-intervals"), so it must pass them exactly when a partition's state goes
// without a snapshot: not for a partition that is idle (its last snapshot still covers
// every record read, and is rewritten only every half restore span), and yes for one of
// which no snapshot was ever written (every write failing, the topic gone since a broker
// restarted empty), which had no series at all.
func TestSnapshotAgeIsAlertable(t *testing.T) {
	c := kafkatest.Start(t, "events", 2)
	t0 := time.Now()
	msgs := make([]kafka.Message, 200)
	for i := range msgs {
		ev := window.Event{TS: t0.UnixMilli() - int64(len(msgs)-i)*10, Metric: "latency_ms", Key: fmt.Sprintf("k%d", i%20), Value: float64(1 + i)}
		msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)}
	}
	c.Produce(t, msgs...)

	const interval = 100 * time.Millisecond
	cfg := testConfig(c, "idle")
	cfg.MaxWait = 100 * time.Millisecond
	cfg.Snapshots = SnapshotConfig{Interval: interval, ChunkBytes: 1024}
	idle := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "snapshots of the end", func() bool { return caughtUp(t, c, idle) && coversEnd(idle.Consumer) }, progress(idle))
	// Nothing more arrives: the snapshots stay as they are while interval after interval passes.
	eventually(t, 20*time.Second, "the last snapshots 20 intervals old", func() bool {
		idle.mu.Lock()
		defer idle.mu.Unlock()
		for _, p := range idle.parts {
			if time.Since(time.UnixMilli(p.snap.written.Load())) < 20*interval {
				return false
			}
		}
		return true
	})
	ages := snapshotAges(t, idle)
	if len(ages) != 2 {
		t.Fatalf("ages of %d partitions, want 2: %v", len(ages), ages)
	}
	for part, age := range ages {
		if age > 10*interval.Seconds() {
			t.Errorf("idle partition %s: snapshot age %.3fs, over 10 intervals (%v) though its snapshot covers every record", part, age, interval)
		}
	}
	idle.stop(t)

	// A snapshot interval longer than the test: none is written after assignment, and the
	// age counts from the assignment.
	cfg = testConfig(c, "never")
	cfg.Snapshots = SnapshotConfig{Interval: time.Hour, ChunkBytes: 1024}
	never := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "caught up", func() bool { return caughtUp(t, c, never) }, progress(never))
	caught := time.Now()
	ages = snapshotAges(t, never)
	if len(ages) != 2 {
		t.Fatalf("no snapshot written: ages of %d partitions, want 2 (the alert cannot fire): %v", len(ages), ages)
	}
	never.mu.Lock()
	for _, p := range never.parts {
		if age, most := ages[p.label], caught.Sub(p.assigned).Seconds(); age <= 0 || age > most+1 {
			t.Errorf("partition %s, assigned %.3fs ago: snapshot age %.3fs", p.label, most, age)
		}
	}
	never.mu.Unlock()

	// Snapshots off: no age to alert on.
	cfg = testConfig(c, "off")
	off := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "caught up", func() bool { return caughtUp(t, c, off) }, progress(off))
	if ages := snapshotAges(t, off); len(ages) != 0 {
		t.Errorf("snapshots off: ages %v", ages)
	}
}

// A snapshot topic that disappears under a running instance (a broker restarted empty, the
// topic deleted) is created again at the next failed write, as at start: snapshots resume
// instead of failing every interval until the instance restarts.
func TestSnapshotTopicRecreatedAfterLoss(t *testing.T) {
	c := kafkatest.Start(t, "events", 2)
	t0 := time.Now()
	produce := func(from, n int) {
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			ev := window.Event{TS: t0.UnixMilli() - int64(n-i)*10, Metric: "latency_ms", Key: fmt.Sprintf("k%d", (from+i)%20), Value: float64(1 + i)}
			msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)}
		}
		c.Produce(t, msgs...)
	}
	produce(0, 200)
	cfg := testConfig(c, "lost")
	cfg.MaxWait = 100 * time.Millisecond
	cfg.Snapshots = SnapshotConfig{Interval: 50 * time.Millisecond, ChunkBytes: 1024}
	r := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "snapshots of the end", func() bool { return caughtUp(t, c, r) && coversEnd(r.Consumer) }, progress(r))

	cl := &kafka.Client{Addr: kafka.TCP(c.Addr)}
	resp, err := cl.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{r.snap.cfg.Topic}})
	if err == nil {
		err = resp.Errors[r.snap.cfg.Topic]
	}
	if err != nil {
		t.Fatalf("deleting the snapshot topic: %v", err)
	}
	produce(200, 200)
	end := logEnd(t, c, c.Topic)
	eventually(t, 20*time.Second, "snapshots of the new end", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range r.parts {
			if p.snap.wroteOff.Load() < end[p.id] {
				return false
			}
		}
		return len(r.parts) == 2
	},
		progress(r), func() string { return fmt.Sprintf("write errors: %v", sum(r.sm.writeErrors)) })

	r.stop(t)
	second := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "second caught up", func() bool { return caughtUp(t, c, second) }, progress(second))
	if got := sum(second.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded)); got != 2 {
		t.Errorf("%v partitions loaded from a snapshot, want 2", got)
	}
}

// Two deployments of one group name (the default, slide) reading different topics, given one
// --snapshot-topic by mistake: snapshot keys name the group and partition only, so the one
// restarting found the other's snapshots and loaded them, its windows holding the other
// topic's series and missing its own records below the other's offsets, without a word.
// The snapshot is refused as other_topic instead, and the windows are a full replay's.
func TestSnapshotOfAnotherTopicIsNotLoaded(t *testing.T) {
	c := kafkatest.Start(t, "events", 2, "payments")
	other := *c
	other.Topic = "payments"
	t0 := time.Now()
	produce := func(to *kafkatest.Cluster, prefix string, n int) {
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			ev := window.Event{TS: t0.UnixMilli() - int64(n-i)*10, Metric: "latency_ms", Key: fmt.Sprintf("%s%d", prefix, i%10), Value: float64(1 + i%300)}
			msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)}
		}
		to.Produce(t, msgs...)
	}
	produce(&other, "pay", 300)
	produce(c, "ev", 900)
	snaps := SnapshotConfig{Interval: 20 * time.Millisecond, ChunkBytes: 1024, Topic: "shared-snapshots"}

	cfg := testConfig(&other, "slide")
	cfg.Snapshots = snaps
	payments := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "payments caught up and snapshotted", func() bool {
		return caughtUp(t, &other, payments) && coversEnd(payments.Consumer)
	}, progress(payments))
	payments.stop(t)

	cfg = testConfig(c, "slide")
	cfg.Snapshots = snaps
	events := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "events caught up", func() bool { return caughtUp(t, c, events) }, progress(events))
	if got := sum(events.sm.restores.WithLabelValues(sourceLog, reasonOtherTopic)); got != 2 {
		t.Errorf("%v partitions refused another topic's snapshot, want 2 (loaded: %v)", got, sum(events.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded)))
	}
	now := t0.UnixMilli()
	for _, k := range []string{"pay0", "pay9"} {
		if a, err := events.store.ReadAt(now, "latency_ms", k, 5*time.Minute, nil); err == nil {
			t.Errorf("topic events holds %s of topic payments: %+v", k, a)
		}
	}
	a, err := events.store.ReadMerged(now, "latency_ms", func(k string) bool { return strings.HasPrefix(k, "ev") }, 5*time.Minute, nil)
	if err != nil || a.Count != 900 {
		t.Errorf("topic events: %+v (%v), want the 900 events produced", a, err)
	}
}

// A restart that changes how records become events (a span dimension dropped, a metric
// renamed in an event map) loaded the snapshot of series the log no longer makes, and kept
// them for the restore span beside the new ones. SnapshotConfig.Events is written with each
// snapshot: the same rules load it, other rules replay the log (config_changed).
func TestSnapshotOfOtherEventRulesIsReplayed(t *testing.T) {
	c := kafkatest.Start(t, "events", 2)
	t0 := time.Now()
	msgs := make([]kafka.Message, 400)
	for i := range msgs {
		ev := window.Event{TS: t0.UnixMilli() - int64(len(msgs)-i)*10, Metric: "latency_ms", Key: fmt.Sprintf("k%d", i%10), Value: float64(1 + i)}
		msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)}
	}
	c.Produce(t, msgs...)
	const before, after = "otlp_proto span-key=service.name span-dimensions=http.route", "otlp_proto span-key=service.name span-dimensions="
	run := func(events string) *running {
		cfg := testConfig(c, "rules")
		cfg.Snapshots = SnapshotConfig{Interval: 20 * time.Millisecond, ChunkBytes: 1024, Events: events}
		r := start(t, cfg, newTestStore(t, 0), t0)
		eventually(t, 20*time.Second, "caught up and snapshotted", func() bool { return caughtUp(t, c, r) && coversEnd(r.Consumer) }, progress(r))
		r.stop(t)
		return r
	}
	run(before)
	if same := run(before); sum(same.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded)) != 2 {
		t.Errorf("the same rules: %v partitions loaded their snapshot, want 2", sum(same.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded)))
	}
	other := run(after)
	if got := sum(other.sm.restores.WithLabelValues(sourceLog, reasonConfigChanged)); got != 2 {
		t.Errorf("other rules: %v partitions replayed the log as config_changed, want 2 (loaded: %v)", got, sum(other.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded)))
	}
}

// A snapshot taken while the instance's clock was far ahead (a wall clock that jumped, then
// was corrected) holds nothing: every event had left the windows at that clock. Loaded at the
// corrected clock, it moved the replay past records that are inside the windows again, and
// the windows stayed empty. A snapshot taken ahead of now by more than the skew is refused
// (future), as its rings would be, and the log is replayed.
func TestSnapshotTakenAheadOfTheClockIsReplayed(t *testing.T) {
	c := kafkatest.Start(t, "events", 2)
	t0 := time.Now()
	msgs := make([]kafka.Message, 200)
	for i := range msgs {
		ev := window.Event{TS: t0.UnixMilli() - int64(len(msgs)-i)*10, Metric: "latency_ms", Key: fmt.Sprintf("k%d", i%10), Value: float64(1 + i)}
		msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev), Time: t0}
	}
	c.Produce(t, msgs...)
	cfg := testConfig(c, "clock")
	cfg.Snapshots = SnapshotConfig{Interval: 20 * time.Millisecond, ChunkBytes: 1024}
	ahead := start(t, cfg, newTestStore(t, 0), t0.Add(time.Hour))
	eventually(t, 20*time.Second, "caught up and snapshotted an hour ahead", func() bool { return caughtUp(t, c, ahead) && coversEnd(ahead.Consumer) }, progress(ahead))
	ahead.stop(t)

	back := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "caught up at the corrected clock", func() bool { return caughtUp(t, c, back) }, progress(back))
	a, err := back.store.ReadMerged(t0.UnixMilli(), "latency_ms", func(string) bool { return true }, 5*time.Minute, nil)
	if err != nil || a.Count != 200 {
		t.Errorf("windows at the corrected clock: %+v (%v), want the 200 events of the last 2 s (restores: %v from a snapshot, %v future)", a, err,
			sum(back.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded)), sum(back.sm.restores.WithLabelValues(sourceLog, reasonFuture)))
	}
}

// A partition with no snapshot (or one refused without an error) logged its replay with
// err=<nil>, which reads like a failure that lost its message: the line says why instead.
func TestSnapshotReplayLogSaysWhy(t *testing.T) {
	c := kafkatest.Start(t, "events", 1)
	t0 := time.Now()
	ev := window.Event{TS: t0.UnixMilli() - 10, Metric: "latency_ms", Key: "k", Value: 1}
	c.Produce(t, kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)})
	var logs proctest.Buffer
	cfg := testConfig(c, "why")
	cfg.Snapshots = SnapshotConfig{Interval: time.Hour}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "caught up", func() bool { return caughtUp(t, c, r) }, progress(r))
	line := ""
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "no usable snapshot") {
			line = l
		}
	}
	if !strings.Contains(line, "reason=missing") || !strings.Contains(line, `why="no snapshot of this partition`) || strings.Contains(line, "err=") {
		t.Errorf("the replay's log line: %q; want reason=missing with why=\"no snapshot of this partition…\" and no err", line)
	}
}

// Serve started before anything produced to its events topic: the snapshot topic was
// created at once with one partition (the events topic had none), so every partition's
// snapshots shared it and each restore read the others' (80 MB read for a 20 MB snapshot
// of 100,000 series). It waits for the events topic and takes its partition count.
func TestSnapshotTopicWaitsForTheEventsTopic(t *testing.T) {
	c := kafkatest.Start(t, "other", 1)
	cfg := testConfig(c, "early")
	cfg.Topic = "late-events"
	cfg.Snapshots = SnapshotConfig{Interval: time.Minute}
	cons, err := New(cfg, newTestStore(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.snap.w.Close() })
	if ok, retry := cons.snap.ensureTopic(context.Background()); ok || !retry {
		t.Fatalf("no events topic yet: ensureTopic ok %v retry %v, want false true (%d snapshot partitions)", ok, retry, cons.snap.parts.Load())
	}
	cl := &kafka.Client{Addr: kafka.TCP(c.Addr)}
	resp, err := cl.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: cfg.Topic, NumPartitions: 3, ReplicationFactor: 1}}})
	if err == nil {
		err = resp.Errors[cfg.Topic]
	}
	if err != nil {
		t.Fatalf("creating the events topic: %v", err)
	}
	if ok, _ := cons.snap.ensureTopic(context.Background()); !ok {
		t.Fatal("events topic there: no snapshot topic")
	}
	if got := cons.snap.parts.Load(); got != 3 {
		t.Errorf("snapshot topic of %d partitions, want 3 as the events topic", got)
	}
}

// A partition restored before the start's check of the snapshot topic was done (the topic's
// creation slow to answer) replayed its whole log without looking for a snapshot, and said
// nothing. The broker here holds the snapshot topic's creation until the partition is
// restored, or a second at most: the restore must wait for the check, then look.
func TestRestoreWaitsForTheSnapshotTopicCheck(t *testing.T) {
	c := kafkatest.Start(t, "events", 1)
	t0 := time.Now()
	ev := window.Event{TS: t0.UnixMilli() - 10, Metric: "latency_ms", Key: "k", Value: 1}
	c.Produce(t, kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)})
	var logs proctest.Buffer
	cfg := testConfig(c, "slowcheck")
	cfg.Snapshots = SnapshotConfig{Interval: time.Hour}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var r *running
	var ready atomic.Bool
	k := c.Kfake()
	k.ControlKey(kmsg.CreateTopics.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		k.SleepControl(func() { // the broker serves the consumer meanwhile
			polltest.Until(time.Second, time.Millisecond, func() bool { return ready.Load() && r.Progress().Ready })
		})
		return nil, nil, false // then the broker creates it
	})
	r = start(t, cfg, newTestStore(t, 0), t0)
	ready.Store(true)
	eventually(t, 20*time.Second, "caught up", func() bool { return caughtUp(t, c, r) }, progress(r))
	if !strings.Contains(logs.String(), `no usable snapshot, replaying the log" partition=0 reason=missing`) {
		t.Errorf("the partition did not look for a snapshot; the log:\n%s", logs.String())
	}
}

// A generation that ended while a partition's restore waited for the snapshot topic's check
// (or read its snapshot) left the partition marked as having tried one: kept by the next
// generation, as a partition still assigned is, it replayed its whole log without looking
// for its snapshot, and its status stayed at the phase it was cut in. The next generation's
// worker must look again.
func TestRestoreCutByTheGenerationLooksAgain(t *testing.T) {
	c := kafkatest.Start(t, "events", 1)
	t0 := time.Now()
	ev := window.Event{TS: t0.UnixMilli() - 10, Metric: "latency_ms", Key: "k", Value: 1}
	c.Produce(t, kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)})
	var logs proctest.Buffer
	cfg := testConfig(c, "cut")
	cfg.Snapshots = SnapshotConfig{Interval: time.Hour}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cons, err := New(cfg, newTestStore(t, 0), WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.snap.w.Close() })
	dec, err := event.NewDecoder(event.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{id: 0, label: "0", from: 0, target: 1, assigned: time.Now(), lastSent: -1, dec: dec,
		events: cons.m.events.WithLabelValues("0"), bytes: cons.m.bytes.WithLabelValues("0"),
		lag: cons.m.lag.WithLabelValues("0"), lagSec: cons.m.lagSeconds.WithLabelValues("0")}

	// The first generation ends while the start's check of the snapshot topic is not done.
	ended, end := context.WithCancel(context.Background())
	end()
	cons.consume(ended, p)

	// The check is done; the next generation keeps the partition and runs its worker again.
	if ok, _ := cons.snap.ensureTopic(context.Background()); !ok {
		t.Fatal("no snapshot topic")
	}
	cons.snap.settle()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cons.consume(ctx, p) }()
	deadline := time.Now().Add(20 * time.Second)
	for !p.restored.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if !strings.Contains(logs.String(), `no usable snapshot, replaying the log" partition=0 reason=missing`) {
		t.Errorf("the next generation did not look for the partition's snapshot (restored %v); the log:\n%s", p.restored.Load(), logs.String())
	}
}

// chunkValue is the value of chunk i of snapshot id carrying data, as the writer's chunker cuts it.
func chunkValue(id uint64, i int, data []byte) []byte {
	v := appendChunkHeader(make([]byte, 0, chunkHeaderLen+len(data)), id, i)
	return append(v, data...)
}

// TestChunkerCutsAsThePayloadComes: the chunker cuts what it is written into chunks of
// exactly size payload bytes (the last fewer) whatever the writes' sizes, each parsing back
// with its id and index, and keeps the payload's size and CRC; an empty payload is one
// empty chunk, and a stop error fails the write.
func TestChunkerCutsAsThePayloadComes(t *testing.T) {
	payload := make([]byte, 1000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, step := range []int{1, 33, 100, 250, 1000} {
		c := &chunker{id: 9, size: 100}
		for at := 0; at < len(payload); at += step {
			if n, err := c.Write(payload[at:min(at+step, len(payload))]); err != nil || n != min(step, len(payload)-at) {
				t.Fatalf("write of %d: %d, %v", step, n, err)
			}
		}
		var got []byte
		for i, v := range c.values() {
			id, idx, data, reason := parseChunk(v)
			if reason != "" || id != 9 || idx != uint64(i) || len(data) != 100 {
				t.Fatalf("writes of %d: chunk %d parses as id %d, index %d, %d bytes, %q", step, i, id, idx, len(data), reason)
			}
			got = append(got, data...)
		}
		if !bytes.Equal(got, payload) || c.total != int64(len(payload)) || c.crc != crc32.Checksum(payload, castagnoli) {
			t.Fatalf("writes of %d: the chunks carry %d bytes (equal %v), total %d, crc ok %v", step, len(got), bytes.Equal(got, payload), c.total, c.crc == crc32.Checksum(payload, castagnoli))
		}
	}
	empty := (&chunker{id: 1, size: 100}).values()
	if _, idx, data, reason := parseChunk(empty[0]); len(empty) != 1 || idx != 0 || len(data) != 0 || reason != "" {
		t.Fatalf("an empty payload: %d chunks, the first index %d with %d bytes (%q)", len(empty), idx, len(data), reason)
	}
	stopped := &chunker{id: 1, size: 100, stop: func() error { return context.DeadlineExceeded }}
	if _, err := stopped.Write(payload); !errors.Is(err, context.DeadlineExceeded) || len(stopped.chunks) != 0 {
		t.Fatalf("a stopped chunker: %v, %d chunks", err, len(stopped.chunks))
	}
}
