package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/limiter"
)

// plansBatch bounds the keys' plans applied at once: SetKeyPlans copies the table of the
// topic's plans once per call, so a topic read from its start goes in batches.
const plansBatch = 10_000

// followPlansTopic reads the compacted topic of keys' plans (record key: the tenant key,
// value: a plan name the plans file lists; an empty value or a tombstone drops the key's
// plan, so the file's applies again) from the start of every partition, then follows it,
// until ctx ends, applying the records to svc in batches (limiter.Service.SetKeyPlans, where
// they win over the file). A record naming no listed plan is refused, counted
// (slide_limiter_plan_updates_total{source="topic",result="refused"}) and logged at most
// once a second, the key's plan kept. Every instance reads the whole topic (no group).
func followPlansTopic(ctx context.Context, brokers []string, d *kafka.Dialer, topic string, svc *limiter.Service, log *slog.Logger) {
	if d == nil {
		d = kafka.DefaultDialer
	}
	recs := make(chan kafka.Message, 1024)
	warn := rate.NewLimiter(1, 1)
	go func() {
		var parts []kafka.Partition
		for ctx.Err() == nil {
			var err error
			if parts, err = topicPartitions(ctx, d, brokers, topic); err == nil && len(parts) > 0 {
				break
			}
			if warn.Allow() {
				log.Warn("plans topic: listing its partitions; retrying", "topic", topic, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		var wg sync.WaitGroup
		for _, p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				readPlansPartition(ctx, brokers, d, topic, p.ID, recs, log, warn)
			}()
		}
		wg.Wait()
	}()
	go func() {
		for {
			var m kafka.Message
			select {
			case <-ctx.Done():
				return
			case m = <-recs:
			}
			batch := map[string]string{string(m.Key): string(m.Value)}
		drain:
			for len(batch) < plansBatch {
				select {
				case m = <-recs:
					batch[string(m.Key)] = string(m.Value) // a later record of a key wins, as compaction keeps it
				default:
					break drain
				}
			}
			if err := svc.SetKeyPlans(batch); err != nil && warn.Allow() {
				log.Warn("plans topic: records refused; those keys keep their plan", "topic", topic, "err", err)
			}
		}
	}()
}

func topicPartitions(ctx context.Context, d *kafka.Dialer, brokers []string, topic string) ([]kafka.Partition, error) {
	var last error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err != nil {
			last = err
			continue
		}
		parts, err := conn.ReadPartitions(topic)
		conn.Close()
		if err == nil {
			return parts, nil
		}
		last = err
	}
	return nil, last
}

// readPlansPartition sends partition id's records to recs, from its first offset.
func readPlansPartition(ctx context.Context, brokers []string, d *kafka.Dialer, topic string, id int, recs chan<- kafka.Message, log *slog.Logger, warn *rate.Limiter) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: id, Dialer: d,
		MaxWait: 500 * time.Millisecond, MaxBytes: 4 << 20, StartOffset: kafka.FirstOffset})
	defer r.Close()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return
			}
			if warn.Allow() {
				log.Warn("plans topic: reading", "topic", topic, "partition", id, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		select {
		case recs <- m:
		case <-ctx.Done():
			return
		}
	}
}
