package ingest

import (
	"context"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// This file is commit and progress: committing offsets, marking partitions restored,
// and Ready, WasReady, Restoring, Generation and Progress for /readyz.

func (c *Consumer) markRestored(p *partition) {
	if p.restored.Swap(true) {
		return
	}
	d := time.Since(p.assigned)
	p.restoreMs.Store(max(d.Milliseconds(), 0))
	c.m.restoreDuration.Observe(d.Seconds())
	c.sm.observeRestore(p, d)
	c.mu.Lock()
	c.setPartitionGaugesLocked()
	c.mu.Unlock()
	c.log.Info("ingest: partition restored", "partition", p.id, "records", p.target-p.from, "duration", d.Round(time.Millisecond))
}

// setPartitionGaugesLocked sets the partition gauges, Ready and WasReady; it requires c.mu.
func (c *Consumer) setPartitionGaugesLocked() {
	restoring := 0
	for _, p := range c.parts {
		if !p.restored.Load() {
			restoring++
		}
	}
	live := len(c.parts) - restoring
	restoring += len(c.planning)
	c.m.partitions.WithLabelValues("restoring").Set(float64(restoring))
	c.m.partitions.WithLabelValues("live").Set(float64(live))
	whole := c.joined && restoring == 0
	c.whole.Store(whole)
	if whole {
		c.wasReady.Store(true)
	}
}

// commit commits the next offset of every partition that moved since its last commit,
// after the dead letters of the records below it are written. It never moves a committed
// offset back during a replay, so records once counted are not counted again after a crash.
func (c *Consumer) commit(ctx context.Context, gen *kafka.Generation, parts []*partition) {
	offsets := map[int]int64{}
	for _, p := range parts {
		off := max(p.next.Load(), p.committed.Load())
		if off != p.lastSent && off >= 0 {
			offsets[int(p.id)] = off
		}
	}
	if len(offsets) == 0 {
		return
	}
	if c.dlq != nil {
		if err := c.dlq.flush(ctx); err != nil {
			return // the next tick (or the final commit) tries again
		}
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{c.cfg.Topic: offsets}); err != nil {
		c.m.commitErrors.Inc()
		c.warn("ingest: committing offsets", "generation", gen.ID, "err", err)
		return
	}
	for _, p := range parts {
		if off, ok := offsets[int(p.id)]; ok {
			p.lastSent = off
		}
	}
}

// Ready reports whether this instance serves complete windows: it has joined the group and
// every partition assigned to it has been replayed up to the end of the log as it was at
// assignment. An instance assigned no partition is ready once it has joined. It is one
// atomic load.
func (c *Consumer) Ready() bool { return c.whole.Load() }

// WasReady reports whether Ready has been true once since Run began: the first restore of
// every assigned partition is done. A rebalance that assigns more partitions makes Ready
// false again while they restore, not WasReady: slide serve stays ready for traffic then,
// and reads over the partitions still restoring (Restoring) answer for themselves.
func (c *Consumer) WasReady() bool { return c.wasReady.Load() }

// Restoring lists the partitions assigned to this instance whose windows are not restored
// yet, sorted; nil when there are none.
func (c *Consumer) Restoring() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	out = append(out, c.planning...)
	for _, p := range c.parts {
		if !p.restored.Load() {
			out = append(out, p.id)
		}
	}
	slices.Sort(out)
	return out
}

// Generation is the consumer group generation this consumer is in (0 before the first
// join). A partition is revoked (its series dropped) only after it changes, so a read that
// sees the same generation before and after saw every restored partition whole.
func (c *Consumer) Generation() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// Progress is a snapshot of the consumer's assignment, for /readyz. It marshals to JSON
// with snake_case names.
type Progress struct {
	Ready      bool                `json:"ready"`      // as Consumer.Ready
	Generation int32               `json:"generation"` // consumer group generation; 0 before the first join
	Partitions []PartitionProgress `json:"partitions"` // assigned partitions, by partition number
}

// PartitionProgress is the restore and lag state of one assigned partition. Offsets are
// Kafka offsets: From is the first replayed, Target the end of the log at assignment, Next
// the next to process, HighWaterMark the end of the log at the last fetch. Under read_committed
// (the default) Target is the last stable offset, the end a consumer reads to, and
// LastStableOffset the one at the last fetch: records between it and HighWaterMark wait for
// the transaction open at it to end.
type PartitionProgress struct {
	Partition     int32   `json:"partition"`
	Restored      bool    `json:"restored"`
	Done          float64 `json:"done"` // share of the replay done, in [0, 1]; 1 once restored
	From          int64   `json:"from"`
	Target        int64   `json:"target"`
	Next          int64   `json:"next"`
	HighWaterMark int64   `json:"high_water_mark"`
	// LastStableOffset is set under read_committed only.
	LastStableOffset *int64  `json:"last_stable_offset,omitempty"`
	RestoreSeconds   float64 `json:"restore_seconds"` // time the replay took; 0 until restored
	// Snapshot says whether the restore starts from a snapshot or the log, and how far it is;
	// nil with snapshots off.
	Snapshot *SnapshotProgress `json:"snapshot,omitempty"`
}

// Progress returns the consumer's current assignment and restore state.
func (c *Consumer) Progress() Progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := Progress{Ready: c.joined && len(c.planning) == 0, Generation: c.gen}
	for _, p := range c.parts {
		pp := PartitionProgress{
			Partition: p.id, Restored: p.restored.Load(), Done: 1, From: p.from, Target: p.target,
			Next: p.next.Load(), HighWaterMark: p.top.Load(),
			RestoreSeconds: float64(p.restoreMs.Load()) / 1000,
		}
		if !c.cfg.ReadUncommitted {
			lso := p.hwm.Load()
			pp.LastStableOffset = &lso
		}
		if c.snap != nil {
			pp.Snapshot = p.snap.progress(pp.Restored)
		}
		if !pp.Restored && pp.Target > pp.From {
			pp.Done = min(max(float64(pp.Next-pp.From)/float64(pp.Target-pp.From), 0), 1)
		}
		pr.Ready = pr.Ready && pp.Restored
		pr.Partitions = append(pr.Partitions, pp)
	}
	slices.SortFunc(pr.Partitions, func(a, b PartitionProgress) int { return int(a.Partition) - int(b.Partition) })
	return pr
}
