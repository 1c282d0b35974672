package reliability_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// snapTopic is the snapshot topic of the default events topic.
const snapTopic = "events.slide-snapshots"

// snapFlags turn snapshots on fast: every 300 ms, in 128-byte chunks, so one snapshot of a
// partition is tens of records and a SIGKILL can land in the middle of one.
var snapFlags = []string{"--session-timeout", "3s", "--snapshot-interval", "300ms", "--snapshot-chunk-bytes", "128", "--log-level", "debug"}

// restores is how many partitions s restored from a snapshot, and from the log by reason.
func (s *slide) restores(t *testing.T) (fromSnapshot float64, fromLog map[string]float64) {
	t.Helper()
	fromLog = map[string]float64{}
	for _, r := range []string{"missing", "incomplete", "corrupt", "unknown_version", "too_old", "config_changed", "ahead_of_log", "read_error"} {
		if v := s.metric(t, "slide_snapshot_restore_total", "source", "log", "reason", r); v > 0 {
			fromLog[r] = v
		}
	}
	return s.metric(t, "slide_snapshot_restore_total", "source", "snapshot", "reason", "loaded"), fromLog
}

// takeOver starts a slide after prev was killed and waits until it has caught up.
func takeOver(t *testing.T, name, brokers, group string) *slide {
	t.Helper()
	s := startSlide(t, name, brokers, group, snapFlags...)
	eventually(t, 40*time.Second, name+" did not catch up", func() bool { return s.caughtUp(t) })
	return s
}

// written waits until s has written at least n more snapshots than it had at the call.
func waitWrites(t *testing.T, s *slide, n float64) {
	t.Helper()
	base := s.metric(t, "slide_snapshot_writes_total")
	eventually(t, 20*time.Second, s.Name+" wrote no snapshot", func() bool { return s.metric(t, "slide_snapshot_writes_total") >= base+n })
}

// Crashes around snapshots: right after one is written, in the middle of a chunked one, and
// between two. After each SIGKILL the next process restores all four partitions from the
// latest complete snapshot, replays the log after it, and answers every key equal to the
// oracle: nothing lost, nothing counted twice.
func TestSnapshotCrashRestoresExactly(t *testing.T) {
	_, brokers := brokerProc(t)
	o := newOracle()
	tr := newTraffic(t, brokers, o, 60, 7)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { tr.run(t, ctx, time.Hour, 10) }) // until cancelled: 1,000 events/s

	cur := startSlide(t, "slide-0", brokers, "snapcrash", snapFlags...)
	eventually(t, 30*time.Second, "slide-0 did not catch up", func() bool { return cur.caughtUp(t) })
	for i, kill := range []struct {
		when string
		wait func(s *slide)
	}{
		{"right after a snapshot", func(s *slide) { waitWrites(t, s, 4) }},
		{"during a chunked snapshot", func(s *slide) {
			waitWrites(t, s, 4)
			eventually(t, 20*time.Second, "no snapshot seen in progress", func() bool {
				out := s.Output()
				return strings.LastIndex(out, "writing snapshot") > strings.LastIndex(out, "snapshot written")
			})
		}},
		{"between snapshots", func(s *slide) {
			waitWrites(t, s, 4)
			time.Sleep(150 * time.Millisecond)
		}},
	} {
		kill.wait(cur)
		cur.Kill()
		// The kill must hit a snapshot in the middle: some partition's snapshot records end
		// with chunks and no manifest after them. A kill that just missed one (after the
		// manifest, before its log line) is another crash right after a snapshot: try again.
		for try := 0; i == 1; try++ {
			parts := unfinished(t, brokers, "snapcrash")
			if len(parts) > 0 {
				t.Logf("crash %s: unfinished chunk sets in partitions %v", kill.when, parts)
				break
			}
			if try == 4 {
				t.Fatalf("crash %s: five kills left no unfinished chunk set", kill.when)
			}
			cur = takeOver(t, fmt.Sprintf("slide-%d-retry-%d", i+1, try), brokers, "snapcrash")
			kill.wait(cur)
			cur.Kill()
		}
		time.Sleep(500 * time.Millisecond) // events arrive while nobody consumes
		cancel()                           // then stop, so the oracle holds what the log holds
		wg.Wait()
		cur = takeOver(t, fmt.Sprintf("slide-%d", i+1), brokers, "snapcrash")
		snap, fromLog := cur.restores(t)
		if snap != 4 || len(fromLog) != 0 {
			t.Errorf("crash %s: %v partitions restored from a snapshot, from the log %v; want all 4 from snapshots", kill.when, snap, fromLog)
		}
		checkAll(t, o, "5m", cur)
		if !strings.Contains(cur.Output(), "snapshot loaded, replaying the log after it") {
			t.Errorf("crash %s: no snapshot load logged", kill.when)
		}
		t.Logf("crash %s: %d events so far, %s restored all %d keys exactly", kill.when, o.count(), cur.Name, len(o.keys()))
		ctx, cancel = context.WithCancel(context.Background())
		wg.Go(func() { tr.run(t, ctx, time.Hour, 10) })
	}
	cancel()
	wg.Wait()
	tr.close(t)
	eventually(t, 30*time.Second, "the last slide did not catch up", func() bool { return cur.caughtUp(t) })
	checkAll(t, o, "5m", cur)
}

