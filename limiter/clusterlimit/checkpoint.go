package clusterlimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/internal/kafkarange"
)

// DefaultCheckpointInterval is how often an owner writes its partitions' limiter state.
const DefaultCheckpointInterval = time.Second

// TopicSuffix names the checkpoint topic after the events topic: <topic>.slide-limiter.
const TopicSuffix = ".slide-limiter"

// CheckpointConfig configures checkpoints; Interval 0 turns them off (a new owner then
// starts its partitions' keys empty).
type CheckpointConfig struct {
	Interval time.Duration
	Brokers  []string
	// Topic is the events topic (the checkpoints go to Topic + TopicSuffix); Group keys
	// the records, so groups sharing a topic keep apart.
	Topic, Group string
	// Wait is how long a new owner waits for its predecessor's final checkpoint before it
	// takes the latest one there is (the predecessor crashed); default 2 × Interval.
	Wait   time.Duration
	Dialer *kafka.Dialer
}

// Validate reports a config New would refuse.
func (c *CheckpointConfig) Validate() error {
	switch {
	case c.Interval < 0 || c.Wait < 0:
		return errors.New("clusterlimit: negative checkpoint interval or wait")
	case c.Interval > 0 && (len(c.Brokers) == 0 || c.Topic == "" || c.Group == ""):
		return errors.New("clusterlimit: checkpoints need brokers, a topic and a group")
	}
	return nil
}

// SetCheckpoints sets the checkpoints' config (known only once the brokers are); call it
// before Run and the first OnGeneration.
func (b *Backend) SetCheckpoints(c CheckpointConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Wait == 0 {
		c.Wait = 2 * c.Interval
	}
	b.cp = c
	return nil
}

// ownership is this instance's partitions as the consumer's generations hand them over,
// once OnGeneration was called: a partition is decided here only when owned and ready
// (restored). Decisions hold mu for reading, so a partition leaves only between them.
type ownership struct {
	mu      sync.RWMutex
	tracked bool
	gen     int32
	owned   map[int32]bool
	ready   map[int32]bool
	// epoch counts the times each partition was gained: a restore marks its partition
	// ready only if it was not lost and gained again meanwhile (a later restore will).
	epoch map[int32]uint64
	// finals is the last final checkpoint this instance wrote of each partition: gaining
	// it back, a restore waits for its predecessor's final record rather than take its own.
	finals map[int32]finalMark
	// since is when the current generation began here: a group described after it
	// without this instance expelled it (stopIfExpelled, OnGeneration).
	since time.Time
}

// finalMark names a final checkpoint record by its generation and its time.
type finalMark struct {
	gen int32
	at  int64
}

