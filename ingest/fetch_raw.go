package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// This file is the consumer's own fetch: the Fetch request (version 4) written to a fetch
// connection and its response read off the connection's buffer, record batch by record batch,
// each record's key and value copied into its chunk's arena instead of a new slice of its own.
//
// Why not kafka-go's Batch.ReadMessage: it allocates each record's key and value afresh (a
// zeroed slice a record) and parses through a reader a field at a time. Read in place, a
// partition's records cost ~18% less of the consumer's CPU with slide's own small events
// (BenchmarkEndToEnd) and ~5% with OTLP records of 9.6 KB (BenchmarkEndToEndSpans), and a
// partition read at a steady pace allocates nothing a record: a chunk's arena is reused once
// the applier has given the chunk back (by-hand.md, "Spans end to end: round 6").
//
// What the reader keeps of kafka-go's: the connection (dialled, TLS and SASL by the Dialer), the
// seek and its range check, the compression codecs (compress.Codecs, with the inflate budget's
// wrappers), and its behaviour: records before the fetch offset in a batch are skipped, control
// batches (transaction markers) are skipped, a partial batch at the end of a response is left
// for the next fetch, the next offset is past a batch's last offset (compaction gaps), and
// RequestTimedOut is an empty response. Beyond kafka-go: a batch cut before any whole one (by a
// broker that does not send an oversized first batch whole, as KIP-74 has Kafka do) is asked for
// whole by the next fetch rather than the same fetch asked again (and answered alike) for ever.
// Record batches of magic 0 and 1 (the message format of Kafka before 0.11, which Kafka 4 no
// longer serves) are read through kafka-go instead, from the first such batch on. What a broker would never send is refused with the offset it is at: a
// length past the response, a record past its batch, offsets out of order (TestOwnFetchBatches,
// FuzzOwnFetch; TestOwnFetchMatchesKafkaGo holds it equal to kafka-go's reading for every codec).

// errLegacyFormat is a response holding a message set older than record batch v2.
var errLegacyFormat = errors.New("message format before record batch v2")

// fetchVersion is the Fetch request version the reader sends: the oldest Kafka 4 still serves,
// with the isolation level and the last stable offset, and no fetch session or tagged fields.
const fetchVersion = 4

// rawCorrelation starts the reader's correlation ids, apart from kafka-go's on the same connection.
const rawCorrelation = 1 << 30

// rawFetch is one fetch connection read by the consumer itself.
type rawFetch struct {
	fc       *fetchConn
	clientID string
	topic    string
	id       int32
	corr     int32
	level    kafka.IsolationLevel
	top      *atomic.Int64   // the partition's high watermark, set as each response is read (nil: not kept)
	seen     func(end int64) // told the end a response reads to once its partition header is read, before its records (nil: none)
	txns     abortedTxns     // the response's aborted transactions, read_committed (fetch_txn.go)
	last     int64           // the offset of the last record handed on from the response being read
	cut      int             // the size of a record batch the last response cut before any whole one: the next fetch asks for it all
	req      []byte          // the request being written, reused
	batch    []byte          // the batch being read, reused
	inflated []byte          // its records inflated, reused
}

// request writes a Fetch v4 request for the partition at offset.
func (f *rawFetch) request(offset int64, minBytes, maxBytes int32, maxWait time.Duration) error {
	f.corr++
	b := append(f.req[:0], 0, 0, 0, 0) // size, set below
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint16(b, fetchVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(rawCorrelation+f.corr))
	b = appendString(b, f.clientID)
	b = binary.BigEndian.AppendUint32(b, ^uint32(0)) // replica_id −1: a consumer
	b = binary.BigEndian.AppendUint32(b, uint32(maxWait.Milliseconds()))
	b = binary.BigEndian.AppendUint32(b, uint32(minBytes))
	// The response's max_bytes: the partition's bounds it (one partition is asked), and the
	// embedded broker (kfake) lists no aborted transactions of a response cut at this one.
	b = binary.BigEndian.AppendUint32(b, math.MaxInt32)
	b = append(b, byte(f.level))
	b = binary.BigEndian.AppendUint32(b, 1) // one topic
	b = appendString(b, f.topic)
	b = binary.BigEndian.AppendUint32(b, 1) // one partition
	b = binary.BigEndian.AppendUint32(b, uint32(f.id))
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(maxBytes))
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	f.req = b
	_, err := f.fc.Conn.Write(b)
	return err
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// respReader reads a response's fields off the connection's buffer, counting what is left of it.
type respReader struct {
	r    *bufio.Reader
	left int
	err  error
	tmp  [8]byte
	// more, when set, is called after each fillStep bytes of a batch arrive: it moves the
	// read deadline on, so a batch that takes longer than the deadline to arrive whole (one
	// past MaxBytes over a slow link) is read as long as it keeps arriving.
	more func()
}

