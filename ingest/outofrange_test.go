package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/proctest"
)

// deleteRecords deletes the records of topic/partition below offset, as retention does,
// with a DeleteRecords request (kafka-go has no client for it).
func deleteRecords(t *testing.T, addr, topic string, partition int32, offset int64) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 1
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	msg := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, 1)
	if _, err := conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	if err := resp.ReadFrom(body[4:]); err != nil { // after the correlation id
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 ||
		resp.Topics[0].Partitions[0].LowWatermark != offset {
		t.Fatalf("DeleteRecords answered %+v", resp.Topics)
	}
}

// TestFetchSkipsRecordsDeletedByRetention: a partition whose next offset was deleted by
// retention while it was not being read (a lagging consumer whose connection dropped, a
// replay planned just before the log start moved) moves on to the log start instead of
// seeking to the deleted offset forever: the remaining records are observed and the
// partition restores.
func TestFetchSkipsRecordsDeletedByRetention(t *testing.T) {
	cl := kafkatest.Start(t, "events", 1)
	ts := time.UnixMilli(1_764_489_600_000)
	var msgs []kafka.Message
	for i := range 10 {
		msgs = append(msgs, kafka.Message{Time: ts, Value: fmt.Appendf(nil,
			`{"ts":%d,"key":"k","metric":"latency_ms","value":%d}`, ts.UnixMilli(), i)})
	}
	cl.ProduceTo(t, 0, msgs...)
	deleteRecords(t, cl.Addr, "events", 0, 6)

	store := newTestStore(t, 0)
	c, err := New(Config{Brokers: []string{cl.Addr}, JoinGroupBackoff: 10 * time.Millisecond, MaxWait: 500 * time.Millisecond},
		store, WithClock(func() time.Time { return ts.Add(time.Second) }))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := event.NewDecoder(event.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{id: 0, label: "0", from: 2, target: 10, assigned: time.Now(), lastSent: -1, dec: dec,
		events: c.m.events.WithLabelValues("0"), bytes: c.m.bytes.WithLabelValues("0"), lag: c.m.lag.WithLabelValues("0"), lagSec: c.m.lagSeconds.WithLabelValues("0")}
	p.next.Store(2) // planned before records 0..5 were deleted

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.consume(ctx, p) }()
	deadline := time.Now().Add(15 * time.Second)
	for !p.restored.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if !p.restored.Load() || p.next.Load() != 10 {
		t.Fatalf("partition stuck: restored %v, next %d, want restored at 10", p.restored.Load(), p.next.Load())
	}
	a, err := store.ReadAt(ts.Add(time.Second).UnixMilli(), "latency_ms", "k", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Count != 4 || a.Sum != 6+7+8+9 {
		t.Fatalf("observed count %d sum %v, want the 4 records left (sum 30)", a.Count, a.Sum)
	}
}

// TestOffsetResetAfterBrokerLostLog is the sixth probe: the broker restarted with an
// empty log while slide held offset 30 of the old one, and records were written meanwhile.
// Reading goes back to the first record stamped after the last one processed (not to the
// log end, which skipped every record written meanwhile and counted none of them), the
// reset is counted with its reason and logged once, and the records written meanwhile are
// new: a bad one among them is refused and counted, not skipped as a replay. When the
// truncated log still holds records already processed (an unclean leader election), those
// are not counted twice.
func TestOffsetResetAfterBrokerLostLog(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lastSeen  int   // index of the last record already processed; -1: none of these
		wantCount int64 // records counted after the reset
	}{
		{"broker restarted empty", -1, 9},
		{"log truncated below records processed", 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := kafkatest.Start(t, "events", 1)
			now := time.UnixMilli(1_764_489_600_000)
			stamp := func(i int) time.Time { return now.Add(time.Duration(i-10) * time.Second) }
			var msgs []kafka.Message
			for i := range 10 {
				v := fmt.Appendf(nil, `{"ts":%d,"key":"k","metric":"latency_ms","value":1}`, stamp(i).UnixMilli())
				if i == 7 {
					v = []byte("not json")
				}
				msgs = append(msgs, kafka.Message{Time: stamp(i), Value: v})
			}
			cl.ProduceTo(t, 0, msgs...)

			logs := &proctest.Buffer{}
			store := newTestStore(t, 0)
			c, err := New(Config{Brokers: []string{cl.Addr}, JoinGroupBackoff: 10 * time.Millisecond, MaxWait: 500 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(logs, nil))}, store, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			dec, err := event.NewDecoder(event.Config{})
			if err != nil {
				t.Fatal(err)
			}
			p := &partition{id: 0, label: "0", from: 0, target: 0, assigned: time.Now(), lastSent: -1, dec: dec,
				events: c.m.events.WithLabelValues("0"), bytes: c.m.bytes.WithLabelValues("0"), lag: c.m.lag.WithLabelValues("0"), lagSec: c.m.lagSeconds.WithLabelValues("0")}
			p.restored.Store(true)
			p.next.Store(30) // the old log's offset
			p.committed.Store(30)
			p.lastTS = stamp(tc.lastSeen).UnixMilli()
			if tc.lastSeen < 0 {
				p.lastTS = now.Add(-time.Hour).UnixMilli()
			}

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); c.consume(ctx, p) }()
			deadline := time.Now().Add(15 * time.Second)
			for p.next.Load() != 10 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			<-done
			a, err := store.ReadAt(now.UnixMilli(), "latency_ms", "k", 5*time.Minute, nil)
			if err != nil || int64(a.Count) != tc.wantCount {
				t.Errorf("counted %d (%v), want %d; next %d", a.Count, err, tc.wantCount, p.next.Load())
			}
			if got := testutil.ToFloat64(c.m.offsetResets.WithLabelValues("0", "log_truncated")); got != 1 {
				t.Errorf("slide_ingest_offset_resets_total{partition=0,reason=log_truncated} = %v, want 1", got)
			}
			if got := testutil.ToFloat64(c.m.rejectedBy[event.ReasonInvalidJSON]); got != 1 {
				t.Errorf("the bad record written meanwhile: rejected %v, want 1 (not skipped as a replay)", got)
			}
			if n := strings.Count(logs.String(), "offset out of range"); n != 1 {
				t.Errorf("logged the reset %d times, want once:\n%s", n, logs)
			}
		})
	}
}