// OnGeneration is the consumer's generation hook (chain it after cluster's): this
// instance stops deciding the partitions it lost at once, writes their final checkpoint
// and forgets their keys; the partitions it gained are restored from their latest
// checkpoint before they are decided. It does not block.
func (b *Backend) OnGeneration(gen int32, assigned []int32) {
	self, at := b.g.Self(), time.Now()
	b.own.mu.Lock()
	// Expelled meanwhile (its session ran out), this instance missed generations in which
	// others decided its partitions: what it holds of them is stale. Those it keeps are
	// restored again, those it lost get no final record (their last owner writes it).
	// Without checkpoints there is nothing to restore: the stale state beats none.
	expelled := b.cp.Interval > 0 && b.own.tracked && b.g.MemberGone(self, b.own.since)
	b.own.since = at
	lost := []int32{}
	for p := range b.own.owned {
		lost = append(lost, p)
	}
	b.own.tracked, b.own.gen = true, gen
	now := map[int32]bool{}
	var gained, stale []int32
	prev := map[int32]predecessor{} // the gained partitions' previous owners, as the view still says
	prevAddr := map[int32]string{}
	epochs := map[int32]uint64{}
	for _, p := range assigned {
		now[p] = true
		if !b.own.owned[p] || expelled {
			if b.own.owned[p] {
				stale = append(stale, p)
			}
			gained = append(gained, p)
			b.own.ready[p] = false
			b.own.epoch[p]++
			epochs[p] = b.own.epoch[p]
			// A view naming this instance for a partition it did not hold is already this
			// generation's (a describe came first: stale answers from an old owner that
			// began it earlier) or names a process before this one at its address: the
			// predecessor is not known. Taken for "nothing to wait for", the restore
			// read the old owner's periodic checkpoint before its final one.
			switch o := b.g.PartitionOwner(p); o {
			case self, "":
				prev[p] = predUnknown
			default:
				prev[p], prevAddr[p] = predOther, o
			}
		}
	}
	kept := lost[:0]
	for _, p := range lost {
		if !now[p] {
			kept = append(kept, p)
			delete(b.own.ready, p)
		}
	}
	lost = kept
	b.own.owned = now
	b.own.mu.Unlock()
	if expelled && len(lost)+len(stale) > 0 {
		b.log.Warn("clusterlimit: this instance was out of the consumer group (its session ran out); the state it held is stale",
			"generation", gen, "restoring", stale, "dropped", lost)
	}
	if len(lost) == 0 && len(gained) == 0 {
		return
	}
	b.handover(func() {
		if len(lost) > 0 {
			if !expelled {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				b.checkpoint(ctx, lost, gen, true)
				cancel()
			}
			b.forget(lost)
		}
		if len(stale) > 0 {
			b.forget(stale) // restored below from their last owner's checkpoint
		}
		// The gained partitions restore side by side, each with its own budget: one
		// after another, a whole group restarted (every partition waiting up to Wait
		// for a final record of a recent generation) spent one budget on the first few,
		// and the rest went live with nothing restored.
		var wg sync.WaitGroup
		for _, p := range gained {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), b.cp.Wait+10*time.Second)
				defer cancel()
				b.restore(ctx, p, gen, epochs[p], prev[p], prevAddr[p], at)
			})
		}
		wg.Wait()
	})
}

// handover runs job after the handovers queued before it, in the background: a partition
// lost in one generation and regained in the next is forgotten before it is restored.
func (b *Backend) handover(job func()) {
	b.jobMu.Lock()
	defer b.jobMu.Unlock()
	b.jobs = append(b.jobs, job)
	if b.working {
		return
	}
	b.working = true
	b.bg.Go(func() {
		for {
			b.jobMu.Lock()
			if len(b.jobs) == 0 {
				b.working = false
				b.jobMu.Unlock()
				return
			}
			job := b.jobs[0]
			b.jobs = b.jobs[1:]
			b.jobMu.Unlock()
			job()
		}
	})
}

// owns reports whether partition p is decided here now; mu is held for reading.
func (b *Backend) ownsLocked(p int32) (owned, ready bool) {
	if !b.own.tracked {
		return b.g.Assigned(p), b.ready(p)
	}
	return b.own.owned[p], b.own.ready[p]
}

// Ready reports the partitions this instance owns but has not restored yet (their keys'
// decisions follow on_backend_error meanwhile), for readiness; nil when there are none.
func (b *Backend) Ready() error {
	waiting := b.Restoring()
	if len(waiting) == 0 {
		return nil
	}
	return fmt.Errorf("restoring the limiter state of partitions %v from %s", waiting, b.cp.Topic+TopicSuffix)
}

// Restoring lists, in order, the partitions this instance owns whose limiter state it
// has not restored yet; empty when none.
func (b *Backend) Restoring() []int32 {
	b.own.mu.RLock()
	defer b.own.mu.RUnlock()
	var waiting []int32
	for p := range b.own.owned {
		if !b.own.ready[p] {
			waiting = append(waiting, p)
		}
	}
	slices.Sort(waiting)
	return waiting
}

// Run writes the owned, restored partitions' checkpoints every Interval until ctx ends,
// and stops deciding them once the group goes on without this instance (stopIfExpelled).
func (b *Backend) Run(ctx context.Context) {
	if b.cp.Interval <= 0 {
		return
	}
	t := time.NewTicker(b.cp.Interval)
	defer t.Stop()
	// The membership check is a lock and a load: often, so an expelled instance stops
	// deciding within a tenth of a second of the describe that shows it gone.
	m := time.NewTicker(min(b.cp.Interval, 100*time.Millisecond))
	defer m.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.C:
			b.stopIfExpelled()
			continue
		case <-t.C:
		}
		b.stopIfExpelled()
		b.own.mu.RLock()
		var ps []int32
		for p := range b.own.owned {
			if b.own.ready[p] {
				ps = append(ps, p)
			}
		}
		gen := b.own.gen
		b.own.mu.RUnlock()
		if len(ps) > 0 {
			wctx, cancel := context.WithTimeout(ctx, max(b.cp.Interval, time.Second))
			b.checkpoint(wctx, ps, gen, false)
			cancel()
		}
	}
}

