package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// Defaults of SnapshotConfig.
const (
	DefaultSnapshotInterval    = 30 * time.Second // what `slide serve` uses; the library's zero value is off
	DefaultSnapshotTopicSuffix = ".slide-snapshots"
	DefaultSnapshotChunkBytes  = 512 << 10 // half of Kafka's default max.message.bytes (1 MiB)
	DefaultSnapshotFinal       = 5 * time.Second
)

// SnapshotConfig configures window snapshots (see the package documentation, Snapshots).
// The zero value turns them off.
type SnapshotConfig struct {
	// Interval is how often each owned, restored partition's series are written to Topic;
	// 0 (the default) turns snapshots off, both writing and restoring from them.
	Interval time.Duration
	// Topic is the compacted topic of snapshots; default Config.Topic + ".slide-snapshots".
	// It is created (cleanup.policy=compact, as many partitions as the events topic) when
	// missing; when it cannot be, one log line says what to create and snapshots stay off.
	Topic string
	// ChunkBytes is the largest snapshot payload one record carries; default 512 KiB. Keep it
	// well below the topic's max.message.bytes.
	ChunkBytes int
	// Final bounds the last snapshot of every owned partition taken when a generation ends
	// (a rebalance that may revoke it, or Run's shutdown), so the next owner replays only
	// what arrives after it; a snapshot not written by then is given up and the next owner
	// starts from the one before. Default DefaultSnapshotFinal (5 s), or half of
	// Config.RebalanceTimeout when that is shorter: the group waits for this member to
	// rejoin until then.
	Final time.Duration
	// MaxBytes is the most decoded bytes a snapshot may declare: a manifest declaring more
	// is refused (too_large) before any chunk is read, and so is a snapshot whose chunks
	// read so far hold more than twice it. 0 (the default) is no bound but the decoding's
	// own, which streams (see the package documentation). slide serve sets it to twice the
	// series memory (--max-memory, or the series cap × window.DenseSeriesBytes).
	MaxBytes int64
	// Events names how this instance makes events of records (the format and its settings,
	// e.g. "otlp_proto span-key=service.name span-dimensions=http.route"). It is written with
	// every snapshot, and a snapshot written under another is not loaded (config_changed):
	// its series' metrics, keys and labels were made by other rules than a replay of the log
	// makes now. A snapshot without one (written before) is loaded.
	Events string
}

func (c SnapshotConfig) withDefaults(topic string) SnapshotConfig {
	if c.Topic == "" {
		c.Topic = topic + DefaultSnapshotTopicSuffix
	}
	if c.ChunkBytes == 0 {
		c.ChunkBytes = DefaultSnapshotChunkBytes
	}
	return c
}

// Validate reports a config New would refuse.
func (c SnapshotConfig) Validate(topic string) error {
	d := c.withDefaults(topic)
	switch {
	case d.Interval < 0:
		return fmt.Errorf("snapshot interval %v: must not be negative", d.Interval)
	case d.Final < 0:
		return fmt.Errorf("snapshot final timeout %v: must not be negative", d.Final)
	case d.ChunkBytes < 64 || d.ChunkBytes > 64<<20:
		return fmt.Errorf("snapshot chunk bytes %d: must be in [64, 64 MiB]", d.ChunkBytes)
	case d.Topic == topic:
		return fmt.Errorf("snapshot topic %q is the events topic", d.Topic)
	case d.MaxBytes < 0:
		return fmt.Errorf("snapshot max bytes %d: must not be negative", d.MaxBytes)
	}
	return nil
}

