package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/internal/kafkatest"
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
	dec, err := NewDecoder(DecoderConfig{})
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
