package ingest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
)

// This file is restore planning: a newly assigned partition's state, where its replay
// starts (seek.go searches the start by time) and where it ends.

// partition is the state of one assigned partition. It lives from assignment to
// revocation, across generations that keep it.
type partition struct {
	id        int32
	label     string
	from      int64        // first offset replayed
	target    int64        // end of the log at assignment (the LSO under read_committed): restored once next reaches it
	committed atomic.Int64 // group's committed offset at assignment (lowered by an offset reset): records below it were processed before
	assigned  time.Time    // wall clock at assignment, for the restore duration
	restoreMs atomic.Int64 // restore duration, ms; set once restored
	restored  atomic.Bool
	next      atomic.Int64 // next offset to process
	hwm       atomic.Int64 // end of the log read to at the last fetch: the high watermark, or the LSO under read_committed
	top       atomic.Int64 // high watermark at the last fetch
	legacy    bool         // the log holds messages before record batch v2: read through kafka-go (fetch_raw.go)
	lastTS    int64        // timestamp of the last record processed, unix ms (0: none); the worker's
	lastSent  int64        // last committed offset; only the committer touches it

	// Owned by the partition's worker goroutine.
	dec    event.Format // the intake's, for this partition: its intern table holds the partition's names
	events prometheus.Counter
	bytes  prometheus.Counter
	snap   partSnap
	lag    prometheus.Gauge
	lagSec prometheus.Gauge
}

// plan finds where each newly assigned partition's replay starts and ends, and drops its
// series so the replay fills fresh windows. It retries until it succeeds or gctx ends.
func (c *Consumer) plan(gctx context.Context, ids []int32, committed map[int32]int64) ([]*partition, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	for {
		now := c.now()
		// The ends first, then the restore starts, in that order: a partition with no
		// record at or after the restore start replays from the end as it was before the
		// search. Asking for both at once (kafka-go splits a request, in no set order) could
		// answer "no record since then" and an end that already held records that arrived
		// meanwhile: those were skipped, never counted.
		ends, err := c.listOffsets(gctx, ids, func(id int32) kafka.OffsetRequest { return kafka.LastOffsetOf(int(id)) })
		var firsts map[int32]kafka.PartitionOffsets
		if err == nil {
			firsts, err = c.listOffsets(gctx, ids, func(id int32) kafka.OffsetRequest { return kafka.FirstOffsetOf(int(id)) })
		}
		var starts map[int32]int64
		if err == nil {
			starts, err = c.restoreStarts(gctx, ids, firsts, ends, now)
		}
		if err == nil {
			parts, perr := c.partitionsFrom(ends, starts, ids, committed, now)
			if perr == nil {
				return parts, nil
			}
			err = perr
		}
		c.warn("ingest: listing offsets to restore", "partitions", ids, "err", err)
		select {
		case <-gctx.Done():
			return nil, gctx.Err()
		case <-time.After(c.cfg.JoinGroupBackoff):
		}
	}
}

// listOffsets asks for one offset of each partition in ids, as req makes it.
func (c *Consumer) listOffsets(ctx context.Context, ids []int32, req func(int32) kafka.OffsetRequest) (map[int32]kafka.PartitionOffsets, error) {
	// Under read_committed the end is the last stable offset: a fetch reads no further until
	// the oldest open transaction ends, so a restore waiting for the high watermark (and
	// /readyz with it) would wait for a producer's transaction, however long it stays open.
	r := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}, IsolationLevel: c.isolation()}
	for _, id := range ids {
		r.Topics[c.cfg.Topic] = append(r.Topics[c.cfg.Topic], req(id))
	}
	resp, err := c.client.ListOffsets(ctx, r)
	if err != nil {
		return nil, err
	}
	byID := map[int32]kafka.PartitionOffsets{}
	for _, po := range resp.Topics[c.cfg.Topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("partition %d: %w", po.Partition, po.Error)
		}
		byID[int32(po.Partition)] = po
	}
	return byID, nil
}

// partitionsFrom plans each partition from its end (asked first) and its first offset at
// or after the restore start (searched second).
func (c *Consumer) partitionsFrom(ends map[int32]kafka.PartitionOffsets, starts map[int32]int64, ids []int32, committed map[int32]int64, now time.Time) ([]*partition, error) {
	parts := make([]*partition, 0, len(ids))
	for _, id := range ids {
		po, ok := ends[id]
		if !ok || po.LastOffset < 0 {
			return nil, fmt.Errorf("partition %d: no offsets in the answer", id)
		}
		from := po.LastOffset // no record at or after the restore start: nothing to replay
		if off, ok := starts[id]; ok && off >= 0 && off < from {
			from = off
		}
		p := &partition{
			id: id, label: partitionLabel(id), from: from, target: po.LastOffset,
			assigned: time.Now(), lastSent: -1, dec: c.intake.NewFormat(),
		}
		p.committed.Store(committed[id])
		p.events = c.m.events.WithLabelValues(p.label)
		p.bytes = c.m.bytes.WithLabelValues(p.label)
		p.lag = c.m.lag.WithLabelValues(p.label)
		p.lagSec = c.m.lagSeconds.WithLabelValues(p.label)
		for _, r := range offsetResetReasons {
			// At 0 from the assignment: increase() reads nothing from a series' first
			// sample, so a reset that made its own child (at 1) would never be alerted on.
			c.m.offsetResets.WithLabelValues(p.label, r)
		}
		p.next.Store(from)
		p.hwm.Store(po.LastOffset)
		p.top.Store(po.LastOffset) // the LSO under read_committed, until the first fetch tells the high watermark
		p.lag.Set(float64(po.LastOffset - from))
		n := c.store.DropPartition(id)
		c.log.Info("ingest: partition assigned, restoring", "partition", id, "from", from, "to", po.LastOffset,
			"committed", committed[id], "since", now.Add(-c.cfg.Restore).UTC().Format(time.RFC3339), "series_dropped", n)
		if from >= po.LastOffset {
			c.markRestored(p)
		}
		parts = append(parts, p)
	}
	return parts, nil
}