// Restore sources and the reasons a snapshot was not used, as slide_snapshot_restore_total
// labels them.
const (
	sourceSnapshot = "snapshot"
	sourceLog      = "log"

	reasonLoaded         = "loaded"
	reasonMissing        = "missing"         // no snapshot of this partition and group
	reasonIncomplete     = "incomplete"      // a chunk is missing or belongs to another snapshot
	reasonCorrupt        = "corrupt"         // a checksum or the encoding does not hold
	reasonUnknownVersion = "unknown_version" // written by a build with another format
	reasonTooOld         = "too_old"         // taken before now − restore span, or its offset was deleted
	reasonConfigChanged  = "config_changed"  // rings of another shape than the store's
	reasonAheadOfLog     = "ahead_of_log"    // its offset is past the log's end (truncated log)
	reasonReadError      = "read_error"      // the snapshot topic could not be read
	reasonOtherTopic     = "other_topic"     // written by an instance of the same group reading another events topic
	// Admitted like events (issue #25): the reasons are the event refusals' where the rule is
	// the same.
	reasonTooLarge   = "too_large"    // declares or holds more than SnapshotConfig.MaxBytes, or inflates past the budget
	reasonFuture     = "future"       // a ring or slot ahead of now by more than the skew
	reasonDuplicate  = "duplicate"    // a series listed twice
	reasonBadField   = "bad_field"    // a key or metric failing window.ValidName
	reasonKeyTooLong = "key_too_long" // a key or metric over Config.MaxKeyLen
)

// reasonText says what a refusal found when no error says it (the log line of a replay).
var reasonText = map[string]string{
	reasonMissing:        "no snapshot of this partition and group in the snapshot topic",
	reasonIncomplete:     "the latest snapshot was not written whole: a chunk is missing, deleted or of a later snapshot cut short",
	reasonCorrupt:        "a checksum or the encoding of the latest snapshot does not hold",
	reasonUnknownVersion: "the latest snapshot was written by a build with another format",
	reasonTooOld:         "the latest snapshot was taken before the restore span, or its offset is deleted",
	reasonAheadOfLog:     "the latest snapshot's offset is past the log's end (a truncated log)",
	reasonTooLarge:       "the latest snapshot is larger than the snapshot budget",
}

var snapshotReasons = []string{reasonMissing, reasonIncomplete, reasonCorrupt, reasonUnknownVersion,
	reasonTooOld, reasonConfigChanged, reasonAheadOfLog, reasonReadError, reasonOtherTopic,
	reasonTooLarge, reasonFuture, reasonDuplicate, reasonBadField, reasonKeyTooLong}

// snapMetrics are the slide_snapshot_* collectors.
type snapMetrics struct {
	restores        *prometheus.CounterVec   // {source, reason}
	restoreDuration *prometheus.HistogramVec // {source}
	written         prometheus.Counter
	writes          prometheus.Counter
	writeErrors     prometheus.Counter
	skipped         prometheus.Counter
}

func newSnapMetrics() *snapMetrics {
	m := &snapMetrics{
		restores: newCounterVec("slide_snapshot_restore_total", []string{"source", "reason"},
			"Partition restores by source (snapshot, log) and reason: loaded, or why no snapshot was used (missing, incomplete, corrupt, unknown_version, too_old, config_changed, ahead_of_log, read_error, other_topic; and, admitted like events, too_large, future, duplicate, bad_field, key_too_long)."),
		restoreDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "slide_snapshot_restore_duration_seconds",
			Help:    "Time from a partition's assignment until its windows are rebuilt, by source: snapshot (load, then the log after it) or log (full replay).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 9),
		}, []string{"source"}),
		written: newCounter("slide_snapshot_written_bytes_total",
			"Snapshot payload bytes written to the snapshot topic (zstd-compressed)."),
		writes: newCounter("slide_snapshot_writes_total",
			"Complete snapshots written (chunks and manifest)."),
		writeErrors: newCounter("slide_snapshot_write_errors_total",
			"Snapshots that could not be written; the next interval tries again."),
		skipped: newCounter("slide_snapshot_skipped_total",
			"Snapshots not taken because the previous one of the partition was still being written, or final ones (at a stop or handover) cut by their deadline."),
	}
	m.restores.WithLabelValues(sourceSnapshot, reasonLoaded)
	for _, r := range snapshotReasons {
		m.restores.WithLabelValues(sourceLog, r)
	}
	return m
}

// ageCollector exports slide_snapshot_age_seconds{partition} for the partitions this
// instance owns, when snapshots are on: how long the partition's state has gone without a
// snapshot that covers it. operating.md says to alert when it passes a few intervals, so an
// idle partition whose last snapshot still covers every record read stays near 0, and one
// of which no snapshot was ever written counts from its assignment (every write failing
// would otherwise show no age at all, and the alert could not fire).
type ageCollector struct {
	c    *Consumer
	desc *prometheus.Desc
}