// Close stops deciding, writes the final checkpoint of every partition owned here (a
// planned handover: SIGTERM, before the consumer leaves the group, after the API has
// drained) and waits for the handovers under way.
func (b *Backend) Close(ctx context.Context) {
	b.own.mu.Lock()
	var ps []int32
	for p := range b.own.owned {
		if b.own.ready[p] {
			ps = append(ps, p)
		}
	}
	gen := b.own.gen
	b.own.owned, b.own.ready, b.own.tracked = map[int32]bool{}, map[int32]bool{}, true
	b.own.mu.Unlock()
	if len(ps) > 0 && b.cp.Interval > 0 {
		b.checkpoint(ctx, ps, gen, true)
	}
	b.bg.Wait()
	b.cpMu.Lock()
	defer b.cpMu.Unlock()
	b.topicMu.Lock()
	defer b.topicMu.Unlock()
	if b.w != nil {
		_ = b.w.Close()
		b.w, b.cpParts = nil, 0 // a later write (none is expected) creates it again
	}
}

// partitionOf is key's partition among n (Group.Partitions, read once per pass).
func partitionOf(key string, n int) int32 { return cluster.KeyPartition(key, n) }

func (b *Backend) forget(ps []int32) {
	drop := map[int32]bool{}
	for _, p := range ps {
		drop[p] = true
	}
	n := b.g.Partitions()
	for _, o := range b.owned {
		o.mem.Forget(func(k string) bool { return drop[partitionOf(o.route(k), n)] })
	}
}

// checkpoint writes one record per partition of ps: every live key of the cluster
// policies in it. Writes are one at a time, so a final record is never followed by a
// periodic one of the same partition: a periodic write leaves out the partitions this
// instance no longer owns.
func (b *Backend) checkpoint(ctx context.Context, ps []int32, gen int32, final bool) {
	b.cpMu.Lock()
	defer b.cpMu.Unlock()
	if !final {
		b.own.mu.RLock()
		still := ps[:0:0]
		for _, p := range ps {
			if b.own.owned[p] && b.own.ready[p] {
				still = append(still, p)
			}
		}
		b.own.mu.RUnlock()
		if ps = still; len(ps) == 0 {
			return
		}
	}
	if b.cp.Interval <= 0 || !b.ensureTopic(ctx) {
		return
	}
	now := time.Now()
	parts, heads := b.records(ps, gen, final, now)
	err := b.write(ctx, parts, heads)
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		// The broker lost the topic (restarted empty, or someone deleted it): create it
		// again and write once more.
		b.topicMu.Lock()
		b.cpParts = 0
		_ = b.w.Close()
		b.topicMu.Unlock()
		if b.ensureTopic(ctx) {
			err = b.write(ctx, parts, heads)
		}
	}
	if err != nil {
		b.cpBufs = nil // the writer may still hold them (a write cut by ctx goes on)
		b.warnf(slog.LevelWarn, "clusterlimit: writing limiter checkpoints", "partitions", ps, "err", err)
		return
	}
	b.m.checkpoints.Add(float64(len(ps)))
	if final {
		// What the next owners restore ("keys" in their log line) is checked against it.
		b.log.Info("clusterlimit: wrote the final limiter checkpoint", "partitions", ps, "generation", gen, "keys", b.cpKeys)
		b.own.mu.Lock()
		for _, p := range ps {
			b.own.finals[p] = finalMark{gen, now.UnixMilli()}
		}
		b.own.mu.Unlock()
	}
}