// fillStep is how many bytes of a batch are read between calls of respReader.more.
const fillStep = 1 << 20

func (r *respReader) fixed(n int) []byte {
	if r.err == nil && n > r.left {
		r.err = fmt.Errorf("fetch response: a field past the response's end")
	}
	if r.err == nil {
		if _, err := io.ReadFull(r.r, r.tmp[:n]); err != nil {
			r.err = err
		}
	}
	if r.err != nil {
		clear(r.tmp[:]) // a failed read is a zero: no count of garbage is looped over
		return r.tmp[:n]
	}
	r.left -= n
	return r.tmp[:n]
}

func (r *respReader) int16() int16 { return int16(binary.BigEndian.Uint16(r.fixed(2))) }
func (r *respReader) int32() int32 { return int32(binary.BigEndian.Uint32(r.fixed(4))) }
func (r *respReader) int64() int64 { return int64(binary.BigEndian.Uint64(r.fixed(8))) }

// skip discards n bytes of the response.
func (r *respReader) skip(n int) {
	if r.err != nil {
		return
	}
	if n < 0 || n > r.left {
		r.err = fmt.Errorf("fetch response: a length past the response's end")
		return
	}
	if _, err := r.r.Discard(n); err != nil {
		r.err = err
	}
	r.left -= n
}

// fill reads the next n bytes of the response into b (grown as needed) and returns them.
func (r *respReader) fill(b *[]byte, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left {
		r.err = fmt.Errorf("fetch response: a length past the response's end")
		return nil
	}
	if cap(*b) >= n {
		buf := (*b)[:n]
		for read := 0; read < n; {
			m, err := io.ReadFull(r.r, buf[read:min(n, read+fillStep)])
			read += m
			if err != nil {
				r.err = err
				return nil
			}
			r.arrived(m)
		}
		return buf
	}
	// Grown with what arrives, not with what the response declares: a length of garbage
	// (up to 2 GiB) costs only the bytes that really come.
	buf := bytes.NewBuffer((*b)[:0])
	for buf.Len() < n {
		want := min(fillStep, n-buf.Len())
		m, err := buf.ReadFrom(io.LimitReader(r.r, int64(want)))
		*b = buf.Bytes()
		if err == nil && int(m) < want {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			r.err = err
			return nil
		}
		r.arrived(int(m))
	}
	return *b
}

// arrived counts n bytes of the response read and tells more.
func (r *respReader) arrived(n int) {
	r.left -= n
	if r.more != nil {
		r.more()
	}
}

// fetchPart is a response's partition header: error, high watermark, LSO, records' length.
type fetchPart struct {
	err      error
	hwm, lso int64
	records  int
}

// response reads a Fetch v4 response's header down to its partition's records, leaving the
// records (fetchPart.records bytes) and whatever follows them (rr.left) unread.
func (f *rawFetch) response(rr *respReader) (fetchPart, error) {
	var size [4]byte
	if _, err := io.ReadFull(f.fc.r, size[:]); err != nil {
		return fetchPart{}, err
	}
	rr.r, rr.left, rr.err = f.fc.r, int(int32(binary.BigEndian.Uint32(size[:]))), nil
	if rr.left < 0 {
		return fetchPart{}, fmt.Errorf("fetch response: size %d", rr.left)
	}
	if corr := rr.int32(); rr.err == nil && corr != rawCorrelation+f.corr {
		return fetchPart{}, fmt.Errorf("fetch response: correlation id %d, want %d", corr, rawCorrelation+f.corr)
	}
	rr.int32() // throttle_time_ms
	var part fetchPart
	found := false
	// A count is bounded by what is left of the response (a topic takes at least 6 bytes, a
	// partition 30), so a count read from garbage ends the loop with an error, at once.
	for range min(max(rr.int32(), 0), int32(rr.left/6)) { // topics
		if rr.err != nil { // the bound is the size declared, not what came: stop at the first failed read
			return fetchPart{}, rr.err
		}
		rr.skip(int(rr.int16()))
		for range min(max(rr.int32(), 0), int32(rr.left/30)) { // partitions
			if rr.err != nil {
				return fetchPart{}, rr.err
			}
			id, code := rr.int32(), rr.int16()
			hwm, lso := rr.int64(), rr.int64()
			f.txns.read(rr, rr.int32(), id == f.id && !found && f.level == kafka.ReadCommitted)
			n := int(rr.int32())
			if rr.err != nil {
				return fetchPart{}, rr.err
			}
			if id != f.id || found {
				rr.skip(max(n, 0))
				continue
			}
			found = true
			part = fetchPart{hwm: hwm, lso: lso, records: max(n, 0)}
			if code != 0 {
				part.err = kafka.Error(code)
			}
			return part, rr.err // the records are read next; one partition was asked for
		}
	}
	if rr.err == nil {
		rr.err = fmt.Errorf("fetch response without partition %d", f.id)
	}
	return fetchPart{}, rr.err
}

