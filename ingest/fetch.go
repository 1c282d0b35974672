package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

// This file is the fetch loop of one partition and the per-record checks: reading
// batches from the leader, observing each event, refusing and dead-lettering the rest.

// consume reads partition p until gctx ends, reconnecting after errors.
func (c *Consumer) consume(gctx context.Context, p *partition) {
	if c.snap != nil && !p.snap.restored && !p.restored.Load() {
		c.snap.restore(gctx, p)
	}
	for gctx.Err() == nil {
		err := c.fetch(gctx, p)
		if gctx.Err() != nil {
			return
		}
		if errors.As(err, new(errSkipped)) {
			continue // counted and dead-lettered already; no backoff
		}
		c.warn("ingest: fetching", "partition", p.id, "offset", p.next.Load(), "err", err)
		select {
		case <-gctx.Done():
		case <-time.After(c.cfg.JoinGroupBackoff):
		}
	}
}

// progressEvery is how many records of a batch pass between progress updates.
const progressEvery = 1024

// fetchMargin is how much longer than MaxWait a fetch may take before the connection times out.
const fetchMargin = 10 * time.Second

// fetch reads partition p from its leader, one fetch response (a batch) at a time, until
// ctx ends or an error. It dials through kafka-go's Conn and reads with its own fetch
// (fetch_raw.go) rather than a Reader: a Reader hands records over a channel one at a time
// and sets a socket deadline per record, and kafka-go's Batch allocates every record anew,
// which together cost more CPU than decoding and observing the event. A fetch on an idle partition
// waits up to MaxWait; a stop or a rebalance interrupts it (readRaw), and the batches read
// whole are finished, so a stop takes the applier's work in hand, not MaxWait.
//
// Reading and applying overlap: this goroutine reads records off the connection (kafka-go
// parses and copies each) while an applier goroutine (apply) decodes and observes the
// records read before, in chunks of up to chunkLen, in order. A partition then costs the
// slower of the two instead of their sum, and one partition alone (a restore, a hot
// partition) uses two cores. Everything a record changes (the windows, p.next, the
// counters, a snapshot) is changed by the applier, in log order, so offsets and progress
// only ever name applied records; fetch waits for the applier before it returns, so an
// error, a reconnect or a stop finds every record read applied.
func (c *Consumer) fetch(ctx context.Context, p *partition) error {
	conn, fc, err := c.dialLeader(ctx, p.id)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The offset is not checked against the log here (two ListOffsets round trips, which
	// at a busy broker wait behind other partitions' fetches: 5-20 ms before a partition's
	// first fetch): a fetch from an offset retention passed while the connection was down
	// answers OffsetOutOfRange, handled below as a check's would be.
	if _, err := conn.Seek(p.next.Load(), kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
		return fmt.Errorf("seeking to offset %d: %w", p.next.Load(), err)
	}
	ap := newApplier()
	go c.apply(ctx, p, ap)
	var next int64
	if p.legacy || fc == nil {
		next, err = c.read(ctx, conn, ap, &p.top)
	} else {
		// The lag is known once a response's header is: a batch arriving over a slow link
		// (megabytes at a few a second) showed the lag before it until its first records did.
		rf := &rawFetch{fc: fc, clientID: c.fetchDialer.ClientID, topic: c.cfg.Topic, id: p.id, level: c.isolation(), top: &p.top,
			seen: func(end int64) { p.lag.Set(float64(max(end-p.next.Load(), 0))) }}
		next, err = c.readRaw(ctx, rf, p.next.Load(), ap)
	}
	close(ap.full)
	<-ap.done
	ap.release()
	if errors.Is(err, errLegacyFormat) {
		// Records of the message format before Kafka 0.11: read through kafka-go from
		// here on, from the first record not yet applied.
		p.legacy = true
		c.log.Info("ingest: partition holds the message format before record batch v2, read through kafka-go's reader", "partition", p.id, "offset", next)
		return fmt.Errorf("offset %d: %w", next, errSkipped{err})
	}
	if err != nil {
		if errors.Is(err, ErrInflateBudget) {
			// A compression bomb at next: refused as a pointer to its offset, never
			// inflated whole. kafka-go closed the connection on the error; the caller
			// reconnects at once, one offset further.
			c.refuse(ctx, p, &kafka.Message{Topic: c.cfg.Topic, Partition: int(p.id), Offset: next}, nil, event.ReasonTooLarge,
				next < p.committed.Load(), 0, nil)
			p.next.Store(next + 1)
			return fmt.Errorf("offset %d: %w", next, errSkipped{err})
		}
		if errors.Is(err, kafka.OffsetOutOfRange) {
			c.skipOutOfRange(ctx, conn, p, next)
		}
		return fmt.Errorf("fetching at offset %d: %w", next, err)
	}
	return nil
}

// chunkLen is the most records one chunk carries from the reader to the applier: enough to
// make the hand-over a small share of a record's cost, few enough that a partition holds
// little (chunkDepth+1 chunks of kafka.Message) and the applier starts early in a batch.
const chunkLen = 128

// chunkDepth is how many chunks the reader may have read ahead of the applier.
const chunkDepth = 4

// chunk is a run of records of one batch, read and not yet applied.
type chunk struct {
	msgs  []kafka.Message
	arena []byte // the keys and values of msgs the consumer's own fetch read (fetch_raw.go)
	first bool   // the batch's first chunk
	now   int64  // the clock when the batch was fetched, unix ms: what its events are observed at
	hwm   int64  // the batch's high watermark; < 0 unknown
	end   bool   // the batch's last chunk: next is set
	next  int64  // the connection's offset after the batch: past its last record and compacted gaps
}

// keep copies b into the chunk's arena and returns the copy (nil for nil).
func (k *chunk) keep(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(k.arena)+len(b) > cap(k.arena) {
		k.grow(len(b))
	}
	s := len(k.arena)
	k.arena = append(k.arena, b...)
	return k.arena[s:len(k.arena):len(k.arena)]
}

// grow gives the chunk a new arena block of at least n bytes: the records already kept
// point into the old one, which lives as long as they do.
func (k *chunk) grow(n int) {
	k.arena = make([]byte, 0, max(2*cap(k.arena), n, 64<<10))
}

// applier is the hand-over between a partition's reader and its applier goroutine: full
// carries chunks in log order, free brings them back for reuse (so the reader never runs
// more than chunkDepth chunks ahead), done closes when the applier has applied them all.
type applier struct {
	full chan *chunk
	free chan *chunk
	done chan struct{}
}

func newApplier() *applier {
	a := &applier{full: make(chan *chunk, chunkDepth), free: make(chan *chunk, chunkDepth+1), done: make(chan struct{})}
	for range chunkDepth + 1 {
		ch, _ := chunks.Get().(*chunk)
		if ch == nil {
			ch = &chunk{}
		}
		a.free <- ch
	}
	return a
}

// chunks keeps the chunks of appliers that ended, with their record slices and arenas, for
// the next: a reconnect, a rebalance's new fetches or another Consumer in the process reuse
// them instead of growing their own (a partition's chunkDepth+1 arenas of up to a chunk's
// records each, ~5 MB for records of 8 KB).
var chunks sync.Pool

// release gives the applier's free chunks to the pool; the applier is not used after.
func (a *applier) release() {
	for {
		select {
		case ch := <-a.free:
			chunks.Put(ch)
		default:
			return
		}
	}
}

// take returns a free chunk, empty, for a batch fetched at now with high watermark hwm;
// first says it is the batch's first.
func (a *applier) take(first bool, now, hwm int64) *chunk {
	ch := <-a.free
	arena := ch.arena[:0]
	if cap(arena) > keepInflated {
		arena = nil // an oversized record's copy is not kept for the records after it
	}
	*ch = chunk{msgs: ch.msgs[:0], arena: arena, first: first, now: now, hwm: hwm}
	return ch
}

// read reads batches from conn into chunks for the applier until ctx ends or a batch
// fails; it returns the failed batch's error (nil when ctx ended) and the connection's
// offset after it.
func (c *Consumer) read(ctx context.Context, conn *kafka.Conn, ap *applier, top *atomic.Int64) (int64, error) {
	for ctx.Err() == nil {
		if err := conn.SetReadDeadline(time.Now().Add(c.cfg.MaxWait + fetchMargin)); err != nil {
			return 0, fmt.Errorf("setting the fetch deadline: %w", err)
		}
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: c.cfg.MaxBytes, MaxWait: c.cfg.MaxWait, IsolationLevel: c.isolation()})
		now, hwm := c.now().UnixMilli(), batch.HighWaterMark()
		top.Store(hwm) // no transactions in this message format: the high watermark is the end read to
		ch := ap.take(true, now, hwm)
		for n := 1; ; n++ {
			m, err := batch.ReadMessage()
			if err != nil {
				if errors.Is(err, ErrInflateBudget) {
					unblock(conn)
				}
				break
			}
			ch.msgs = append(ch.msgs, m)
			if n%progressEvery == 0 {
				// A batch is up to MaxBytes: over a slow link it streams in for longer than
				// the deadline, so the deadline follows the data.
				_ = conn.SetReadDeadline(time.Now().Add(c.cfg.MaxWait + fetchMargin))
			}
			if len(ch.msgs) == chunkLen {
				ap.full <- ch
				ch = ap.take(false, now, hwm)
			}
		}
		err := batch.Close()
		if errors.Is(err, kafka.RequestTimedOut) {
			// The broker's answer to a fetch that waited MaxWait without new records (kafka-go's
			// Reader treats it the same way): an empty batch, not a failure.
			err = nil
		}
		ch.next, _ = conn.Offset()
		ch.end = true
		ap.full <- ch
		if err != nil {
			return ch.next, err
		}
	}
	return 0, nil
}