func (a ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

func (a ageCollector) Collect(ch chan<- prometheus.Metric) {
	if a.c.snap == nil {
		return // snapshots off: nothing is late
	}
	now := time.Now().UnixMilli()
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	for _, p := range a.c.parts {
		since := p.snap.current.Load()
		if since == 0 {
			since = p.assigned.UnixMilli()
		}
		ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, float64(max(now-since, 0))/1000, p.label)
	}
}

func (m *snapMetrics) collectors(c *Consumer) []prometheus.Collector {
	age := ageCollector{c: c, desc: prometheus.NewDesc("slide_snapshot_age_seconds",
		"Age of the last snapshot this instance wrote of each partition it owns.", []string{"partition"}, nil)}
	return []prometheus.Collector{m.restores, m.restoreDuration, m.written, m.writes, m.writeErrors, m.skipped, age}
}

// partSnap is a partition's snapshot state.
type partSnap struct {
	mu       sync.Mutex
	source   string       // sourceSnapshot or sourceLog once decided; guarded by mu
	phase    string       // "reading_snapshot", "replaying", "live"; guarded by mu
	offset   int64        // offset of the snapshot loaded; guarded by mu
	bytes    int64        // snapshot bytes read so far; guarded by mu
	last     time.Time    // when the last snapshot was taken; worker only
	busy     atomic.Bool  // a snapshot of the partition is being written
	written  atomic.Int64 // wall clock of the last snapshot written, unix ms
	current  atomic.Int64 // wall clock, unix ms, when a written snapshot was last known to cover every record read
	wroteOff atomic.Int64 // the source offset it covers
	set      atomic.Int32 // chunk set of the next snapshot: 'a' or 'b'
	restored bool         // a snapshot load was tried; worker only
}

func (ps *partSnap) state(source, phase string) {
	ps.mu.Lock()
	if source != "" {
		ps.source = source
	}
	ps.phase = phase
	ps.mu.Unlock()
}

// snapJob is one snapshot on its way to the topic: its payload, compressed, already cut
// into the values of its chunk records.
type snapJob struct {
	p      *partition
	offset int64
	taken  int64
	id     uint64   // the manifest's, in every chunk
	chunks [][]byte // chunk record values
	size   int64    // payload bytes (compressed)
	raw    int64    // payload bytes decoded
	crc    uint32   // of the payload
	series int
}

// snapshots writes and reads the snapshot topic for a Consumer.
type snapshots struct {
	c       *Consumer
	cfg     SnapshotConfig
	log     *slog.Logger
	m       *snapMetrics
	w       *kafka.Writer
	jobs    chan snapJob
	zencs   chan *zstd.Encoder // idle compressors, at most GOMAXPROCS kept (about 2.5 MiB each)
	parts   atomic.Int32       // partitions of the snapshot topic; 0 until ready
	ready   atomic.Bool        // the topic exists: write and read it
	recheck atomic.Bool        // a write failed: see that the topic exists before the next one
	done    chan struct{}
	once    sync.Once
	closed  chan struct{}
	// settled closes once the start's topic check is decided (ready, or snapshots off) or
	// run ends: a restore waits for it (at most settleWait) before it looks for a snapshot.
	settled    chan struct{}
	settleOnce sync.Once
}

// settleWait is how long a partition's restore waits for the start's check of the snapshot
// topic (a metadata read, and a creation when it is missing) before it replays the log
// without a snapshot.
const settleWait = 10 * time.Second

func (s *snapshots) settle() { s.settleOnce.Do(func() { close(s.settled) }) }

func newSnapshots(c *Consumer, cfg SnapshotConfig, transport *kafka.Transport) *snapshots {
	s := &snapshots{c: c, cfg: cfg, log: c.log, m: c.sm, jobs: make(chan snapJob, 64), zencs: make(chan *zstd.Encoder, runtime.GOMAXPROCS(0)),
		done: make(chan struct{}), closed: make(chan struct{}), settled: make(chan struct{})}
	s.w = &kafka.Writer{
		Addr:  kafka.TCP(c.cfg.Brokers...),
		Topic: cfg.Topic,
		// The partition was chosen by the sender: partition p's snapshot goes to p mod n.
		Balancer: kafka.BalancerFunc(func(m kafka.Message, parts ...int) int {
			return parts[m.Partition%len(parts)]
		}),
		RequiredAcks: kafka.RequireAll,
		BatchBytes:   int64(cfg.ChunkBytes) + 1<<10, // a chunk a request: large snapshots stream, and never pass max.message.bytes together
		BatchSize:    1000,
		BatchTimeout: time.Millisecond,
		ErrorLogger:  c.kafkaLogger("snapshot writer"),
	}
	if transport != nil {
		s.w.Transport = transport
	}
	return s
}