// batchHeader is the fixed part of a record batch v2 after its length.
const batchHeader = 49 // leader epoch 4, magic 1, crc 4, attributes 2, last offset delta 4, two timestamps 16, producer 14, count 4

// readBatches reads a response's records section of n bytes into chunks from offset on: each
// record of a whole batch at or past offset, in order. It returns the offset after the last
// whole batch (offset when none), having read the section to its end.
func (c *Consumer) readBatches(f *rawFetch, rr *respReader, n int, offset int64, ch **chunk, ap *applier, now, hwm int64) (int64, error) {
	next := offset
	f.last = offset - 1
	f.cut = 0
	for n > 0 {
		if n < 12 {
			rr.skip(n) // a partial batch: the next fetch asks for it again
			break
		}
		base := rr.int64()
		length := int(rr.int32())
		n -= 12
		if rr.err != nil {
			return next, rr.err
		}
		if length < 0 || length > n {
			rr.skip(n) // a partial batch, as the broker cut the response at MaxBytes
			if next == offset && length > n {
				// Cut before any whole batch: a broker that does not hand over an oversized
				// first batch whole (KIP-74) would answer the same fetch the same way forever.
				f.cut = 12 + length
			}
			break
		}
		body := rr.fill(&f.batch, length)
		n -= length
		if rr.err != nil {
			return next, rr.err
		}
		after, err := c.batchRecords(f, body, base, offset, ch, ap, now, hwm)
		if cap(f.batch) > keepInflated {
			f.batch = nil // one oversized batch (KIP-74 hands it over past MaxBytes) is not kept with its fetcher
		}
		if err != nil {
			return next, err
		}
		next = max(next, after)
		// A response is up to MaxBytes: over a slow link it streams in for longer than the
		// deadline, so the deadline follows the data.
		_ = f.fc.Conn.SetReadDeadline(time.Now().Add(c.cfg.MaxWait + fetchMargin))
	}
	return next, rr.err
}

// batchRecords puts the records of one record batch (body, after its base offset and length)
// at or past offset into chunks, and returns the offset after the batch.
func (c *Consumer) batchRecords(f *rawFetch, body []byte, base, offset int64, ch **chunk, ap *applier, now, hwm int64) (int64, error) {
	if len(body) < batchHeader {
		return 0, fmt.Errorf("record batch at offset %d: %d bytes, shorter than its header", base, len(body))
	}
	if magic := body[4]; magic != 2 {
		return 0, fmt.Errorf("record batch at offset %d: magic %d: %w", base, magic, errLegacyFormat)
	}
	attrs := binary.BigEndian.Uint16(body[9:])
	lastDelta := int64(int32(binary.BigEndian.Uint32(body[11:])))
	firstTS := int64(binary.BigEndian.Uint64(body[15:]))
	maxTS := int64(binary.BigEndian.Uint64(body[23:]))
	count := int(int32(binary.BigEndian.Uint32(body[45:])))
	after := base + lastDelta + 1
	if len(f.txns.list) > 0 && attrs&attrTransactional != 0 && f.txns.skip(f, body, base, after-1) {
		return after, nil // a write of an aborted transaction
	}
	if attrs&attrControl != 0 || after <= offset { // a control batch, or every record before offset
		return after, nil
	}
	recs := body[batchHeader:]
	if codec := attrs & 7; codec != 0 {
		var err error
		if recs, err = f.inflate(compress.Compression(codec), recs); err != nil {
			return 0, fmt.Errorf("record batch at offset %d: %w", base, err)
		}
	}
	logAppend := attrs&0x08 != 0
	for i := 0; i < count; i++ {
		var r rawRecord
		var err error
		if recs, err = r.read(recs); err != nil {
			return 0, fmt.Errorf("record batch at offset %d, record %d: %w", base, i, err)
		}
		off := base + r.offsetDelta
		if off < offset {
			continue
		}
		if off <= f.last || off >= after {
			// A broker writes a batch's offsets in order within its last offset delta; any
			// other order would hand a record on twice, or move the offset back.
			return 0, fmt.Errorf("record batch at offset %d, record %d: offset %d out of order", base, i, off)
		}
		f.last = off
		ts := firstTS + r.tsDelta
		if logAppend {
			ts = maxTS
		}
		k := *ch
		if need := len(r.key) + len(r.value) + len(r.headerBytes); len(k.arena)+need > cap(k.arena) {
			// A new block sized for the chunk's records still to come, each judged by the
			// batch's records after this one (doubling from small blocks allocated about
			// twice what a chunk holds).
			avg := need
			if left := count - i - 1; left > 0 {
				avg = len(recs) / left
			}
			k.grow(min(need+avg*(chunkLen-len(k.msgs)-1), max(need, keepInflated)))
		}
		m := kafka.Message{Topic: f.topic, Partition: int(f.id), Offset: off, Time: makeTime(ts)}
		m.Key = k.keep(r.key)
		m.Value = k.keep(r.value)
		if r.headers > 0 {
			m.Headers = make([]kafka.Header, 0, r.headers)
			hs := r.headerBytes
			for range r.headers {
				var hk, hv []byte
				if hk, hs, err = varBytes(hs); err == nil {
					hv, hs, err = varBytes(hs)
				}
				if err != nil {
					return 0, fmt.Errorf("record batch at offset %d, record %d: a header: %w", base, i, err)
				}
				m.Headers = append(m.Headers, kafka.Header{Key: string(hk), Value: k.keep(hv)})
			}
		}
		k.msgs = append(k.msgs, m)
		if len(k.msgs) == chunkLen {
			ap.full <- k
			*ch = ap.take(false, now, hwm)
		}
	}
	return after, nil
}