// apply observes the records of the chunks ap carries, in order, and settles each batch's
// offsets, lag, counters, restore and snapshot after its last record, until ap.full closes.
func (c *Consumer) apply(ctx context.Context, p *partition, ap *applier) {
	defer close(ap.done)
	var accepted, size, n int
	var lastTS int64
	for ch := range ap.full {
		hwm := ch.hwm
		if ch.first {
			accepted, size, n = 0, 0, 0
			if hwm >= 0 { // the batch in hand is lag until it is processed
				p.lag.Set(float64(max(hwm-p.next.Load(), 0)))
			}
		}
		for i := range ch.msgs {
			m := &ch.msgs[i]
			accepted += c.record(ctx, p, m, ch.now)
			size += len(m.Value)
			lastTS = m.Time.UnixMilli()
			if n++; n%progressEvery == 0 {
				// /readyz's progress and the lag move within a batch instead of jumping at its end.
				p.next.Store(m.Offset + 1)
				if hwm >= 0 {
					p.lag.Set(float64(max(hwm-m.Offset-1, 0)))
					p.lagSec.Set(max(float64(c.now().UnixMilli()-lastTS)/1000, 0))
				}
			}
		}
		clear(ch.msgs) // the chunk keeps no record's bytes alive
		if ch.end {
			c.settle(p, ch, accepted, size, n, lastTS)
		}
		ap.free <- ch
	}
}

