package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// This file is the consumer's group lifecycle: joining the group, one generation's
// revocations and assignments, and the balancers that carry Config.MemberData.

// Run consumes until ctx ends, then stops gracefully and returns nil. It returns an error
// only when it cannot start; connection and rebalance errors are logged and retried.
// A Consumer runs once: a second call returns ErrStarted.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.used.CompareAndSwap(false, true) {
		return ErrStarted
	}
	if c.dlqW != nil {
		c.dlq = newDeadLetters(c.dlqW, c.log, c.m)
		defer c.dlq.close()
	}
	if c.snap != nil {
		go c.snap.run(ctx)
		defer c.snap.close() // before the dead letters close: a snapshot write flushes them
	}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                    c.cfg.Group,
		Brokers:               c.cfg.Brokers,
		Dialer:                c.cfg.Dialer,
		Topics:                []string{c.cfg.Topic},
		HeartbeatInterval:     c.cfg.HeartbeatInterval,
		SessionTimeout:        c.cfg.SessionTimeout,
		RebalanceTimeout:      c.cfg.RebalanceTimeout,
		JoinGroupBackoff:      c.cfg.JoinGroupBackoff,
		WatchPartitionChanges: true,
		StartOffset:           kafka.FirstOffset,
		ErrorLogger:           c.kafkaLogger("consumer group"),
		GroupBalancers:        c.balancers(),
	})
	if err != nil {
		return fmt.Errorf("creating consumer group %q: %w", c.cfg.Group, err)
	}
	c.log.Info("ingest: joining consumer group", "group", c.cfg.Group, "topic", c.cfg.Topic, "brokers", c.cfg.Brokers)
	for ctx.Err() == nil {
		gen, err := cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			c.warn("ingest: joining consumer group", "group", c.cfg.Group, "err", err)
			continue
		}
		done := make(chan struct{})
		gen.Start(func(gctx context.Context) {
			defer close(done)
			c.runGeneration(gctx, gen)
		})
		select {
		case <-done: // rebalance: join the next generation
		case <-ctx.Done():
		}
	}
	// Close ends the generation (its workers finish the batch in hand, offsets are
	// committed) and leaves the group, so the partitions move on without a session timeout.
	err = cg.Close()
	c.log.Info("ingest: left consumer group", "group", c.cfg.Group)
	return err
}

// balancers are kafka-go's default group balancers (range, then round robin), carrying
// Config.MemberData as their user data when it is set; nil keeps kafka-go's defaults.
func (c *Consumer) balancers() []kafka.GroupBalancer {
	if len(c.cfg.MemberData) == 0 {
		return nil
	}
	return []kafka.GroupBalancer{
		memberData{kafka.RangeGroupBalancer{}, c.cfg.MemberData},
		memberData{kafka.RoundRobinGroupBalancer{}, c.cfg.MemberData},
	}
}

// memberData is a group balancer whose join metadata carries data; assignment is the
// wrapped balancer's.
type memberData struct {
	kafka.GroupBalancer
	data []byte
}

func (m memberData) UserData() ([]byte, error) { return m.data, nil }

// runGeneration sets up the partitions of one group generation and runs them until the
// generation ends (a rebalance, or Run's shutdown).
func (c *Consumer) runGeneration(gctx context.Context, gen *kafka.Generation) {
	c.m.generations.Inc()
	assigned := map[int32]int64{} // partition → committed offset
	for _, a := range gen.Assignments[c.cfg.Topic] {
		assigned[int32(a.ID)] = a.Offset
	}
	// The partitions gained count as restoring from now, before the hook: a read that the
	// hook's new assignment sends to this instance alone must not find them empty.
	c.mu.Lock()
	c.planning = c.planning[:0]
	for id := range assigned {
		if _, ok := c.parts[id]; !ok {
			c.planning = append(c.planning, id)
		}
	}
	c.setPartitionGaugesLocked()
	c.mu.Unlock()
	if c.onGeneration != nil {
		ids := make([]int32, 0, len(assigned))
		for id := range assigned {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		c.onGeneration(gen.ID, ids)
	}

	// Revoke first: a partition that moved away must stop being served now.
	c.mu.Lock()
	c.gen = gen.ID
	var revoked, added []int32
	for id := range c.parts {
		if _, ok := assigned[id]; !ok {
			revoked = append(revoked, id)
			delete(c.parts, id)
		}
	}
	for id := range assigned {
		if _, ok := c.parts[id]; !ok {
			added = append(added, id)
		}
	}
	c.setPartitionGaugesLocked()
	c.mu.Unlock()
	slices.Sort(revoked)
	slices.Sort(added)
	for _, id := range revoked {
		n := c.store.DropPartition(id)
		c.m.lag.DeleteLabelValues(partitionLabel(id))
		c.m.lagSeconds.DeleteLabelValues(partitionLabel(id))
		c.log.Info("ingest: partition revoked", "partition", id, "series_dropped", n, "generation", gen.ID)
	}

	parts, err := c.plan(gctx, added, assigned)
	if err != nil {
		return // the generation ended while planning; the next one plans again
	}
	c.mu.Lock()
	for _, p := range parts {
		c.parts[p.id] = p
	}
	c.planning = c.planning[:0]
	owned := make([]*partition, 0, len(c.parts))
	for _, p := range c.parts {
		owned = append(owned, p)
	}
	c.joined = true
	c.setPartitionGaugesLocked()
	c.mu.Unlock()
	c.log.Info("ingest: generation", "generation", gen.ID, "member", gen.MemberID, "partitions", len(owned), "added", added, "revoked", revoked)
	if len(owned) == 0 {
		c.log.Warn("ingest: no partition assigned: more instances than partitions, or the topic does not exist yet", "topic", c.cfg.Topic)
	}

	var wg sync.WaitGroup
	for _, p := range owned {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.consume(gctx, p)
		}()
	}
	tick := time.NewTicker(c.cfg.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			c.commit(gctx, gen, owned)
		case <-gctx.Done():
			wg.Wait()
			// The generation's context is over; the final commit gets its own deadline.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c.commit(ctx, gen, owned)
			cancel()
			if c.snap != nil {
				// Before this member rejoins (kafka-go waits for this function), so an instance
				// that takes a partition over finds the snapshot of where this one stopped.
				c.snap.final(owned)
			}
			return
		}
	}
}
