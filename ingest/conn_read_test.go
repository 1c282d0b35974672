package ingest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// countingConn counts the reads made on a connection's socket.
type countingConn struct {
	net.Conn
	reads *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

// The fetch connections read the socket through readBufferSize: a partition of 200 records of
// ~8 KB is consumed in far fewer socket reads than records (kafka-go alone, through its 4 KiB
// buffer, makes two or more a record), through the configured Dialer's DialFunc, and every
// event is counted.
func TestFetchReadsTheSocketInLargeReads(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "reads", 1)
	t0 := time.Now()
	const records, lines = 200, 100
	var b strings.Builder
	for i := range lines {
		fmt.Fprintf(&b, `{"ts":%d,"key":"tenant-%02d","metric":"latency_ms","value":%d.5}`+"\n", t0.UnixMilli()-1000, i%10, i)
	}
	msgs := make([]kafka.Message, records)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: []byte(b.String())}
	}
	for i := 0; i < records; i += 50 {
		c.Produce(t, msgs[i:i+50]...)
	}

	var reads atomic.Int64
	var nd net.Dialer
	cfg := testConfig(c, "reads")
	// The group's connections read through the same DialFunc: commits and heartbeats seldom,
	// so that a slow run's group traffic stays far below the records' reads.
	cfg.CommitInterval, cfg.HeartbeatInterval, cfg.SessionTimeout = time.Minute, 500*time.Millisecond, 6*time.Second
	cfg.Dialer = &kafka.Dialer{Timeout: 10 * time.Second, DialFunc: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, &reads}, nil
	}}
	r := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 10*time.Second, "the 200 records", func() bool { return caughtUp(t, c, r) }, progress(r))
	r.stop(t)
	if got := sum(r.m.events); got != records*lines {
		t.Fatalf("slide_ingest_events_total = %v, want %d", got, records*lines)
	}
	// A few tens of reads, the group's included; through kafka-go's buffer alone the records cost
	// 400 or more.
	if n := reads.Load(); n == 0 || n >= records {
		t.Errorf("%d socket reads for %d records of %d bytes, want 0 < reads < %d", n, records, b.Len(), records)
	}
}
