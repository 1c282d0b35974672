package ingest

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// gateConn lets the first open bytes of what it reads through, then holds every read until
// release is closed: a response whose header arrived and whose records have not.
type gateConn struct {
	net.Conn
	open    int
	release chan struct{}
}

func (g *gateConn) Read(p []byte) (int, error) {
	if g.open <= 0 {
		<-g.release
		return g.Conn.Read(p)
	}
	n, err := g.Conn.Read(p[:min(len(p), g.open)])
	g.open -= n
	return n, err
}

// TestLagIsKnownWhenTheHeaderIs: a response's end of the log is told (rawFetch.seen, which
// sets the consumer's lag gauge) as soon as the partition's header is read, before any of
// its records has arrived. It was set when the batch's first records reached the applier,
// so a batch of megabytes over a slow link showed the lag of before (0) while it arrived.
func TestLagIsKnownWhenTheHeaderIs(t *testing.T) {
	records := recordBatch(0, 0, strings.Repeat("s", 1<<20))
	header := len(fetchResponse(records)) - len(records)
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	var fetches atomic.Int32
	go serveFetches(server, records, func(size, _ int) int { return size }, &fetches)
	conn := &gateConn{Conn: client, open: header + 100, release: make(chan struct{})}
	seen := make(chan int64, 1) // the first end told
	c := &Consumer{cfg: Config{MaxWait: time.Second, MaxBytes: 1000}, now: time.Now}
	f := &rawFetch{fc: &fetchConn{Conn: conn, r: bufio.NewReaderSize(conn, 256<<10)}, topic: "t", id: 0,
		seen: func(end int64) {
			select {
			case seen <- end:
			default:
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ap := newApplier()
	var applied atomic.Int32
	go func() {
		for ch := range ap.full {
			applied.Add(int32(len(ch.msgs)))
			if len(ch.msgs) > 0 {
				cancel()
			}
			ap.free <- ch
		}
		close(ap.done)
	}()
	done := make(chan error, 1)
	go func() {
		_, err := c.readRaw(ctx, f, 0, ap)
		close(ap.full)
		done <- err
	}()
	got := int64(-1)
	select {
	case got = <-seen:
	case <-ctx.Done():
	}
	if n := applied.Load(); got != 100 || n != 0 {
		t.Errorf("with the header read and the records not: the end told %d (want the high watermark, 100), %d records applied (want 0)", got, n)
	}
	close(conn.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-ap.done
	if applied.Load() != 1 {
		t.Errorf("%d records applied once released, want 1", applied.Load())
	}
}

// The end a response tells (rawFetch.seen, the lag gauge) is its last stable offset under
// read_committed, its high watermark else, and nothing for a response that failed or whose
// partition carries an error; f.top keeps the high watermark either way.
func TestLagEndTold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		level     kafka.IsolationLevel
		part      fetchPart
		err       error
		told, top int64 // -1: none
	}{
		{"read_uncommitted", kafka.ReadUncommitted, fetchPart{hwm: 100, lso: 80}, nil, 100, 100},
		{"read_committed", kafka.ReadCommitted, fetchPart{hwm: 100, lso: 80}, nil, 80, 100},
		{"read_committed without an lso", kafka.ReadCommitted, fetchPart{hwm: 100, lso: -1}, nil, 100, 100},
		{"partition error", kafka.ReadCommitted, fetchPart{hwm: 100, lso: 80, err: kafka.NotLeaderForPartition}, nil, -1, -1},
		{"response error", kafka.ReadUncommitted, fetchPart{hwm: 100, lso: 80}, io.ErrUnexpectedEOF, -1, -1},
	} {
		var top atomic.Int64
		top.Store(-1)
		told := int64(-1)
		f := &rawFetch{level: tc.level, top: &top, seen: func(end int64) { told = end }}
		f.end(tc.part, tc.err)
		if told != tc.told || top.Load() != tc.top {
			t.Errorf("%s: told %d, top %d; want %d, %d", tc.name, told, top.Load(), tc.told, tc.top)
		}
	}
}
