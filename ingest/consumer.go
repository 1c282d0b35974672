// This file is over 600 lines: it still holds four jobs (group lifecycle, restore planning,
// the fetch loop, commit and progress); splitting it by job is open in issue #10, and was
// held back this round while snapshots (#12) and hostile-input budgets (#18) changed it.

package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/window"
)

// Defaults of Config.
const (
	DefaultGroup             = "slide"
	DefaultCommitInterval    = time.Second
	DefaultSessionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval = time.Second
	DefaultRebalanceTimeout  = 10 * time.Second
	DefaultJoinGroupBackoff  = time.Second
	DefaultMaxWait           = time.Second
	DefaultMaxBytes          = 10 << 20
	DefaultRejectLogInterval = time.Second
)

// ErrStarted is returned by Run when the consumer has already been run: a Consumer runs once.
var ErrStarted = errors.New("ingest: consumer already started")

// Config configures a Consumer. Every zero field takes the default documented on it;
// Brokers is the only required field.
type Config struct {
	// Brokers are the bootstrap host:port addresses. Required.
	Brokers []string
	// Topic is the topic of events; default DefaultTopic ("events").
	Topic string
	// Group is the consumer group; default DefaultGroup ("slide"). Instances sharing a group
	// split the topic's partitions, and with them its keys.
	Group string
	// DeadLetterTopic receives every refused line with its reason in the HeaderReason header;
	// empty (the default) means no dead letters. It must differ from Topic.
	DeadLetterTopic string
	// Restore is how far back a newly assigned partition is replayed, measured on record
	// timestamps from now. It must cover the longest retention plus skew of every metric in
	// the store: use RestoreSpan. Default RestoreSpan(store), which covers the store's default
	// ring only.
	Restore time.Duration
	// MaxKeyLen is the longest key or metric accepted, in bytes; default DefaultMaxKeyLen (256).
	MaxKeyLen int
	// CommitInterval is how often processed offsets are committed; default 1 s. Offsets are
	// committed for lag monitoring and to mark what was already counted and dead-lettered;
	// restores seek by time, not to the committed offset.
	CommitInterval time.Duration
	// SessionTimeout is how long the group coordinator waits for a heartbeat before it
	// evicts this instance; default 10 s.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often this instance heartbeats, and so how fast it notices a
	// rebalance; default 1 s. It must be below SessionTimeout.
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long the coordinator waits for members to rejoin during a
	// rebalance; default 10 s.
	RebalanceTimeout time.Duration
	// JoinGroupBackoff is the wait before rejoining after a failed join; default 1 s.
	JoinGroupBackoff time.Duration
	// MaxWait is the longest a fetch waits for new records on an idle partition; default 1 s.
	// It also bounds how long a reader takes to close on shutdown or revocation. kafka-go
	// asks the broker to answer a quarter of it early, so very small values time out on a
	// loaded broker and reconnect.
	MaxWait time.Duration
	// MaxBytes is the most a fetch returns per partition; default 10 MiB.
	MaxBytes int
	// MaxInflatedBytes is the most one compressed record batch may inflate to; default
	// DefaultMaxInflatedBytes (32 MiB). A batch beyond it (a compression bomb) is never
	// inflated whole: each of its records is refused as ReasonTooLarge, dead-lettered as a
	// pointer to its offset, and reading goes on. The budget is process-wide (kafka-go
	// decompresses through a global codec table): the last New sets it.
	MaxInflatedBytes int64
	// RejectLogInterval is the minimum spacing of refused-event log lines (after a burst of
	// 10); the metric counts them all. Default 1 s.
	RejectLogInterval time.Duration
	// Snapshots configures window snapshots in a compacted topic, which make a restore cost
	// the size of the state instead of the length of the history; the zero value is off.
	Snapshots SnapshotConfig
	// Dialer connects to the brokers (TLS, SASL); nil is kafka.DefaultDialer.
	Dialer *kafka.Dialer
	// Logger receives assignment, restore and error logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the slide_ingest_* collectors; nil registers nothing.
	Registerer prometheus.Registerer
	// MemberData is sent to the group as the user data of this member's join (in every
	// group-balancer protocol it offers); other members read it by describing the group.
	// The cluster package puts the instance's advertised HTTP address there. Empty (the
	// default) sends none, as before.
	MemberData []byte
}