// run makes sure the topic exists, then writes snapshots until close.
func (s *snapshots) run(ctx context.Context) {
	defer close(s.closed)
	defer s.settle()
	for {
		ok, retry := s.ensureTopic(ctx)
		if ok {
			s.settle()
			break
		}
		if !retry {
			return
		}
		select {
		case <-s.done:
			return
		case <-time.After(5 * time.Second):
		}
	}
	for {
		select {
		case <-s.done:
			return
		case j := <-s.jobs:
			if s.recheck.Swap(false) {
				// A write failed: the topic may be gone (a broker restarted empty, a deletion),
				// and kafka-go's writer never creates it. Create it as at start; a refusal
				// turns snapshots off, as at start, with the same line saying what to create.
				if ok, retry := s.ensureTopic(ctx); !ok && !retry {
					s.ready.Store(false)
				}
			}
			s.write(ctx, j)
		}
	}
}

func (s *snapshots) close() {
	s.once.Do(func() { close(s.done) })
	<-s.closed
	s.w.Close()
}

// ensureTopic creates the snapshot topic when it is missing and reports whether it exists.
// When creation is refused it says once what to create and turns snapshots off (retry false).
func (s *snapshots) ensureTopic(ctx context.Context) (ok, retry bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	meta, err := s.c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.c.cfg.Topic, s.cfg.Topic}})
	if err != nil {
		s.c.warn("ingest: snapshots: reading topic metadata", "err", err)
		return false, true
	}
	events, snaps := 0, -1
	for _, t := range meta.Topics {
		switch {
		case t.Name == s.c.cfg.Topic && t.Error == nil:
			events = len(t.Partitions)
		case t.Name == s.cfg.Topic && t.Error == nil:
			snaps = len(t.Partitions)
		}
	}
	if snaps <= 0 && events == 0 {
		// The events topic is not there yet (serve started before anything produced to
		// it). A snapshot topic made now would have one partition, every source
		// partition's snapshots in it, and each restore reading the others' too (80 MB
		// for a 20 MB snapshot); wait for the events topic to know how many.
		s.c.warn("ingest: snapshots: waiting for the events topic before creating the snapshot topic", "topic", s.c.cfg.Topic, "snapshot_topic", s.cfg.Topic)
		return false, true
	}
	if snaps <= 0 {
		n := events
		resp, err := s.c.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
			Topic: s.cfg.Topic, NumPartitions: n, ReplicationFactor: -1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
		}}})
		if err == nil {
			err = resp.Errors[s.cfg.Topic]
		}
		if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			s.log.Error("ingest: snapshots off: cannot create the snapshot topic; create it with cleanup.policy=compact",
				"topic", s.cfg.Topic, "partitions", n, "err", err)
			return false, false // restores replay the log
		}
		if err == nil {
			s.log.Info("ingest: snapshots: created the snapshot topic", "topic", s.cfg.Topic, "partitions", n, "cleanup.policy", "compact")
		}
		snaps = n
	}
	s.parts.Store(int32(snaps))
	s.ready.Store(true)
	return true, false
}

// snapPartition is the snapshot topic partition that holds source partition id.
func (s *snapshots) snapPartition(id int32) int { return int(id) % int(max(s.parts.Load(), 1)) }

func keyOf(group string, id int32) string { return group + "/" + strconv.Itoa(int(id)) }

// topicHeader is the manifest record's header naming the events topic the snapshot is of.
// Keys name the group and partition only, so two deployments of one group name (the
// default, slide) reading different topics into one --snapshot-topic would otherwise load
// each other's windows and skip their own records below the other's offset. A header, not
// a manifest field, so that builds before it still read the manifests written after it
// during a rolling upgrade; a manifest without one (written before) is taken as before.
const topicHeader = "slide-topic"

