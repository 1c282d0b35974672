package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// serveFetches answers the consumer's own fetches on conn as a broker holding one record
// batch at offset 0 (records), whose response for a fetch asking for max bytes holds
// cut(len(records), max bytes) bytes of it. It counts the fetches.
func serveFetches(conn net.Conn, records []byte, cut func(size, maxBytes int) int, fetches *atomic.Int32) {
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		req := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, req); err != nil {
			return
		}
		fetches.Add(1)
		var recs []byte
		if offset := int64(binary.BigEndian.Uint64(req[len(req)-12:])); offset == 0 {
			recs = records[:cut(len(records), int(binary.BigEndian.Uint32(req[len(req)-4:])))]
		}
		resp := fetchResponse(recs)
		copy(resp[4:8], req[4:8]) // the request's correlation id
		if _, err := conn.Write(resp); err != nil {
			return
		}
	}
}

// fetchOversized reads partition 0 from offset 0 with the consumer's own fetch (MaxBytes
// 1,000) against serveFetches, until it has the batch's record or 100 fetches went by, and
// returns the record's value, the fetches made and readRaw's error.
func fetchOversized(t *testing.T, records []byte, cut func(size, maxBytes int) int) ([]byte, int32, error) {
	t.Helper()
	client, server := net.Pipe()
	defer client.Close()
	var fetches atomic.Int32
	go serveFetches(server, records, cut, &fetches)
	defer server.Close()
	c := &Consumer{cfg: Config{MaxWait: time.Second, MaxBytes: 1000}, now: time.Now}
	f := &rawFetch{fc: &fetchConn{Conn: client, r: bufio.NewReaderSize(client, 256<<10)}, topic: "t", id: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ap := newApplier()
	var got []byte
	go func() {
		for ch := range ap.full {
			for _, m := range ch.msgs {
				got = bytes.Clone(m.Value)
			}
			if got != nil || fetches.Load() >= 100 {
				cancel()
			}
			ap.free <- ch
		}
		close(ap.done)
	}()
	_, err := c.readRaw(ctx, f, 0, ap)
	close(ap.full)
	<-ap.done
	return got, fetches.Load(), err
}

// TestOwnFetchAsksForACutFirstBatchWhole: a record batch larger than the fetch's max bytes,
// from a broker that cuts it there instead of handing it over whole (KIP-74), is asked for
// whole by the next fetch, and read; a broker that cuts it even then is an error naming the
// batch, not the same fetch in a loop for ever (every fetch answered with nothing read,
// a partition stuck with no log line).
func TestOwnFetchAsksForACutFirstBatchWhole(t *testing.T) {
	value := strings.Repeat("v", 5000)
	records := recordBatch(0, 0, value)
	got, fetches, err := fetchOversized(t, records, func(size, maxBytes int) int { return min(size, maxBytes) })
	if err != nil || string(got) != value {
		t.Fatalf("a 5,000-byte record at max bytes 1,000 from a broker without KIP-74: %d bytes read in %d fetches, %v; want it read", len(got), fetches, err)
	}
	got, fetches, err = fetchOversized(t, records, func(size, maxBytes int) int { return min(size/2, maxBytes) })
	if err == nil || !strings.Contains(err.Error(), "cut short by the broker") || got != nil {
		t.Fatalf("a broker cutting the batch whatever is asked: %d bytes read in %d fetches, %v; want an error saying the batch is cut short", len(got), fetches, err)
	}
}

// TestOwnFetchKeepsNoOversizedBuffer: a batch read past MaxBytes (Kafka hands an oversized
// first batch over whole, KIP-74) is not kept by the fetcher for the next fetch, nor its
// records' copy by the chunk that is reused next: a partition that once read a 16 MB record
// held about 32 MB for as long as its connection lasted.
func TestOwnFetchKeepsNoOversizedBuffer(t *testing.T) {
	value := strings.Repeat("b", keepInflated+1)
	c := &Consumer{cfg: Config{MaxWait: time.Second, MaxBytes: 1000}, now: time.Now}
	resp := fetchResponse(recordBatch(0, 0, value))
	f := &rawFetch{fc: &fetchConn{Conn: nopDeadlines{}, r: bufio.NewReader(bytes.NewReader(resp))}, topic: "t", id: 0, corr: 1}
	var rr respReader
	part, err := f.response(&rr)
	if err != nil {
		t.Fatal(err)
	}
	ap := newApplier()
	ch := ap.take(true, 0, part.hwm)
	if next, err := c.readBatches(f, &rr, part.records, 0, &ch, ap, 0, part.hwm); err != nil || next != 1 || len(ch.msgs) != 1 {
		t.Fatalf("an oversized record handed over whole: %d records, next %d, %v", len(ch.msgs), next, err)
	}
	if cap(f.batch) > keepInflated {
		t.Errorf("the fetcher keeps the oversized batch's %d bytes for its next fetch", cap(f.batch))
	}
	ap.free <- ch
	for range chunkDepth + 1 {
		if k := ap.take(false, 0, 0); cap(k.arena) > keepInflated {
			t.Fatalf("a chunk taken anew keeps an arena of %d bytes", cap(k.arena))
		}
	}
}

// slowConn is a link that brings chunk bytes (default 256 KiB) a second on a clock of its
// own: each Read of up to chunk bytes costs a second of it, and a read past the deadline last
// set (measured from when it was set) times out, as a socket's would.
type slowConn struct {
	net.Conn
	chunk         int
	mu            sync.Mutex // a stop sets the deadline from another goroutine
	budget, spent time.Duration
}

func (s *slowConn) Read(p []byte) (int, error) {
	s.mu.Lock()
	s.spent += time.Second
	late := s.spent > s.budget
	s.mu.Unlock()
	if late {
		return 0, os.ErrDeadlineExceeded
	}
	chunk := s.chunk
	if chunk == 0 {
		chunk = 256 << 10
	}
	return s.Conn.Read(p[:min(len(p), chunk)])
}

func (s *slowConn) SetDeadline(t time.Time) error {
	s.setBudget(t)
	return s.Conn.SetDeadline(t)
}

func (s *slowConn) SetReadDeadline(t time.Time) error {
	s.setBudget(t)
	return s.Conn.SetReadDeadline(t)
}

func (s *slowConn) setBudget(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.budget, s.spent = time.Until(t), 0
	if t.IsZero() {
		s.budget = math.MaxInt64
	}
}

// TestOwnFetchReadsABatchSlowerThanTheDeadline: a record batch that takes longer to arrive
// than the fetch's deadline (MaxWait + fetchMargin, 11 s; here 4 MiB at 256 KiB/s) is read as
// long as it keeps arriving. The deadline moved on only between batches, so one batch past
// MaxBytes over a slow link timed out at every attempt: a 16 MB record at 1 MB/s through a
// proxy stopped its partition for good ("i/o timeout" every 12 s, lag 2).
func TestOwnFetchReadsABatchSlowerThanTheDeadline(t *testing.T) {
	value := strings.Repeat("s", 4<<20)
	records := recordBatch(0, 0, value)
	client, server := net.Pipe()
	defer client.Close()
	var fetches atomic.Int32
	go serveFetches(server, records, func(size, _ int) int { return size }, &fetches)
	defer server.Close()
	conn := &slowConn{Conn: client}
	c := &Consumer{cfg: Config{MaxWait: time.Second, MaxBytes: 1000}, now: time.Now}
	f := &rawFetch{fc: &fetchConn{Conn: conn, r: bufio.NewReaderSize(conn, 256<<10)}, topic: "t", id: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ap := newApplier()
	var got int
	go func() {
		for ch := range ap.full {
			for _, m := range ch.msgs {
				got = len(m.Value)
				cancel()
			}
			ap.free <- ch
		}
		close(ap.done)
	}()
	_, err := c.readRaw(ctx, f, 0, ap)
	close(ap.full)
	<-ap.done
	if err != nil || got != len(value) {
		t.Fatalf("a 4 MiB record at 256 KiB/s: %d bytes read, %v; want it read", got, err)
	}
}

// TestRestoreSearchReadsABatchSlowerThanTheDeadline: the restore search's probe, which reads
// through kafka-go, reads a record batch that takes longer than the fetch's deadline to
// arrive (here a record of 1 MB at 64 KiB/s against MaxWait + fetchMargin) as long as it keeps arriving.
// Behind a 1 MB/s proxy, a partition holding a 16 MB record never became ready: "searching
// the restore start: reading offset 0: i/o timeout" every 12 s, /readyz 503 for good.
func TestRestoreSearchReadsABatchSlowerThanTheDeadline(t *testing.T) {
	t.Parallel()
	cl := kafkatest.Start(t, "events", 1)
	now := time.Now()
	cl.ProduceTo(t, 0, kafka.Message{Time: now, Value: []byte(strings.Repeat("v", 1_000_000))})
	cfg := testConfig(cl, "slow-probe")
	cfg.Dialer = &kafka.Dialer{Timeout: 10 * time.Second, DialFunc: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowConn{Conn: conn, chunk: 64 << 10}, nil
	}}
	c, err := New(cfg, newTestStore(t, 0), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	pr := &prober{c: c, id: 0}
	defer pr.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := pr.search(ctx, 0, logEnd(t, cl, cl.Topic)[0], now.Add(-time.Hour), now.Add(time.Minute))
	if err != nil || got != 0 {
		t.Fatalf("restore start %d, %v; want 0", got, err)
	}
}