// settle accounts for a batch of n records (accepted events, size value bytes, the last
// stamped lastTS) once they are all applied: the offset, lag, counters, restore and snapshot.
func (c *Consumer) settle(p *partition, ch *chunk, accepted, size, n int, lastTS int64) {
	if n > 0 {
		p.lastTS = lastTS
	}
	next, hwm := ch.next, ch.hwm
	p.events.Add(float64(accepted))
	p.bytes.Add(float64(size))
	p.next.Store(next)
	if hwm >= 0 {
		p.hwm.Store(hwm)
		p.lag.Set(float64(max(hwm-next, 0)))
		if next >= hwm || n == 0 {
			p.lagSec.Set(0)
		} else {
			p.lagSec.Set(max(float64(c.now().UnixMilli()-lastTS)/1000, 0))
		}
	}
	if next >= p.target && !p.restored.Load() {
		c.markRestored(p)
	}
	if c.snap != nil {
		c.snap.maybeTake(p)
	}
}

// skipOutOfRange moves p from next, an offset the log no longer holds, to the first record
// of the restore span that the log holds (never to the log end, which would skip every
// record written since): when retention deleted records before they were read (they are
// gone), or when the log ends below next (a broker restarted empty, an unclean leader
// election). In the second case the log's offsets no longer name the records counted, so
// the reset goes to the first record stamped after the last one this partition processed:
// a broker that lost its log has every record written since replayed and counted, and a
// truncated log that kept records already counted does not count them twice. Those
// records are new, so p.committed (which marks replays) follows the reset down. Each reset
// is counted in slide_ingest_offset_resets_total{partition,reason} and logged once.
func (c *Consumer) skipOutOfRange(ctx context.Context, conn *kafka.Conn, p *partition, next int64) {
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return // the next attempt asks again
	}
	reason := resetRetention
	if next > last {
		reason = resetLogTruncated
	}
	now := c.now()
	start := now.Add(-c.cfg.Restore)
	if reason == resetLogTruncated && p.lastTS > 0 {
		start = maxTime(start, time.UnixMilli(p.lastTS+1))
	}
	to, err := c.restoreStart(ctx, p.id, first, last, start, now.Add(c.skew()))
	if err != nil {
		to = first // whatever is left: late records are refused as such
	}
	if to < next {
		p.committed.Store(min(p.committed.Load(), to))
	}
	c.m.offsetResets.WithLabelValues(p.label, reason).Inc()
	c.log.Warn("ingest: offset out of range, resetting to the restore span", "partition", p.id, "offset", next, "reason", reason,
		"log_start", first, "log_end", last, "to", to)
	p.next.Store(to)
}