// eventsHeader is the manifest record's header holding SnapshotConfig.Events.
const eventsHeader = "slide-events"

// maybeTake encodes p's series when a snapshot is due and hands them to the writer. The
// partition's worker calls it between batches, so the encoding is exactly the state after
// every record below p.next.
func (s *snapshots) maybeTake(p *partition) {
	// Restoring partitions are snapshotted too: the state below p.next is consistent
	// whether or not the replay has reached the end, and a crash late in a long replay then
	// resumes from there.
	if !s.ready.Load() || time.Since(p.snap.last) < s.cfg.Interval {
		return
	}
	if p.snap.busy.Load() {
		s.m.skipped.Inc()
		return
	}
	// Idle is judged by the snapshot written, not the one last taken: a take whose write
	// failed covers nothing, and is retried.
	if off, w := p.next.Load(), p.snap.written.Load(); off == p.snap.wroteOff.Load() && w > 0 &&
		time.Since(time.UnixMilli(w)) < s.c.cfg.Restore/2 {
		p.snap.current.Store(time.Now().UnixMilli())
		return // an idle partition: the last snapshot still says it all, and is far from too old
	}
	p.snap.last = time.Now()
	p.snap.busy.Store(true)
	j, err := s.encode(p, p.next.Load(), nil)
	if err != nil {
		p.snap.busy.Store(false)
		s.m.writeErrors.Inc()
		s.c.warn("ingest: encoding snapshot", "partition", p.id, "err", err)
		return
	}
	select {
	case s.jobs <- j:
	default:
		p.snap.busy.Store(false)
		s.m.skipped.Inc()
	}
}

// snapEncoderWindow is the window of the compressor (zstd's fastest level): series are
// encoded one after another, so a short window compresses them about as well (measured by
// hand: 0.1-0.2% larger than a 4 MiB window's), and an encoder takes about 2.5 MiB instead of 9.
const snapEncoderWindow = 1 << 20

// encode encodes p's series as of now into a snapshot of offset off, compressed as it is
// encoded (window.Store.WriteSnapshot into a streaming zstd encoder into a chunker): what it
// holds is the compressed payload, cut into its chunk records, and about
// window.SnapshotFlushBytes of encoding; never the whole encoding, which is 4-20 times the
// payload (a snapshot of 100,000 latency series held 257 MB of encoding before). The
// partition's worker (or final, once it stopped) calls it, so the snapshot is exactly the
// state below off. stop, when set, is asked between writes: its error abandons the encoding.
func (s *snapshots) encode(p *partition, off int64, stop func() error) (snapJob, error) {
	now := s.c.now().UnixMilli()
	ch := &chunker{id: rand.Uint64(), size: s.cfg.ChunkBytes, stop: stop}
	var zenc *zstd.Encoder
	select {
	case zenc = <-s.zencs:
	default:
		zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(snapEncoderWindow)) // valid options
	}
	zenc.Reset(ch)
	n, raw, err := s.c.store.WriteSnapshot(zenc, now, p.id)
	if cerr := zenc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return snapJob{}, err
	}
	zenc.Reset(nil) // let go of the chunker
	select {
	case s.zencs <- zenc:
	default:
	}
	return snapJob{p: p, offset: off, taken: now, id: ch.id, chunks: ch.values(), size: ch.total, raw: raw,
		crc: ch.crc, series: n}, nil
}