// makeTime is kafka-go's reading of a record's timestamp (unix ms; 0 or less is none).
func makeTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.Unix(ms/1000, (ms%1000)*int64(time.Millisecond)).UTC()
}

// inflate decompresses a batch's records through kafka-go's codecs (with the inflate budget's
// bounds) into f.inflated, which it keeps for the next batch only when small: a bomb refused
// at the budget, or one rare large batch, does not stay allocated with its fetcher.
func (f *rawFetch) inflate(codec compress.Compression, b []byte) ([]byte, error) {
	cd := codec.Codec()
	if cd == nil {
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	r := cd.NewReader(bytes.NewReader(b))
	defer r.Close()
	out, err := readBounded(r, f.inflated, inflateBudget.Load())
	if f.inflated = nil; err == nil && cap(out) <= keepInflated {
		f.inflated = out[:0]
	}
	return out, err
}

// keepInflated is the largest buffer (a batch inflated, a batch as read, a chunk's arena) a
// fetcher keeps for its next batch: a record past MaxBytes is not held as long as the connection.
const keepInflated = 8 << 20

// readBounded reads r to its end into dst[:0], growing it to at most budget+1 bytes (the
// budget's bounded reader fails past the budget, and the one byte more tells a stream ending
// exactly at it from a bomb). bytes.Buffer.ReadFrom doubled past the budget: a refused bomb
// held 64 MiB at a budget of 32, and the 32 before it, where this holds 32 and 16.
func readBounded(r io.Reader, dst []byte, budget int64) ([]byte, error) {
	dst = dst[:0]
	limit := int(min(budget, math.MaxInt32)) + 1
	for empty := 0; ; {
		if len(dst) == cap(dst) {
			if len(dst) >= limit {
				return dst, fmt.Errorf("%w (%d bytes)", ErrInflateBudget, budget)
			}
			grown := make([]byte, len(dst), min(max(2*cap(dst), 64<<10), limit)) // not append's growth: it passes limit
			copy(grown, dst)
			dst = grown
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst, err
		case n > 0:
			empty = 0
		default:
			if empty++; empty == 100 {
				return dst, io.ErrNoProgress
			}
		}
	}
}

// rawRecord is one record of a batch as read: its bytes alias the batch's.
type rawRecord struct {
	tsDelta, offsetDelta int64
	key, value           []byte
	headers              int
	headerBytes          []byte
}

var errRecordFormat = errors.New("malformed record")

// read reads the record at the start of b and returns what follows it.
func (r *rawRecord) read(b []byte) ([]byte, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || length > int64(len(b)-n) {
		return nil, errRecordFormat
	}
	rec, rest := b[n:n+int(length)], b[n+int(length):]
	if len(rec) < 1 {
		return nil, errRecordFormat
	}
	rec = rec[1:] // attributes, unused
	var err error
	if r.tsDelta, rec, err = varint(rec); err != nil {
		return nil, err
	}
	if r.offsetDelta, rec, err = varint(rec); err != nil {
		return nil, err
	}
	if r.key, rec, err = varBytes(rec); err != nil {
		return nil, err
	}
	if r.value, rec, err = varBytes(rec); err != nil {
		return nil, err
	}
	h, rec, err := varint(rec)
	if err != nil || h < 0 || h > int64(len(rec)) {
		return nil, errRecordFormat
	}
	r.headers, r.headerBytes = int(h), rec
	return rest, nil
}

func varint(b []byte) (int64, []byte, error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, errRecordFormat
	}
	return v, b[n:], nil
}