// Bad snapshots: the latest snapshot of partition 0 gets a corrupted manifest, that of 1 a
// manifest of an unknown version, that of 2 loses a chunk (a tombstone, as a truncated
// chunk set looks after compaction). The restart falls back to a full replay of exactly
// those three, counted by reason, restores partition 3 from its snapshot, and every window
// is still exact.
func TestSnapshotFallbackByReason(t *testing.T) {
	_, brokers := brokerProc(t)
	o := newOracle()
	tr := newTraffic(t, brokers, o, 60, 8)
	tr.run(t, context.Background(), 2*time.Second, 10)

	first := startSlide(t, "slide-1", brokers, "snapbad", snapFlags...)
	eventually(t, 30*time.Second, "slide-1 did not catch up", func() bool { return first.caughtUp(t) })
	eventually(t, 20*time.Second, "slide-1 did not snapshot every partition", func() bool { return first.metric(t, "slide_snapshot_writes_total") >= 4 })
	if err := first.Stop(15 * time.Second); err != nil { // no snapshot is written after this
		t.Fatal(err)
	}
	tr.run(t, context.Background(), time.Second, 10)
	tr.close(t)

	for p, mangle := range []func(key []byte, man []byte) kafka.Message{
		func(key, man []byte) kafka.Message { // a flipped bit in the payload checksum
			bad := append([]byte(nil), man...)
			bad[len(bad)-6] ^= 0x01
			return kafka.Message{Key: key, Value: bad}
		},
		func(key, man []byte) kafka.Message { // format version 9, checksum made right
			bad := append([]byte(nil), man...)
			bad[4] = 9
			binary.LittleEndian.PutUint32(bad[len(bad)-4:], crc32.Checksum(bad[:len(bad)-4], crc32.MakeTable(crc32.Castagnoli)))
			return kafka.Message{Key: key, Value: bad}
		},
		func(key, man []byte) kafka.Message { // chunk 0 of the manifest's chunk set deleted
			return kafka.Message{Key: fmt.Appendf(nil, "%s/%c/0", key, man[13])}
		},
	} {
		key := fmt.Appendf(nil, "snapbad/%d", p)
		man := latestRecord(t, brokers, p, key)
		produceTo(t, brokers, p, mangle(key, man))
	}

	second := startSlide(t, "slide-2", brokers, "snapbad", snapFlags...)
	eventually(t, 40*time.Second, "slide-2 did not catch up", func() bool { return second.caughtUp(t) })
	snap, fromLog := second.restores(t)
	want := map[string]float64{"corrupt": 1, "unknown_version": 1, "incomplete": 1}
	if snap != 1 || fmt.Sprint(fromLog) != fmt.Sprint(want) {
		t.Errorf("restored %v partitions from a snapshot and from the log %v; want 1 and %v", snap, fromLog, want)
	}
	for _, r := range []string{"corrupt", "unknown_version", "incomplete"} {
		if !strings.Contains(second.Output(), "reason="+r) {
			t.Errorf("no fallback with reason %s logged", r)
		}
	}
	checkAll(t, o, "5m", second)
}

