package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/limiter"
)

// plansBatch bounds the keys' plans applied at once (limiter.Service.SetKeyPlans makes a
// new table per call, copying the changes since its last merge), so a topic read from its
// start goes in large batches.
const plansBatch = 65_536

// planRec is a record of the plans topic, or (caughtUp) word that its partition has been
// read to where it ended when the reading began.
type planRec struct {
	m        kafka.Message
	caughtUp bool
}

// plansProgress is how far the first reading of the plans topic is: the partitions not yet
// read and applied to where they ended when it began. Until then the instance is not ready,
// since a key whose plan is still unread is decided by the file's plan (a paying tenant at
// the free plan's limits for the minutes a large topic takes).
type plansProgress struct {
	topic  string
	mu     sync.Mutex
	listed bool
	late   bool          // the topic did not exist at the start: nothing to wait for
	behind map[int]int64 // partition → its end offset when the reading began
}

// ready is nil once every partition was read and applied to its end at the start.
func (pp *plansProgress) ready() error {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	switch {
	case !pp.listed:
		return fmt.Errorf("reading the plans topic %s: listing its partitions", pp.topic)
	case len(pp.behind) > 0:
		parts := slices.Sorted(maps.Keys(pp.behind))
		return fmt.Errorf("reading the plans topic %s: partitions %v not yet read to their end", pp.topic, parts)
	}
	return nil
}

// applied notes that partition p's records below next are applied.
func (pp *plansProgress) applied(p int, next int64) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if end, ok := pp.behind[p]; ok && next >= end {
		delete(pp.behind, p)
	}
}

// followPlansTopic reads the compacted topic of keys' plans (record key: the tenant key,
// value: a plan name the plans file lists; an empty value or a tombstone drops the key's
// plan, so the file's applies again) from the start of every partition, then follows it,
// until ctx ends, applying the records to svc in batches (limiter.Service.SetKeyPlans, where
// they win over the file). A record naming no listed plan is refused, counted
// (slide_limiter_plan_updates_total{source="topic",result="refused"}) and logged at most
// once a second, the key's plan kept. Every instance reads the whole topic (no group). It
// returns the readiness of the first reading: an error until every partition is applied to
// where it ended when the reading began.
func followPlansTopic(ctx context.Context, brokers []string, d *kafka.Dialer, topic string, svc *limiter.Service, log *slog.Logger) func() error {
	if d == nil {
		d = kafka.DefaultDialer
	}
	pp := &plansProgress{topic: topic, behind: map[int]int64{}}
	recs := make(chan planRec, 1024)
	warn := rate.NewLimiter(1, 1)
	go func() {
		var parts []kafka.Partition
		for ctx.Err() == nil {
			var err error
			if parts, err = topicPartitions(ctx, d, brokers, topic); err == nil && len(parts) > 0 {
				break
			}
			if err == nil || errors.Is(err, kafka.UnknownTopicOrPartition) {
				// No topic yet (the billing system has not written it): nothing to wait for,
				// the file's plans apply, and it is followed once it appears.
				pp.mu.Lock()
				if !pp.listed {
					pp.listed, pp.late = true, true
					log.Warn("plans topic: it does not exist yet; keys keep the file's plans, and it is read once it appears", "topic", topic)
				}
				pp.mu.Unlock()
			} else if warn.Allow() {
				log.Warn("plans topic: listing its partitions; retrying", "topic", topic, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		pp.mu.Lock()
		if !pp.late { // readiness waits for the topic as it was at the start, not one that came later
			for _, p := range parts {
				pp.behind[p.ID] = -1 // its end not read yet
			}
		}
		pp.listed = true
		pp.mu.Unlock()
		var wg sync.WaitGroup
		for _, p := range parts {
			wg.Go(func() { readPlansPartition(ctx, brokers, d, topic, p.ID, pp, recs, log, warn) })
		}
		wg.Wait()
	}()
	go func() {
		for {
			var r planRec
			select {
			case <-ctx.Done():
				return
			case r = <-recs:
			}
			batch := map[string]string{}
			next := map[int]int64{}
		drain:
			for {
				if r.caughtUp {
					next[r.m.Partition] = max(next[r.m.Partition], r.m.Offset)
				} else {
					batch[string(r.m.Key)] = string(r.m.Value) // a later record of a key wins, as compaction keeps it
					next[r.m.Partition] = max(next[r.m.Partition], r.m.Offset+1)
				}
				if len(batch) >= plansBatch {
					break
				}
				select {
				case r = <-recs:
				default:
					break drain
				}
			}
			if len(batch) > 0 {
				if err := svc.SetKeyPlans(batch); err != nil && warn.Allow() {
					log.Warn("plans topic: records refused; those keys keep their plan", "topic", topic, "err", err)
				}
			}
			for p, n := range next {
				pp.applied(p, n)
			}
		}
	}()
	return pp.ready
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

// readPlansPartition sends partition id's records to recs, from its first offset. Until
// it has read to where the partition ended when it began, it says so (planRec.caughtUp)
// when it gets there, or when nothing more comes within a few fetches (compaction may have
// removed the records at the end).
func readPlansPartition(ctx context.Context, brokers []string, d *kafka.Dialer, topic string, id int, pp *plansProgress, recs chan<- planRec, log *slog.Logger, warn *rate.Limiter) {
	const maxWait = 500 * time.Millisecond
	end := int64(-1)
	for end < 0 && ctx.Err() == nil {
		first, last, err := partitionOffsets(ctx, d, brokers, topic, id)
		if err == nil {
			end = last
			pp.mu.Lock()
			if _, tracked := pp.behind[id]; tracked {
				pp.behind[id] = end
			}
			pp.mu.Unlock()
			if last <= first {
				pp.applied(id, end) // empty
			}
			break
		}
		if warn.Allow() {
			log.Warn("plans topic: reading its end offsets; retrying", "topic", topic, "partition", id, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: id, Dialer: d,
		MaxWait: maxWait, MaxBytes: 4 << 20, StartOffset: kafka.FirstOffset})
	defer r.Close()
	caughtUp := false
	for {
		var m kafka.Message
		var err error
		if caughtUp {
			m, err = r.ReadMessage(ctx)
		} else {
			rctx, cancel := context.WithTimeout(ctx, 4*maxWait)
			m, err = r.ReadMessage(rctx)
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !caughtUp && errors.Is(err, context.DeadlineExceeded) {
				caughtUp = true // nothing more below the end: its last records were compacted away
				select {
				case recs <- planRec{m: kafka.Message{Partition: id, Offset: end}, caughtUp: true}:
				case <-ctx.Done():
					return
				}
				continue
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
		caughtUp = caughtUp || m.Offset+1 >= end
		select {
		case recs <- planRec{m: m}:
		case <-ctx.Done():
			return
		}
	}
}

// partitionOffsets reads the first and the end offset of partition id from its leader,
// found through the first broker that answers.
func partitionOffsets(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, id int) (first, last int64, err error) {
	for _, b := range brokers {
		var conn *kafka.Conn
		if conn, err = d.DialLeader(ctx, "tcp", b, topic, id); err != nil {
			continue
		}
		first, last, err = conn.ReadOffsets()
		conn.Close()
		if err == nil {
			return first, last, nil
		}
	}
	return 0, 0, err
}