func (c Config) withDefaults(store *window.Store) Config {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Restore == 0 && store != nil {
		c.Restore = RestoreSpan(store)
	}
	if c.MaxKeyLen == 0 {
		c.MaxKeyLen = DefaultMaxKeyLen
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.CommitInterval, DefaultCommitInterval)
	def(&c.SessionTimeout, DefaultSessionTimeout)
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.RebalanceTimeout, DefaultRebalanceTimeout)
	def(&c.JoinGroupBackoff, DefaultJoinGroupBackoff)
	def(&c.MaxWait, DefaultMaxWait)
	def(&c.RejectLogInterval, DefaultRejectLogInterval)
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxInflatedBytes == 0 {
		c.MaxInflatedBytes = DefaultMaxInflatedBytes
	}
	c.Snapshots = c.Snapshots.withDefaults(c.Topic)
	return c
}

// Validate reports a config New would refuse. Zero fields are valid (defaults) except Brokers.
func (c Config) Validate() error {
	d := c.withDefaults(nil)
	switch {
	case len(d.Brokers) == 0:
		return errors.New("no brokers")
	case slices.Contains(d.Brokers, ""):
		return errors.New("empty broker address")
	case d.DeadLetterTopic == d.Topic:
		return fmt.Errorf("dead-letter topic %q is the events topic", d.DeadLetterTopic)
	case d.Restore < 0:
		return fmt.Errorf("restore %v: must not be negative", d.Restore)
	case d.MaxKeyLen < 0:
		return fmt.Errorf("max key length %d: must not be negative", d.MaxKeyLen)
	case d.MaxBytes < 0:
		return fmt.Errorf("max bytes %d: must not be negative", d.MaxBytes)
	case d.MaxInflatedBytes < 0:
		return fmt.Errorf("max inflated bytes %d: must not be negative", d.MaxInflatedBytes)
	}
	for name, v := range map[string]time.Duration{
		"commit interval": d.CommitInterval, "session timeout": d.SessionTimeout,
		"heartbeat interval": d.HeartbeatInterval, "rebalance timeout": d.RebalanceTimeout,
		"join group backoff": d.JoinGroupBackoff, "max wait": d.MaxWait, "reject log interval": d.RejectLogInterval,
	} {
		if v < 0 {
			return fmt.Errorf("%s %v: must not be negative", name, v)
		}
	}
	if err := c.Snapshots.Validate(d.Topic); err != nil {
		return err
	}
	if d.HeartbeatInterval >= d.SessionTimeout {
		return fmt.Errorf("heartbeat interval %v: must be below the session timeout %v", d.HeartbeatInterval, d.SessionTimeout)
	}
	return nil
}

// RestoreSpan is how far back a replay must reach to rebuild every window of the store's
// default ring and of the named metrics: the longest retention plus that ring's skew (an
// event may be up to the skew ahead of its record's timestamp).
func RestoreSpan(store *window.Store, metrics ...string) time.Duration {
	var span time.Duration
	for _, m := range append(metrics, "") {
		rc := store.RingConfig(m)
		span = max(span, rc.Retention()+rc.Skew)
	}
	return span
}

// Option decorates a Consumer.
type Option func(*Consumer)

// WithClock sets the clock events are observed at (window.Store.ObserveAt's now) and
// restores seek from; the default is time.Now. Tests pass a fixed instant.
func WithClock(now func() time.Time) Option { return func(c *Consumer) { c.now = now } }

// WithGenerationHook calls fn at the start of each generation, before any partition is
// revoked, with the generation id and the partitions assigned to this member (sorted).
// Every member of the group joins every generation, so each instance hears of every
// rebalance: cluster membership stops answering from this instance alone at once and
// re-reads the group. fn must not block.
func WithGenerationHook(fn func(generation int32, assigned []int32)) Option {
	return func(c *Consumer) { c.onGeneration = fn }
}