// records encodes the checkpoint records of partitions ps at now: heads[i] is ps[i]'s
// record, and parts the parts written before the heads of partitions whose entries pass
// maxPartBytes (checkpoint_parts.go). A round allocates nothing once the sizes settled:
// each partition's entries are encoded into the buffer of its previous round (b.cpBufs,
// under cpMu), each record's header written last into room left before its entries, so
// the entries are copied once and every record is a slice of the buffer. The messages are
// valid until the next records; checkpoint forgets the buffers of a write that failed,
// which kafka-go may still hold.
func (b *Backend) records(ps []int32, gen int32, final bool, now time.Time) (parts, heads []kafka.Message) {
	n := b.g.Partitions()
	slot := make([]int, n) // partition → index in ps, -1: not asked
	for i := range slot {
		slot[i] = -1
	}
	if b.cpBufs == nil {
		b.cpBufs = map[int32][]byte{}
	}
	bodies := make([][]byte, len(ps))
	splits := make([]split, len(ps))
	for i, p := range ps {
		if p >= 0 && int(p) < n {
			slot[p] = i
		}
		buf := b.cpBufs[p]
		if cap(buf) > 1<<20 && cap(buf) > 4*len(buf) {
			buf = nil // the partition shrank a lot: give the memory back
		}
		bodies[i] = slices.Grow(buf[:0], max(len(buf), maxHeaderBytes+64))[:maxHeaderBytes]
		splits[i].start = maxHeaderBytes // a part's header fits there too
	}
	for name, o := range b.owned {
		i := 0 // keep's verdict, for the fn call that follows it on the same key
		o.mem.Export(now, func(k string) bool {
			i = slot[partitionOf(o.route(k), n)]
			return i >= 0
		}, func(k string, exp int64, st []byte) {
			bodies[i] = splits[i].before(bodies[i], entrySize(name, k, st))
			bodies[i] = appendEntry(bodies[i], name, o.fp, k, exp, st)
			splits[i].n++
		})
	}
	heads = make([]kafka.Message, len(ps))
	var head [maxHeaderBytes]byte
	b.cpKeys = 0
	for i, p := range ps {
		b.cpKeys += splits[i].n
		for _, c := range splits[i].counts {
			b.cpKeys += c
		}
		b.cpBufs[p] = bodies[i] // its length: what the next round's will likely need
		sp := &splits[i]
		if len(sp.cuts) == 0 {
			h := appendCheckpointHeader(head[:0], gen, final, now.UnixMilli(), sp.n)
			start := maxHeaderBytes - len(h)
			copy(bodies[i][start:], h)
			heads[i] = kafka.Message{Key: []byte(b.recordKey(p)), Value: bodies[i][start:]}
			continue
		}
		var ms []kafka.Message
		ms, heads[i] = b.inParts(p, bodies[i], sp, gen, final, now.UnixMilli())
		parts = append(parts, ms...)
	}
	return parts, heads
}

func (b *Backend) recordKey(p int32) string { return b.cp.Group + "/" + strconv.Itoa(int(p)) }

// predecessor is what the view said of a gained partition's owner at the generation's
// start.
type predecessor uint8

const (
	predOther   predecessor = iota // another instance: wait for its final checkpoint
	predUnknown                    // no view yet, none in it, or this instance: wait when p has checkpoints
)