// varBytes reads a length (−1: null) and that many bytes.
func varBytes(b []byte) ([]byte, []byte, error) {
	l, b, err := varint(b)
	switch {
	case err != nil:
		return nil, nil, err
	case l < 0:
		return nil, b, nil
	case l > int64(len(b)):
		return nil, nil, errRecordFormat
	}
	return b[:l:l], b[l:], nil
}

// readRaw is read through the consumer's own fetch: it reads partition f.id from offset into
// chunks for the applier until ctx ends or a fetch fails, and returns the failed fetch's
// error (nil when ctx ended) and the offset after the records read.
func (c *Consumer) readRaw(ctx context.Context, f *rawFetch, offset int64, ap *applier) (int64, error) {
	rr := respReader{more: func() {
		if ctx.Err() == nil { // a stop's deadline stays
			_ = f.fc.Conn.SetReadDeadline(time.Now().Add(c.cfg.MaxWait + fetchMargin))
			if ctx.Err() != nil { // the stop came between: its deadline again
				_ = f.fc.Conn.SetDeadline(time.Now())
			}
		}
	}}
	// A fetch on an idle partition waits up to MaxWait for records; a stop or a rebalance
	// does not wait for it: the deadline is moved to now, and the fetch fails. Nothing is
	// lost: a batch is handed to the applier only once it has been read whole, so the offset
	// returned still follows the last record handed over.
	stop := context.AfterFunc(ctx, func() { _ = f.fc.Conn.SetDeadline(time.Now()) })
	defer stop()
	for ctx.Err() == nil {
		if err := f.fc.Conn.SetDeadline(time.Now().Add(c.cfg.MaxWait + fetchMargin)); err != nil {
			return offset, fmt.Errorf("setting the fetch deadline: %w", err)
		}
		if ctx.Err() != nil {
			break // ended while the deadline was set: the interruption may have been undone
		}
		// A batch the last response cut before any whole one is asked for whole: Kafka sends
		// an oversized first batch past MaxBytes (KIP-74), a broker that does not would
		// otherwise be asked the same fetch in a loop, for ever.
		asked := f.cut
		maxBytes := int32(min(max(c.cfg.MaxBytes, asked), math.MaxInt32))
		if err := f.request(offset, 1, maxBytes, c.cfg.MaxWait); err != nil {
			if ctx.Err() != nil {
				return offset, nil // the stop moved the deadline while the fetch was written
			}
			return offset, fmt.Errorf("sending a fetch: %w", err)
		}
		part, err := f.response(&rr)
		now := c.now().UnixMilli()
		hwm := f.end(part, err)
		if err != nil || part.err != nil {
			hwm = -1
		}
		ch := ap.take(true, now, hwm)
		next := offset
		if err == nil {
			next, err = c.readBatches(f, &rr, part.records, offset, &ch, ap, now, hwm)
		}
		if err == nil {
			rr.skip(rr.left) // the rest of the response: nothing asked for
			err = rr.err
		}
		if err == nil && f.cut > 0 && asked > 0 {
			err = fmt.Errorf("record batch at offset %d: %d bytes, cut short by the broker although the fetch asked for %d bytes", offset, f.cut, maxBytes)
		}
		if err == nil && part.err != nil && !errors.Is(part.err, kafka.RequestTimedOut) {
			// RequestTimedOut is the broker's answer to a fetch that waited MaxWait without
			// new records (kafka-go's Reader treats it the same way): an empty batch.
			err = part.err
		}
		ch.next, ch.end = next, true
		ap.full <- ch
		offset = next
		if err != nil && ctx.Err() != nil {
			return offset, nil // the fetch interrupted by the stop, not a failure
		}
		if err != nil {
			return offset, err
		}
	}
	return offset, nil
}
