package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// ownFetch reads partition 0 of c from offset with the consumer's own fetch until it has
// read want records, and returns them deep-copied (a chunk's arena is reused).
func ownFetch(t *testing.T, c *kafkatest.Cluster, offset int64, want int, maxBytes int) []kafka.Message {
	t.Helper()
	cfg := testConfig(c, "own")
	cfg.MaxWait = 100 * time.Millisecond
	cfg.MaxBytes = maxBytes
	cons, err := New(cfg, newTestStore(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, fc, err := cons.dialLeader(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if fc == nil {
		t.Fatal("the dial left no connection for the consumer's own fetch")
	}
	var got []kafka.Message
	ap := newApplier()
	go func() {
		for ch := range ap.full {
			for _, m := range ch.msgs {
				m.Key, m.Value = bytes.Clone(m.Key), bytes.Clone(m.Value)
				m.Headers = slices.Clone(m.Headers)
				for i := range m.Headers {
					m.Headers[i].Value = bytes.Clone(m.Headers[i].Value)
				}
				got = append(got, m)
			}
			if len(got) >= want {
				cancel()
			}
			ap.free <- ch
		}
		close(ap.done)
	}()
	rf := &rawFetch{fc: fc, clientID: "test", topic: c.Topic, id: 0}
	_, err = cons.readRaw(ctx, rf, offset, ap)
	close(ap.full)
	<-ap.done
	if err != nil {
		t.Fatalf("own fetch from %d: %v", offset, err)
	}
	return got
}

// kafkaGoFetch reads partition 0 of c from offset through kafka-go's Conn, want records.
func kafkaGoFetch(t *testing.T, c *kafkatest.Cluster, offset int64, want int) []kafka.Message {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", c.Addr, c.Topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got []kafka.Message
	for len(got) < want {
		if _, err := conn.Seek(offset, kafka.SeekAbsolute); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := conn.ReadBatch(1, 10<<20)
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			got = append(got, m)
			offset = m.Offset + 1
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestOwnFetchMatchesKafkaGo: the consumer's own fetch reads what kafka-go's Conn reads —
// offsets, times, keys (and null ones), values (and tombstones), headers — from batches of
// every codec, from the start and from inside a compressed batch, in one response or a batch
// a response.
func TestOwnFetchMatchesKafkaGo(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 1)
	t0 := time.Now().Truncate(time.Millisecond)
	n := 0
	for _, codec := range []kafka.Compression{0, kafka.Gzip, kafka.Snappy, kafka.Lz4, kafka.Zstd} {
		w := &kafka.Writer{Addr: kafka.TCP(c.Addr), Topic: c.Topic, Compression: codec, BatchSize: 100,
			BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
		var msgs []kafka.Message
		for i := range 25 {
			m := kafka.Message{Time: t0.Add(time.Duration(n) * time.Millisecond),
				Value: bytes.Repeat(fmt.Appendf(nil, `{"n":%d}`, n), 1+i%7)}
			if i%3 != 0 {
				m.Key = fmt.Appendf(nil, "k%d", n%5)
			}
			if i%4 == 0 {
				m.Headers = []kafka.Header{{Key: "h", Value: []byte("v")}, {Key: "empty"}}
			}
			if i%11 == 10 {
				m.Value = nil // a tombstone
			}
			msgs = append(msgs, m)
			n++
		}
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	for _, tc := range []struct {
		from     int64
		maxBytes int
	}{{0, DefaultMaxBytes}, {37, DefaultMaxBytes}, {0, 1}, {62, 100}} {
		want := kafkaGoFetch(t, c, tc.from, n-int(tc.from))
		got := ownFetch(t, c, tc.from, n-int(tc.from), tc.maxBytes)
		if len(got) != len(want) {
			t.Fatalf("from %d, MaxBytes %d: %d records, kafka-go %d", tc.from, tc.maxBytes, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Offset != w.Offset || !g.Time.Equal(w.Time) || !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) ||
				!bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) || len(g.Headers) != len(w.Headers) {
				t.Fatalf("from %d, record %d:\n own      %+v\n kafka-go %+v", tc.from, i, g, w)
			}
			for j := range w.Headers {
				if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
					t.Fatalf("from %d, record %d, header %d: own %+v, kafka-go %+v", tc.from, i, j, g.Headers[j], w.Headers[j])
				}
			}
		}
	}
}

// nopDeadlines is a connection whose only method the reader calls on it, between batches, is
// SetReadDeadline.
type nopDeadlines struct{ net.Conn }

func (nopDeadlines) SetReadDeadline(time.Time) error { return nil }

// fetchResponse is a Fetch v4 response of correlation id rawCorrelation+1 for partition 0 of
// topic "t", holding records (raw record batches).
func fetchResponse(records []byte, aborted ...abortedTxn) []byte {
	r := kmsg.NewFetchResponse()
	r.Version = fetchVersion
	tp := kmsg.NewFetchResponseTopic()
	tp.Topic = "t"
	p := kmsg.NewFetchResponseTopicPartition()
	p.HighWatermark, p.LastStableOffset, p.RecordBatches = 100, 100, records
	for _, at := range aborted {
		p.AbortedTransactions = append(p.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: at.producer, FirstOffset: at.first})
	}
	tp.Partitions = append(tp.Partitions, p)
	r.Topics = append(r.Topics, tp)
	body := r.AppendTo(nil)
	out := make([]byte, 8, 8+len(body))
	out[0], out[1], out[2], out[3] = byte((len(body)+4)>>24), byte((len(body)+4)>>16), byte((len(body)+4)>>8), byte(len(body)+4)
	c := uint32(rawCorrelation + 1)
	out[4], out[5], out[6], out[7] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return append(out, body...)
}

// recordBatch is a record batch v2 of values from base, uncompressed.
func recordBatch(base int64, attrs int16, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.NewRecord()
		r.TimestampDelta64, r.OffsetDelta = int64(i), int32(i)
		r.Value = []byte(v)
		r.Length = int32(len(r.AppendTo(nil)) - 1) // what follows the length (0, one byte)
		recs = r.AppendTo(recs)
	}
	b := kmsg.NewRecordBatch()
	b.FirstOffset, b.Magic, b.Attributes = base, 2, attrs
	b.LastOffsetDelta = int32(len(values) - 1)
	b.FirstTimestamp, b.MaxTimestamp = 1_700_000_000_000, 1_700_000_000_000+int64(len(values))
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.NumRecords = int32(len(values))
	b.Records = recs
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                                          // the batch's length, after it
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // from the attributes on
	return raw
}

// readResponse reads one response from data with the consumer's own fetch at offset 0 and
// returns its records and the offset after them.
func readResponse(data []byte, from int64) ([]kafka.Message, int64, error) {
	c := &Consumer{cfg: Config{MaxWait: time.Second}, now: time.Now}
	f := &rawFetch{fc: &fetchConn{Conn: nopDeadlines{}, r: bufio.NewReader(bytes.NewReader(data))}, topic: "t", id: 0, corr: 1, level: kafka.ReadCommitted}
	var rr respReader
	part, err := f.response(&rr)
	if err != nil {
		return nil, from, err
	}
	ap := newApplier()
	var got []kafka.Message
	done := make(chan struct{})
	go func() {
		for ch := range ap.full {
			got = append(got, ch.msgs...) // read before the chunk is reused: the reader waits on free
			ap.free <- ch
		}
		close(done)
	}()
	ch := ap.take(true, 0, part.hwm)
	next, err := c.readBatches(f, &rr, part.records, from, &ch, ap, 0, part.hwm)
	ap.full <- ch
	close(ap.full)
	<-done
	return got, next, err
}

// TestOwnFetchBatches: records before the fetch offset are skipped, a control batch is
// skipped and moves the offset past it, a batch cut at the response's end is left for the
// next fetch, and a legacy message set is handed to kafka-go.
func TestOwnFetchBatches(t *testing.T) {
	b1 := recordBatch(10, 0, "a", "b", "c")
	ctl := recordBatch(13, 0x20, "marker")
	b2 := recordBatch(14, 0, "d", "e")
	records := slices.Concat(b1, ctl, b2)
	got, next, err := readResponse(fetchResponse(records), 11)
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, m := range got {
		vals = append(vals, fmt.Sprintf("%d:%s", m.Offset, m.Value))
	}
	if want := []string{"11:b", "12:c", "14:d", "15:e"}; !slices.Equal(vals, want) || next != 16 {
		t.Fatalf("records %v, next %d; want %v, next 16", vals, next, want)
	}
	// The last batch cut short, as a broker cuts a response at MaxBytes.
	got, next, err = readResponse(fetchResponse(slices.Concat(b1, b2[:len(b2)-3])), 10)
	if err != nil || len(got) != 3 || next != 13 {
		t.Fatalf("a cut batch: %d records, next %d, %v; want 3, 13, nil", len(got), next, err)
	}
	legacy := slices.Clone(b1)
	legacy[16] = 1 // magic, after base offset 8, length 4, leader epoch 4
	if _, _, err := readResponse(fetchResponse(legacy), 10); !errors.Is(err, errLegacyFormat) {
		t.Fatalf("a magic 1 batch: %v, want errLegacyFormat", err)
	}
}

// FuzzOwnFetch: any response the reader is given ends in records or an error, never a
// panic, and what it hands on is in offset order at or past the fetch offset.
func FuzzOwnFetch(f *testing.F) {
	// A bomb in the input is bounded, as New bounds it, at 1 MiB here: at the default 32 MiB
	// an input inflating to the budget cost ~50 ms an execution. Set back before the
	// package's parallel tests run.
	setInflateBudget(1 << 20)
	f.Cleanup(func() { setInflateBudget(DefaultMaxInflatedBytes) })
	f.Add(fetchResponse(slices.Concat(recordBatch(10, 0, "a", "b", "c"), recordBatch(13, 0x20, "m"), recordBatch(14, 0, "d"))), int64(11))
	f.Add(fetchResponse(recordBatch(0, 0, "x")), int64(0))
	f.Add(fetchResponse(txnLog(), abortedTxn{7, 10}, abortedTxn{8, 12}, abortedTxn{7, 15}), int64(10))
	f.Add(fetchResponse(nil), int64(0))
	// Counts of garbage, past what the response holds: once a loop of two billion reads.
	f.Add([]byte("\x00\x00\x01\x10@\x00\x00\x01\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00d\x00\x00\x00\x00\x00\x00\x00d\xff\x00"), int64(11))
	f.Fuzz(func(t *testing.T, data []byte, from int64) {
		got, next, err := readResponse(data, from)
		prev := from - 1
		for _, m := range got {
			if m.Offset <= prev {
				t.Fatalf("offset %d after %d (from %d)", m.Offset, prev, from)
			}
			prev = m.Offset
		}
		if err == nil && len(got) > 0 && next <= prev {
			t.Fatalf("next %d at or before the last record's offset %d", next, prev)
		}
	})
}

// TestInflateHoldsTheBudgetOnce: a batch that inflates past the budget is refused having
// held at most the budget (bytes.Buffer's doubling held twice it), and its fetcher keeps
// no buffer of it; a batch ending exactly at the budget passes, and a small one's buffer
// is kept for the next batch. Found as CI's TestConsumerRefusesCompressionBombs passing
// its RSS bound under -race (1,001 MiB against 768) after the own fetch came in.
func TestInflateHoldsTheBudgetOnce(t *testing.T) {
	const budget = 1 << 20
	setInflateBudget(budget)
	t.Cleanup(func() { setInflateBudget(DefaultMaxInflatedBytes) })
	gz := func(n int) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		if _, err := w.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	var f rawFetch
	out, err := f.inflate(compress.Gzip, gz(8*budget))
	if !errors.Is(err, ErrInflateBudget) {
		t.Fatalf("8 MiB into a budget of 1: %v, want ErrInflateBudget", err)
	}
	if c := cap(out); c > budget+64<<10 {
		t.Errorf("a refused bomb held a buffer of %d bytes, budget %d", c, budget)
	}
	if f.inflated != nil {
		t.Errorf("the fetcher keeps the refused bomb's buffer (%d bytes)", cap(f.inflated))
	}
	if out, err = f.inflate(compress.Gzip, gz(budget)); err != nil || len(out) != budget {
		t.Fatalf("exactly the budget: %d bytes, %v", len(out), err)
	}
	if out, err = f.inflate(compress.Gzip, gz(1000)); err != nil || len(out) != 1000 || cap(f.inflated) == 0 {
		t.Fatalf("a small batch: %d bytes, %v, kept %d", len(out), err, cap(f.inflated))
	}
	if out, err = Inflate(kafkatest.Gzip, gz(2*budget), budget); !errors.Is(err, ErrInflateBudget) || cap(out) > budget+64<<10 {
		t.Errorf("Inflate of 2 MiB into 1: %v, held %d bytes", err, cap(out))
	}
}
