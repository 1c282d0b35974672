package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

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
		if c.errLim.Allow() {
			c.log.Warn("ingest: fetching", "partition", p.id, "offset", p.next.Load(), "err", err)
		}
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
// ctx ends or an error. It uses kafka-go's Conn directly rather than a Reader: a Reader
// hands records over a channel one at a time and sets a socket deadline per record, which
// costs more CPU than decoding and observing the event. A fetch on an idle partition
// waits up to MaxWait, which bounds how long a stop takes; a batch in hand is finished.
func (c *Consumer) fetch(ctx context.Context, p *partition) error {
	conn, err := c.dialLeader(ctx, p.id)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Seek(p.next.Load(), kafka.SeekAbsolute); err != nil {
		// Seek checks the offset against the log: retention may have passed it while the
		// connection was down. Without moving on, every retry would seek to it again.
		if errors.Is(err, kafka.OffsetOutOfRange) {
			c.skipOutOfRange(ctx, conn, p, p.next.Load())
		}
		return fmt.Errorf("seeking to offset %d: %w", p.next.Load(), err)
	}
	for ctx.Err() == nil {
		if err := conn.SetReadDeadline(time.Now().Add(c.cfg.MaxWait + fetchMargin)); err != nil {
			return fmt.Errorf("setting the fetch deadline: %w", err)
		}
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: c.cfg.MaxBytes, MaxWait: c.cfg.MaxWait})
		now := c.now().UnixMilli()
		hwm := batch.HighWaterMark()
		if hwm >= 0 { // the batch in hand is lag until it is processed
			p.lag.Set(float64(max(hwm-p.next.Load(), 0)))
		}
		var accepted, size, n int
		var lastTS int64
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				if errors.Is(err, ErrInflateBudget) {
					unblock(conn)
				}
				break
			}
			accepted += c.record(ctx, p, &m, now)
			size += len(m.Value)
			lastTS = m.Time.UnixMilli()
			if n++; n%progressEvery == 0 {
				// A batch is up to MaxBytes: over a slow link it streams in for longer than
				// the deadline, so the deadline follows the data, and /readyz's progress and
				// the lag move within the batch instead of jumping at its end.
				p.next.Store(m.Offset + 1)
				if hwm >= 0 {
					p.lag.Set(float64(max(hwm-m.Offset-1, 0)))
					p.lagSec.Set(max(float64(c.now().UnixMilli()-lastTS)/1000, 0))
				}
				_ = conn.SetReadDeadline(time.Now().Add(c.cfg.MaxWait + fetchMargin))
			}
		}
		if n > 0 {
			p.lastTS = lastTS
		}
		err := batch.Close()
		if errors.Is(err, kafka.RequestTimedOut) {
			// The broker's answer to a fetch that waited MaxWait without new records (kafka-go's
			// Reader treats it the same way): an empty batch, not a failure.
			err = nil
		}
		// The connection's offset is past the last record read, and past compacted gaps.
		next, _ := conn.Offset()
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
		if err != nil {
			if errors.Is(err, ErrInflateBudget) {
				// A compression bomb at next: refused as a pointer to its offset, never
				// inflated whole. kafka-go closed the connection on the error; the caller
				// reconnects at once, one offset further.
				c.refuse(ctx, p, &kafka.Message{Topic: c.cfg.Topic, Partition: int(p.id), Offset: next}, nil, ReasonTooLarge,
					next < p.committed.Load())
				p.next.Store(next + 1)
				return fmt.Errorf("offset %d: %w", next, errSkipped{err})
			}
			if errors.Is(err, kafka.OffsetOutOfRange) {
				c.skipOutOfRange(ctx, conn, p, next)
			}
			return fmt.Errorf("fetching at offset %d: %w", next, err)
		}
	}
	return nil
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
	reason := "retention"
	if next > last {
		reason = "log_truncated"
	}
	now := c.now()
	start := now.Add(-c.cfg.Restore)
	if reason == "log_truncated" && p.lastTS > 0 {
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

// dialLeader connects to the leader of partition id through the first broker that answers.
func (c *Consumer) dialLeader(ctx context.Context, id int32) (*kafka.Conn, error) {
	d := c.cfg.Dialer
	if d == nil {
		d = kafka.DefaultDialer
	}
	var errs []error
	for _, b := range c.cfg.Brokers {
		conn, err := d.DialLeader(ctx, "tcp", b, c.cfg.Topic, int(id))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("dialing the leader of partition %d: %w", id, errors.Join(errs...))
}

// record observes every event of record m at now (unix ms) and returns how many the store
// accepted: the per-record hot path. Offsets, lag and counters are settled per batch.
func (c *Consumer) record(ctx context.Context, p *partition, m *kafka.Message, now int64) int {
	recTS := m.Time.UnixMilli()
	replay := m.Offset < p.committed.Load()
	accepted := 0
	lines := p.dec.DecodeLines(m.Value, recTS, func(line []byte, ev window.Event, r Reason) {
		if r == ReasonNone {
			ev.Feed = window.FeedOf(p.id)
			// Future and late are judged against the record's timestamp, which is part of the
			// log, so every replay gives the same answer; the store judges the event's time
			// once, in its ring (window.Source says how a skewed record clock is handled).
			err := c.store.ObserveFrom(now, window.Source{RecordTS: recTS}, ev)
			if err == nil {
				accepted++
				return
			}
			if err == window.ErrExpired {
				// In its window at its record's time, out of it by now (lag, or a replay
				// reaching further back than this metric keeps): refused as expired,
				// counted with the other refusals and dead-lettered.
				c.m.expired.Inc()
				r = ReasonExpired
			} else {
				r = ReasonOf(err)
			}
		}
		c.refuse(ctx, p, m, line, r, replay)
	})
	if lines == 0 && !replay {
		c.m.tombstones.Inc() // no event in it: a tombstone (null value) or blank lines
	}
	return accepted
}

// refuse counts, logs and dead-letters one refused line.
func (c *Consumer) refuse(ctx context.Context, p *partition, m *kafka.Message, line []byte, r Reason, replay bool) {
	if replay {
		c.m.skippedBy[r].Inc()
		return
	}
	c.m.rejectedBy[r].Inc()
	if c.rejLim.Allow() {
		const maxShown = 256
		shown := line
		if len(shown) > maxShown {
			shown = shown[:maxShown]
		}
		c.log.Warn("ingest: event refused", "reason", r.String(), "topic", m.Topic, "partition", m.Partition,
			"offset", m.Offset, "line", string(shown), "not_logged_before", c.hidden.Swap(0))
	} else {
		c.hidden.Add(1)
	}
	if c.dlq != nil {
		c.dlq.send(ctx, letter(m, line, r))
	}
}