// write writes one snapshot: its chunks, then (after the dead letters of the records it
// covers are written) its manifest.
func (s *snapshots) write(ctx context.Context, j snapJob) {
	defer j.p.snap.busy.Store(false)
	s.c.mu.Lock()
	owned := s.c.parts[j.p.id] == j.p
	s.c.mu.Unlock()
	if !owned {
		return // revoked meanwhile: the new owner writes its own
	}
	set := byte(j.p.snap.set.Load())
	if set != 'b' {
		set = 'a'
	}
	m := manifest{id: j.id, set: set, offset: j.offset, taken: j.taken, codec: codecZstd,
		size: uint64(j.size), raw: uint64(j.raw), crc: j.crc}
	key := keyOf(s.c.cfg.Group, j.p.id)
	part := s.snapPartition(j.p.id)
	msgs := make([]kafka.Message, len(j.chunks))
	for i, v := range j.chunks {
		msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "%s/%c/%d", key, set, i), Value: v, Partition: part}
	}
	m.chunks = uint64(len(msgs))
	start := time.Now()
	s.log.Debug("ingest: writing snapshot", "partition", j.p.id, "offset", j.offset, "chunks", m.chunks, "set", string(set))
	err := s.w.WriteMessages(ctx, msgs...)
	if err == nil && s.c.dlq != nil {
		err = s.c.dlq.flush(ctx)
	}
	if err == nil {
		err = s.w.WriteMessages(ctx, kafka.Message{Key: []byte(key), Value: m.append(nil), Partition: part,
			Headers: []kafka.Header{{Key: topicHeader, Value: []byte(s.c.cfg.Topic)}, {Key: eventsHeader, Value: []byte(s.cfg.Events)}}})
	}
	if err != nil && ctx.Err() != nil {
		// The consumer is stopping (a periodic write's context), or a final snapshot (a stop's or
		// a handover's) was cut by its stop or its 5 s deadline: not a failure of the topic, which
		// the write-error alert pages for. A deadline's cut is skipped, as final's log says.
		// Whatever the writer's error: with its context done, kafka-go may answer with the
		// dial's or the broker's error rather than the context's.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.m.skipped.Inc()
		}
		s.log.Debug("ingest: snapshot write abandoned", "partition", j.p.id, "offset", j.offset, "err", err)
		return
	}
	if err != nil {
		s.recheck.Store(true)
		s.m.writeErrors.Inc()
		s.c.warn("ingest: writing snapshot", "partition", j.p.id, "topic", s.cfg.Topic, "err", err)
		return
	}
	j.p.snap.set.Store(int32('a' + 'b' - int32(set)))
	j.p.snap.wroteOff.Store(j.offset)
	wrote := time.Now().UnixMilli()
	j.p.snap.written.Store(wrote)
	j.p.snap.current.Store(wrote)
	s.m.writes.Inc()
	s.m.written.Add(float64(j.size))
	s.log.Debug("ingest: snapshot written", "partition", j.p.id, "offset", j.offset, "series", j.series,
		"bytes", j.size, "decoded_bytes", j.raw, "chunks", m.chunks, "set", string(set), "took", time.Since(start).Round(time.Millisecond))
}

// final writes a last snapshot of each of parts, whose workers have stopped, and waits for
// them until Final has passed: the generation is ending (a rebalance that may hand them to
// another instance, or shutdown), and the next owner then replays only what arrives after.
// A partition is skipped when its last snapshot already covers its next offset, and when its
// restore was cut short (its state below next is not whole).
func (s *snapshots) final(parts []*partition) {
	if !s.ready.Load() || len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Final)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var wrote atomic.Int32
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
next:
	for _, p := range parts {
		p.snap.mu.Lock()
		settled := p.restored.Load() || (p.snap.restored && p.snap.phase == "replaying")
		p.snap.mu.Unlock()
		off := p.next.Load()
		if !settled || (p.snap.written.Load() > 0 && p.snap.wroteOff.Load() == off) {
			continue
		}
		// A periodic snapshot of p may still be on its way (the writer holds busy): it covers
		// less, so wait for it rather than write beside it.
		for !p.snap.busy.CompareAndSwap(false, true) {
			select {
			case <-ctx.Done():
				s.m.skipped.Inc()
				continue next
			case <-time.After(5 * time.Millisecond):
			}
		}
		wg.Go(func() {
			// At most GOMAXPROCS encode at once: each holds a compressor and its payload.
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				p.snap.busy.Store(false)
				s.m.skipped.Inc()
				return
			}
			j, err := s.encode(p, off, ctx.Err)
			<-sem
			if err != nil {
				p.snap.busy.Store(false)
				s.m.skipped.Inc() // the deadline passed while encoding
				return
			}
			s.write(ctx, j)
			if p.snap.wroteOff.Load() == off && p.snap.written.Load() > 0 {
				wrote.Add(1)
			}
		})
	}
	wg.Wait()
	if wrote.Load() > 0 || ctx.Err() != nil {
		s.log.Info("ingest: final snapshots written", "partitions", wrote.Load(), "of", len(parts),
			"took", time.Since(start).Round(time.Millisecond), "timed_out", ctx.Err() != nil)
	}
}