// TestRestoreIgnoresFutureStampedHead is the seventh probe: one record stamped an
// hour ahead at a partition's head, then 300 records older than the restore span, then one
// inside it. A broker's time lookup answers with the head (its running maximum of
// timestamps reaches every restore start), so every restore replayed the whole partition;
// the search over record timestamps passes the future record over and starts at the last.
func TestRestoreIgnoresFutureStampedHead(t *testing.T) {
	cl := kafkatest.Start(t, "events", 1)
	now := time.Now()
	line := func(ts time.Time) []byte {
		return fmt.Appendf(nil, `{"ts":%d,"key":"k","metric":"latency_ms","value":1}`, ts.UnixMilli())
	}
	msgs := []kafka.Message{{Time: now.Add(time.Hour), Value: line(now.Add(time.Hour))}}
	for range 300 {
		old := now.Add(-2 * time.Hour)
		msgs = append(msgs, kafka.Message{Time: old, Value: line(old)})
	}
	msgs = append(msgs, kafka.Message{Time: now, Value: line(now)})
	cl.ProduceTo(t, 0, msgs...)

	store := newTestStore(t, 0)
	r := start(t, testConfig(cl, "future-head"), store, now)
	eventually(t, 10*time.Second, "the consumer to catch up", func() bool { return caughtUp(t, cl, r) }, progress(r))
	pr := r.Progress()
	if len(pr.Partitions) != 1 || pr.Partitions[0].From != 301 {
		t.Errorf("restore planned %+v, want partition 0 replayed from offset 301 (one record)", pr.Partitions)
	}
}