// Consumer feeds a window.Store from a Kafka topic as a member of a consumer group.
//
// Each assigned partition is read by its own goroutine. When a partition is assigned (the
// first join, a restart, a rebalance) its series are dropped and it is replayed from the
// first record whose timestamp is at or after now − Config.Restore, so its windows are a
// function of the log alone: a crash, restart or rebalance loses no event and counts none
// twice. Until every assigned partition has caught up with the end of the log as it was at
// assignment, Ready is false. A partition kept across a rebalance is not replayed; a
// revoked one has its series dropped.
//
// Events are observed at the wall clock (WithClock). A line is refused as future or late
// when its ts is beyond the ring's skew or retention measured from its record's timestamp,
// checks that give the same answer on every replay, unless that timestamp disagrees with
// the clock by more than the skew (a skewed producer: see window.Source); the store adds its
// own (series cap, future against now). An event in its window at its record's time but
// not when read is refused as expired. A record batch that inflates beyond
// MaxInflatedBytes is refused record by record as too_large, never inflated whole. Refusals are counted in slide_ingest_rejected_total{reason}, logged at a
// bounded rate and written to the dead-letter topic — except while replaying records below
// the offset the group had committed at assignment, which were counted and dead-lettered
// when first processed (slide_ingest_restore_skipped_total counts them instead). The
// package documentation explains these choices.
//
// Offsets are committed every CommitInterval, never per record, and never before the
// dead letters of the records below them are written. Run stops gracefully when its
// context ends: fetching stops, the batch in hand is finished, offsets are committed and
// the consumer leaves the group.
//
// Ready and Progress are safe for concurrent use with Run. The per-event path (decode,
// observe, count) allocates nothing for existing series; kafka-go allocates each record.
type Consumer struct {
	cfg    Config
	store  *window.Store
	now    func() time.Time
	log    *slog.Logger
	m      *metrics
	sm     *snapMetrics
	snap   *snapshots    // nil with snapshots off
	dlqW   *kafka.Writer // dead-letter writer, nil without a DeadLetterTopic
	dlq    *deadLetters  // dead letters through dlqW; set by Run before any worker starts
	client *kafka.Client
	rejLim *rate.Limiter
	errLim *rate.Limiter
	hidden atomic.Uint64 // refusals not logged since the last logged one
	used   atomic.Bool

	onGeneration func(int32, []int32) // WithGenerationHook; nil: none

	mu     sync.Mutex
	parts  map[int32]*partition // assigned partitions; guarded by mu
	gen    int32                // current generation; guarded by mu
	joined bool                 // a generation has been set up; guarded by mu
}

// New returns a consumer of cfg.Topic feeding store. It checks cfg and registers the
// metrics; it does not connect (Run does).
func New(cfg Config, store *window.Store, opts ...Option) (*Consumer, error) {
	if store == nil {
		return nil, errors.New("ingest: nil store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ingest config: %w", err)
	}
	cfg = cfg.withDefaults(store)
	setInflateBudget(cfg.MaxInflatedBytes)
	c := &Consumer{
		cfg:    cfg,
		store:  store,
		now:    time.Now,
		log:    cfg.Logger,
		m:      newMetrics(store),
		sm:     newSnapMetrics(),
		rejLim: rate.NewLimiter(rate.Every(cfg.RejectLogInterval), 10),
		errLim: rate.NewLimiter(rate.Every(time.Second), 5),
		parts:  make(map[int32]*partition),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for _, o := range opts {
		o(c)
	}
	var transport *kafka.Transport
	if d := cfg.Dialer; d != nil {
		transport = &kafka.Transport{Dial: d.DialFunc, TLS: d.TLS, SASL: d.SASLMechanism, ClientID: d.ClientID}
	}
	c.client = &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second}
	if transport != nil {
		c.client.Transport = transport
	}
	if cfg.Registerer != nil {
		if err := c.m.register(cfg.Registerer); err != nil {
			return nil, err
		}
		for _, col := range c.sm.collectors(c) {
			if err := cfg.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("registering snapshot metrics: %w", err)
			}
		}
	}
	if cfg.DeadLetterTopic != "" {
		w := &kafka.Writer{
			Addr:                   kafka.TCP(cfg.Brokers...),
			Topic:                  cfg.DeadLetterTopic,
			Balancer:               &kafka.Murmur2Balancer{},
			RequiredAcks:           kafka.RequireAll,
			BatchTimeout:           10 * time.Millisecond,
			AllowAutoTopicCreation: true,
			ErrorLogger:            c.kafkaLogger("dead-letter writer"),
		}
		if transport != nil {
			w.Transport = transport
		}
		c.dlqW = w // Run starts the dead-letter goroutine, and stops it: New leaves none behind
	}
	if cfg.Snapshots.Interval > 0 {
		c.snap = newSnapshots(c, cfg.Snapshots, transport) // Run starts and stops its goroutine
	}
	return c, nil
}

// kafkaLogger adapts kafka-go's error logs to slog, at most a few lines a second.
func (c *Consumer) kafkaLogger(component string) kafka.Logger {
	return kafka.LoggerFunc(func(msg string, args ...any) {
		if c.errLim.Allow() {
			c.log.Warn("ingest: "+component+": "+fmt.Sprintf(msg, args...), "group", c.cfg.Group)
		}
	})
}

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
			if c.errLim.Allow() {
				c.log.Warn("ingest: joining consumer group", "group", c.cfg.Group, "err", err)
			}
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