// Reasons of slide_ingest_offset_resets_total.
const (
	resetRetention    = "retention"     // the next offset was deleted before it was read
	resetLogTruncated = "log_truncated" // the log ends before the next offset
)

var offsetResetReasons = []string{resetLogTruncated, resetRetention}

// dialLeader connects to the leader of partition id through the first broker that answers.
// The connection it returns beside kafka-go's Conn is the one the Conn reads and writes,
// for the consumer's own fetch (nil if the dial did not leave it).
func (c *Consumer) dialLeader(ctx context.Context, id int32) (*kafka.Conn, *fetchConn, error) {
	d := c.fetchDialer
	var errs []error
	for _, b := range c.cfg.Brokers {
		slot := &fetchConnSlot{}
		conn, err := d.DialLeader(context.WithValue(ctx, fetchConnKey{}, slot), "tcp", b, c.cfg.Topic, int(id))
		if err == nil {
			return conn, slot.fc, nil
		}
		errs = append(errs, err)
	}
	return nil, nil, fmt.Errorf("dialing the leader of partition %d: %w", id, errors.Join(errs...))
}

// record observes every event of record m at now (unix ms) through the intake and returns
// how many the store accepted: the per-record hot path. Offsets, lag and counters are
// settled per batch.
func (c *Consumer) record(ctx context.Context, p *partition, m *kafka.Message, now int64) int {
	replay := m.Offset < p.committed.Load()
	// Future and late are judged against the record's timestamp, which is part of the log, so
	// every replay gives the same answer; the store judges the event's time once, in its ring
	// (window.Source says how a skewed record clock is handled).
	rec := event.Record{TS: m.Time.UnixMilli(), Feed: window.FeedOf(p.id)}
	accepted, events := c.intake.TakeRecord(p.dec, m.Value, now, rec, func(line []byte, r event.Reason) {
		if r == event.ReasonExpired {
			// In its window at its record's time, out of it by now (lag, or a replay
			// reaching further back than this metric keeps): refused as expired, counted
			// with the other refusals and dead-lettered.
			c.m.expired.Inc()
		}
		c.refuse(ctx, p, m, line, r, replay, now, &rec)
	})
	if events == 0 && !replay {
		c.m.tombstones.Inc() // no event in it: a tombstone (null value) or blank lines
	}
	return accepted
}

// refuse counts, logs and dead-letters one refused line of record rec (nil for a too_large
// pointer), refused at now. Its detail (event.Intake.Explain) is built only for the log line
// and the dead letter, which say it.
func (c *Consumer) refuse(ctx context.Context, p *partition, m *kafka.Message, line []byte, r event.Reason, replay bool, now int64, rec *event.Record) {
	if replay {
		c.m.skippedBy[r].Inc()
		return
	}
	c.m.rejectedBy[r].Inc()
	logIt := c.rejLim.Allow()
	detail := ""
	if logIt || c.dlq != nil {
		detail = c.explain(p, line, r, now, rec)
	}
	if logIt {
		const maxShown = 256
		shown := line
		if len(shown) > maxShown {
			shown = shown[:maxShown]
		}
		c.log.Warn("ingest: event refused", "reason", r.String(), "detail", detail, "topic", m.Topic, "partition", m.Partition,
			"offset", m.Offset, "line", string(shown), "not_logged_before", c.hidden.Swap(0))
	} else {
		c.hidden.Add(1)
	}
	if c.dlq != nil {
		c.dlq.send(ctx, letter(m, event.Framed(m.Value, line), r, detail)) // as written, a frame included
	}
}

// explain says what is wrong with a refused line: the intake's detail, or for a too_large
// record the budget it broke.
func (c *Consumer) explain(p *partition, line []byte, r event.Reason, now int64, rec *event.Record) string {
	if r == event.ReasonTooLarge || rec == nil {
		return "its record batch inflates beyond " + strconv.FormatInt(c.cfg.MaxInflatedBytes, 10) + " bytes"
	}
	return c.intake.Explain(p.dec, line, r, now, rec)
}