// Rebalance with snapshots: a second instance joins the group and restores the partitions
// it takes over from the snapshots the first wrote, not from the log.
func TestSnapshotRebalanceRestoresFromSnapshot(t *testing.T) {
	_, brokers := brokerProc(t)
	o := newOracle()
	tr := newTraffic(t, brokers, o, 60, 9)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { tr.run(t, ctx, time.Hour, 10) })

	a := startSlide(t, "slide-a", brokers, "snaprebalance", snapFlags...)
	eventually(t, 30*time.Second, "slide-a did not catch up", func() bool { return a.caughtUp(t) })
	waitWrites(t, a, 8) // traffic keeps every partition busy: each interval writes four
	b := startSlide(t, "slide-b", brokers, "snaprebalance", snapFlags...)
	eventually(t, 30*time.Second, "the partitions were not split", func() bool {
		return len(a.partitions(t)) > 0 && len(b.partitions(t)) > 0 && len(a.partitions(t))+len(b.partitions(t)) == 4
	})
	cancel()
	wg.Wait()
	tr.close(t)
	for _, s := range []*slide{a, b} {
		eventually(t, 30*time.Second, s.Name+" did not catch up", func() bool { return s.caughtUp(t) })
	}
	snap, fromLog := b.restores(t)
	if owned := len(b.partitions(t)); snap != float64(owned) || len(fromLog) != 0 {
		t.Errorf("slide-b owns %d partitions, restored %v from snapshots and %v from the log", owned, snap, fromLog)
	}
	checkAll(t, o, "5m", a, b)
}

// latestRecord returns the value of the last record with key in partition p of the
// snapshot topic.
func latestRecord(t *testing.T, brokers string, p int, key []byte) []byte {
	t.Helper()
	var v []byte
	for _, m := range records(t, brokers, p) {
		if string(m.Key) == string(key) {
			v = m.Value
		}
	}
	if v == nil {
		t.Fatalf("no record %q in %s/%d", key, snapTopic, p)
	}
	return v
}

// records reads partition p of the snapshot topic.
func records(t *testing.T, brokers string, p int) []kafka.Message {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", brokers, snapTopic, p)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	first, last, err := conn.ReadOffsets()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Seek(first, kafka.SeekAbsolute); err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	for off := first; off < last; {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		batch := conn.ReadBatch(1, 10<<20)
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			out = append(out, m)
			off = m.Offset + 1
		}
		if err := batch.Close(); err != nil {
			t.Fatalf("reading %s/%d: %v", snapTopic, p, err)
		}
	}
	return out
}

// unfinished lists the partitions whose latest snapshot record of group is a chunk.
func unfinished(t *testing.T, brokers, group string) []int {
	t.Helper()
	var out []int
	for p := range 4 {
		recs := records(t, brokers, p)
		for i := len(recs) - 1; i >= 0; i-- {
			k := string(recs[i].Key)
			if k == fmt.Sprintf("%s/%d", group, p) {
				break
			}
			if strings.HasPrefix(k, fmt.Sprintf("%s/%d/", group, p)) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// produceTo writes msgs to partition p of the snapshot topic, one record a batch (a chunk
// may be as large as the topic allows).
func produceTo(t *testing.T, brokers string, p int, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(brokers), Topic: snapTopic, RequiredAcks: kafka.RequireAll, BatchSize: 1, BatchBytes: 64 << 20,
		Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return p })}
	defer w.Close()
	// The broker can answer the writer's first metadata with Unknown Topic Or Partition for
	// a topic slide created moments ago; that is retriable, so retry for a few seconds.
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err = w.WriteMessages(context.Background(), msgs...); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}