// partition is the state of one assigned partition. It lives from assignment to
// revocation, across generations that keep it.
type partition struct {
	id        int32
	label     string
	from      int64        // first offset replayed
	target    int64        // end of the log at assignment: restored once next reaches it
	committed atomic.Int64 // group's committed offset at assignment (lowered by an offset reset): records below it were processed before
	assigned  time.Time    // wall clock at assignment, for the restore duration
	restoreMs atomic.Int64 // restore duration, ms; set once restored
	restored  atomic.Bool
	next      atomic.Int64 // next offset to process
	hwm       atomic.Int64 // high watermark at the last fetch
	lastTS    int64        // timestamp of the last record processed, unix ms (0: none); the worker's
	lastSent  int64        // last committed offset; only the committer touches it

	// Owned by the partition's worker goroutine.
	dec    *Decoder
	events prometheus.Counter
	bytes  prometheus.Counter
	snap   partSnap
	lag    prometheus.Gauge
	lagSec prometheus.Gauge
}

// runGeneration sets up the partitions of one group generation and runs them until the
// generation ends (a rebalance, or Run's shutdown).
func (c *Consumer) runGeneration(gctx context.Context, gen *kafka.Generation) {
	c.m.generations.Inc()
	assigned := map[int32]int64{} // partition → committed offset
	for _, a := range gen.Assignments[c.cfg.Topic] {
		assigned[int32(a.ID)] = a.Offset
	}
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
			return
		}
	}
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
		if c.errLim.Allow() {
			c.log.Warn("ingest: listing offsets to restore", "partitions", ids, "err", err)
		}
		select {
		case <-gctx.Done():
			return nil, gctx.Err()
		case <-time.After(c.cfg.JoinGroupBackoff):
		}
	}
}

// listOffsets asks for one offset of each partition in ids, as req makes it.
func (c *Consumer) listOffsets(ctx context.Context, ids []int32, req func(int32) kafka.OffsetRequest) (map[int32]kafka.PartitionOffsets, error) {
	r := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
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
		dec, err := NewDecoder(DecoderConfig{MaxKeyLen: c.cfg.MaxKeyLen})
		if err != nil {
			return nil, err
		}
		p := &partition{
			id: id, label: partitionLabel(id), from: from, target: po.LastOffset,
			assigned: time.Now(), lastSent: -1, dec: dec,
		}
		p.committed.Store(committed[id])
		p.events = c.m.events.WithLabelValues(p.label)
		p.bytes = c.m.bytes.WithLabelValues(p.label)
		p.lag = c.m.lag.WithLabelValues(p.label)
		p.lagSec = c.m.lagSeconds.WithLabelValues(p.label)
		p.next.Store(from)
		p.hwm.Store(po.LastOffset)
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

// setPartitionGaugesLocked requires c.mu.
func (c *Consumer) setPartitionGaugesLocked() {
	restoring := 0
	for _, p := range c.parts {
		if !p.restored.Load() {
			restoring++
		}
	}
	c.m.partitions.WithLabelValues("restoring").Set(float64(restoring))
	c.m.partitions.WithLabelValues("live").Set(float64(len(c.parts) - restoring))
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
		if c.errLim.Allow() {
			c.log.Warn("ingest: committing offsets", "generation", gen.ID, "err", err)
		}
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
// assignment. An instance assigned no partition is ready once it has joined.
func (c *Consumer) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.joined {
		return false
	}
	for _, p := range c.parts {
		if !p.restored.Load() {
			return false
		}
	}
	return true
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
// the next to process, HighWaterMark the end of the log at the last fetch.
type PartitionProgress struct {
	Partition      int32   `json:"partition"`
	Restored       bool    `json:"restored"`
	Done           float64 `json:"done"` // share of the replay done, in [0, 1]; 1 once restored
	From           int64   `json:"from"`
	Target         int64   `json:"target"`
	Next           int64   `json:"next"`
	HighWaterMark  int64   `json:"high_water_mark"`
	RestoreSeconds float64 `json:"restore_seconds"` // time the replay took; 0 until restored
	// Snapshot says whether the restore starts from a snapshot or the log, and how far it is;
	// nil with snapshots off.
	Snapshot *SnapshotProgress `json:"snapshot,omitempty"`
}

// Progress returns the consumer's current assignment and restore state.
func (c *Consumer) Progress() Progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := Progress{Ready: c.joined, Generation: c.gen}
	for _, p := range c.parts {
		pp := PartitionProgress{
			Partition: p.id, Restored: p.restored.Load(), Done: 1, From: p.from, Target: p.target,
			Next: p.next.Load(), HighWaterMark: p.hwm.Load(),
			RestoreSeconds: float64(p.restoreMs.Load()) / 1000,
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
