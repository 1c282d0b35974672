package ingest

import (
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

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkarange"
	"github.com/slide-metrics/slide/internal/logrepeat"
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
	// DeadLetterTopic receives every refused line with its reason in the HeaderReason header
	// and what is wrong in the HeaderDetail header; empty (the default) means no dead
	// letters. It must differ from Topic.
	DeadLetterTopic string
	// Restore is how far back a newly assigned partition is replayed, measured on record
	// timestamps from now. It must cover the longest retention plus skew of every metric in
	// the store: use RestoreSpan. Default RestoreSpan(store), which covers the store's default
	// ring only.
	Restore time.Duration
	// MaxKeyLen is the longest key or metric accepted, in bytes; default
	// event.DefaultMaxKeyLen (256).
	MaxKeyLen int
	// Format makes the reader of records' values, one per partition (event.WithFormat): nil is
	// slide's JSON events (an event.Decoder with MaxKeyLen), OTLP spans another's.
	Format func() (event.Format, error)
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
	// A shutdown or revocation interrupts the wait (records of the pre-0.11 message format,
	// read through kafka-go's reader, still wait it out). kafka-go
	// asks the broker to answer a quarter of it early, so very small values time out on a
	// loaded broker and reconnect.
	MaxWait time.Duration
	// MaxBytes is the most a fetch returns per partition; default 10 MiB.
	MaxBytes int
	// ReadUncommitted makes the consumer read with isolation level read_uncommitted: the
	// records of aborted transactions are counted, and reading goes on to the high watermark
	// past open transactions. The default (false) is read_committed, as librdkafka, Kafka
	// Streams under exactly-once and ClickHouse read: only committed and non-transactional
	// records are counted, and reading stops at the last stable offset (LSO) until the oldest
	// open transaction ends, so restores, readiness and slide_ingest_lag measure to the LSO.
	ReadUncommitted bool
	// MaxInflatedBytes is the most one compressed record batch may inflate to; default
	// DefaultMaxInflatedBytes (32 MiB). A batch beyond it (a compression bomb) is never
	// inflated whole: each of its records is refused as event.ReasonTooLarge, dead-lettered as
	// a pointer to its offset, and reading goes on. The budget is process-wide (kafka-go
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
		c.MaxKeyLen = event.DefaultMaxKeyLen
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
	if c.Snapshots.Final == 0 {
		c.Snapshots.Final = min(DefaultSnapshotFinal, c.RebalanceTimeout/2)
	}
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
// Each assigned partition is read by its own goroutine, which hands the records it reads
// to a second that applies them in order, so reading and applying overlap; offsets,
// progress and snapshots move only as records are applied. When a partition is assigned (the
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
	intake *event.Intake // decode, observe, reason: every record's events
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
	errRep *logrepeat.Log // the same warning at most once a minute (warn)
	hidden atomic.Uint64  // refusals not logged since the last logged one
	used   atomic.Bool

	onGeneration func(int32, []int32) // WithGenerationHook; nil: none
	fetchDialer  *kafka.Dialer        // Config.Dialer's, reading through a buffer (fetchDialer)

	mu       sync.Mutex
	parts    map[int32]*partition // assigned partitions; guarded by mu
	planning []int32              // assigned in this generation, not in parts yet (being planned); guarded by mu
	gen      int32                // current generation; guarded by mu
	joined   bool                 // a generation has been set up; guarded by mu

	// whole is Ready, kept by setPartitionGaugesLocked so that Ready is one atomic load
	// (cluster.Cluster.Local asks it on every read); wasReady is WasReady.
	whole, wasReady atomic.Bool
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
	var intakeOpts []event.IntakeOption
	if cfg.Format != nil {
		intakeOpts = append(intakeOpts, event.WithFormat(cfg.Format))
	}
	intake, err := event.NewIntake(store, event.Config{MaxKeyLen: cfg.MaxKeyLen}, intakeOpts...)
	if err != nil {
		return nil, fmt.Errorf("ingest config: %w", err)
	}
	setInflateBudget(cfg.MaxInflatedBytes)
	c := &Consumer{
		cfg:    cfg,
		store:  store,
		intake: intake,
		now:    time.Now,
		log:    cfg.Logger,
		m:      newMetrics(store),
		sm:     newSnapMetrics(),
		rejLim: rate.NewLimiter(rate.Every(cfg.RejectLogInterval), 10),
		errLim: rate.NewLimiter(rate.Every(time.Second), 5),
		errRep: logrepeat.New(time.Minute),
		parts:  make(map[int32]*partition),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for _, o := range opts {
		o(c)
	}
	c.fetchDialer = fetchDialer(cfg.Dialer)
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
			BatchBytes:             kafkarange.MaxBatchBytes, // kafka-go's 1 MiB, with the batch's framing, can pass the broker's limit
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

// kafkaLogger adapts kafka-go's error logs to slog, as warn does its own.
func (c *Consumer) kafkaLogger(component string) kafka.Logger {
	return kafka.LoggerFunc(func(msg string, args ...any) {
		c.warn("ingest: "+component+": "+fmt.Sprintf(msg, args...), "group", c.cfg.Group)
	})
}

// warn logs a warning of the consumer's: the same line (message and attributes) at most once
// a minute, the next one saying how many were held back meanwhile (a broker that is down
// fails every retry alike: logrepeat), and at most a few lines a second in all.
func (c *Consumer) warn(msg string, args ...any) {
	if ok, held := c.errRep.AllowIf(msg+fmt.Sprint(args...), c.errLim.Allow); ok {
		c.log.Warn(msg, append(args, c.errRep.Attrs(held)...)...)
	}
}