// restore loads partition p's latest checkpoint, then marks it ready. When p had another
// owner, or one unknown and p has checkpoints, it waits up to Wait for that owner's final
// checkpoint, of this or the previous generation, before it takes the latest there is:
// the owner crashed, which the group says as soon as it is described after the generation
// began (at) without prevAddr.
func (b *Backend) restore(ctx context.Context, p int32, gen int32, epoch uint64, prev predecessor, prevAddr string, at time.Time) {
	defer func() {
		b.own.mu.Lock()
		if b.own.owned[p] && b.own.epoch[p] == epoch {
			b.own.ready[p] = true
		}
		b.own.mu.Unlock()
	}()
	if b.cp.Interval <= 0 || !b.ensureTopic(ctx) {
		return
	}
	deadline := time.Now().Add(b.cp.Wait)
	var cp *checkpointRecord
	var err error
	for {
		cp, err = b.readLatest(ctx, p)
		if err != nil {
			b.warnf(slog.LevelWarn, "clusterlimit: reading a limiter checkpoint", "partition", p, "err", err)
		}
		wait := (prev == predOther && !b.g.MemberGone(prevAddr, at)) || (prev == predUnknown && cp != nil)
		if !wait || (cp != nil && cp.final && cp.gen >= gen-1 && !b.ownFinal(p, cp)) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cp == nil {
		if err != nil {
			// Said whatever errLog allows: the partition's keys start afresh here, and may
			// admit up to their limits again.
			b.log.Warn("clusterlimit: deciding a partition without its limiter checkpoint, which could not be read", "partition", p, "err", err)
		}
		return
	}
	parts := b.partitions(ctx)
	if parts == 0 {
		b.log.Warn("clusterlimit: deciding a partition without its limiter checkpoint: the topic's partition count is still unknown", "partition", p)
		return
	}
	now := time.Now().UnixNano()
	n, refused := 0, 0
	for _, e := range cp.entries {
		o := b.owned[e.policy]
		if o == nil || o.fp != e.fp || e.expires <= now || partitionOf(o.route(e.key), parts) != p {
			continue
		}
		// A planned key's state is the plan's numbers' (a pro key's count past the
		// policy's own limit): checked against the policy's, it was refused and the key
		// started afresh, admitting its whole plan again at every handover.
		m := o.mem
		if ep, ok := b.effective(o, e.key); ok {
			if v := o.variant(&ep, o.fingerprintOf(&ep)); v != nil {
				m = v
			}
		}
		if err := m.Import(e.key, e.expires, e.state); err == nil {
			n++
		} else {
			refused++
		}
	}
	b.m.restored.Add(float64(n))
	b.log.Info("clusterlimit: restored a partition's limiter state", "partition", p, "keys", n, "refused", refused,
		"checkpoint_age", time.Since(time.UnixMilli(cp.at)).Round(time.Millisecond), "final", cp.final)
}

// ownFinal reports that cp is the final checkpoint this instance wrote when it last lost p.
// Without it, a partition handed back within a generation (A to B, then B to A) was
// restored from A's own older final record whenever it was read before B's: of the
// previous generation, it passed for B's, and the keys lost what B had decided.
func (b *Backend) ownFinal(p int32, cp *checkpointRecord) bool {
	b.own.mu.RLock()
	defer b.own.mu.RUnlock()
	m, ok := b.own.finals[p]
	return ok && m.gen == cp.gen && m.at == cp.at
}

// ensureTopic creates the compacted checkpoint topic (as many partitions as the events
// topic) unless it exists, and the writer; false when it cannot.
func (b *Backend) ensureTopic(ctx context.Context) bool {
	b.topicMu.Lock()
	defer b.topicMu.Unlock()
	if b.cpParts > 0 {
		return true
	}
	client := &kafka.Client{Addr: kafka.TCP(b.cp.Brokers...), Timeout: 5 * time.Second, Transport: b.transport()}
	topic := b.cp.Topic + TopicSuffix
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{b.cp.Topic, topic}})
	if err != nil {
		return false
	}
	events, cps := 0, 0
	for _, t := range meta.Topics {
		switch {
		case t.Name == b.cp.Topic && t.Error == nil:
			events = len(t.Partitions)
		case t.Name == topic && t.Error == nil:
			cps = len(t.Partitions)
		}
	}
	if cps == 0 {
		cps = max(events, 1)
		resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
			Topic: topic, NumPartitions: cps, ReplicationFactor: -1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
		}}})
		if err == nil {
			err = resp.Errors[topic]
		}
		if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			b.warnf(slog.LevelError, "clusterlimit: cannot create the limiter checkpoint topic; create it with cleanup.policy=compact", "topic", topic, "err", err)
			return false
		}
	}
	b.cpParts = cps
	b.w = &kafka.Writer{Addr: kafka.TCP(b.cp.Brokers...), Topic: topic, Transport: b.transport(),
		Balancer:     kafka.BalancerFunc(func(m kafka.Message, parts ...int) int { return b.cpPartition(m.Key, len(parts)) }),
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchBytes: kafkarange.MaxBatchBytes}
	return true
}

func (b *Backend) transport() kafka.RoundTripper {
	if d := b.cp.Dialer; d != nil {
		return &kafka.Transport{Dial: d.DialFunc, TLS: d.TLS, SASL: d.SASLMechanism, ClientID: d.ClientID}
	}
	return nil
}

// cpPartition is the checkpoint partition of a record key group/p, or of a part's
// group/p#i: p mod n.
func (b *Backend) cpPartition(key []byte, n int) int {
	key = key[bytes.LastIndexByte(key, '/')+1:]
	if j := bytes.IndexByte(key, '#'); j >= 0 {
		key = key[:j]
	}
	p, _ := strconv.Atoi(string(key))
	return p % max(n, 1)
}
