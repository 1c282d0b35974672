package kafkarange_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/kafkarange"
	"github.com/slide-metrics/slide/internal/kafkatest"
)

// TestEach reads [from, end) of a partition on the embedded broker, in log order, batch
// after batch (small batches), and stops early on ErrStop (no error) or on fn's own error
// (returned).
func TestEach(t *testing.T) {
	c := kafkatest.Start(t, "r", 1)
	msgs := make([]kafka.Message, 300)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte("k"), Value: []byte(strconv.Itoa(i))}
	}
	for i := 0; i < len(msgs); i += 50 { // several record batches
		c.ProduceRecords(t, 0, msgs[i:i+50]...)
	}
	conn, err := kafka.DefaultDialer.DialLeader(context.Background(), "tcp", c.Addr, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cfg := kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 1 << 10, MaxWait: 100 * time.Millisecond}
	var got []int64
	batches := 0
	if err := kafkarange.Each(conn, 70, 230, cfg, 2*time.Second, func(m kafka.Message) error {
		got = append(got, m.Offset)
		if string(m.Value) != strconv.FormatInt(m.Offset, 10) {
			t.Fatalf("offset %d holds %q", m.Offset, m.Value)
		}
		return nil
	}, func() { batches++ }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 160 || got[0] != 70 || got[159] != 229 || batches < 2 {
		t.Fatalf("read %d records (%v … %v) in %d batches, want 70 … 229 in several", len(got), got[:min(1, len(got))], got[max(len(got)-1, 0):], batches)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("offset %d after %d", got[i], got[i-1])
		}
	}
	n := 0
	if err := kafkarange.Each(conn, 0, 300, cfg, 2*time.Second, func(kafka.Message) error {
		if n++; n == 5 {
			return kafkarange.ErrStop
		}
		return nil
	}, nil); err != nil || n != 5 {
		t.Fatalf("ErrStop at the 5th record: %d records, %v", n, err)
	}
	boom := errors.New("boom")
	if err := kafkarange.Each(conn, 0, 300, cfg, 2*time.Second, func(kafka.Message) error { return boom }, nil); !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v", err)
	}
}
