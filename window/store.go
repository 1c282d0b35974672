package window

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/slide-metrics/slide/sketch"
)

// StoreConfig configures a Store. The zero value is ready: default rings, 64 shards,
// 1<<20 series at most, the wall clock.
type StoreConfig struct {
	Ring      RingConfig            // ring of every metric without an override
	Metrics   map[string]RingConfig // per-metric rings, e.g. "cost": 60s × 60 for hourly quotas
	Shards    int                   // lock shards, rounded up to a power of two; default 64
	MaxSeries int                   // series beyond this are refused with ErrSeriesCap; default 1<<20
	Now       func() int64          // unix ms; nil is the wall clock. Replay passes the largest event time.

	// MaxSeriesPerMetric caps each metric's series: a new series of a metric that has this
	// many is refused with ErrSeriesCap and counted by metric (EachMetricRefused), so that one
	// noisy label cannot take the store. 0, the default, caps only the store (MaxSeries).
	MaxSeriesPerMetric int

	// MaxBytes, when positive, caps the series by what they may take when busy: each weighs
	// TieredSeriesBytes of its metric's ring (6,300 bytes for 30 slots; 26,888 for an hour of
	// minutes with a day's tiers), and a new series that would take their sum past MaxBytes
	// is refused with ErrSeriesCap, as past MaxSeries. A store of many short rings and a few
	// long ones thus holds as many series as fit, not as many as fit were each the longest.
	// slide serve's --max-memory. 0, the default: no byte cap.
	MaxBytes int64

	// Exemplars keeps, for each slot of a series' ring, the accepted event of the largest
	// value that carried a trace id (Event.TraceID): the slot's slowest span, which
	// VisitExemplars hands out (Prometheus' query_exemplars). It costs ExemplarBytes a series
	// that has one, counted in MaxBytes' weight. Off by default.
	Exemplars bool
}

// Validate reports a config NewStore would refuse.
func (c StoreConfig) Validate() error {
	if err := c.Ring.Validate(); err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	for m, rc := range c.Metrics {
		if m == "" {
			return fmt.Errorf("metrics: empty metric name")
		}
		if err := rc.Validate(); err != nil {
			return fmt.Errorf("metric %q: %w", m, err)
		}
	}
	if c.Shards < 0 || c.Shards > 1<<16 {
		return fmt.Errorf("shards %d: must be in [0, 65536]", c.Shards)
	}
	if c.MaxSeries < 0 {
		return fmt.Errorf("max series %d: must not be negative", c.MaxSeries)
	}
	if c.MaxSeriesPerMetric < 0 {
		return fmt.Errorf("max series per metric %d: must not be negative", c.MaxSeriesPerMetric)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("max bytes %d: must not be negative", c.MaxBytes)
	}
	return nil
}

// StoreStats are the Store's counters since it was made.
type StoreStats struct {
	Late, Future, Invalid uint64 // events refused, by reason
	Refused               uint64 // events refused because their new series would pass MaxSeries, MaxSeriesPerMetric or MaxBytes
	Evicted               uint64 // idle series removed
	Series                int    // live series now
}

type series struct {
	metric, key string
	partition   int32
	labelled    bool    // key holds labels besides key (HasLabels): counted in LabelledSeries
	watched     bool    // in a LevelIndex: its shard's refs holds its memberships (in the padding: free)
	exemplar    bool    // its shard's ex holds its exemplars (in the padding too)
	next        *series // another series whose key hashes the same (64-bit collisions are rare)
	ring        Ring
}

// shard is padded to 64 bytes so neighbouring shards' locks do not share a cache line (and
// finding a shard is a shift, not a multiply).
type shard struct {
	mu     sync.Mutex
	series map[uint64]*series         // by seriesHash of metric and key: one hash per event, not two
	refs   map[*series]*levelRef      // the LevelIndex memberships of its watched series; nil without
	ex     map[*series][]exemplarSlot // the exemplars of its series that have one (StoreConfig.Exemplars)
	exOn   bool                       // StoreConfig.Exemplars, where the hot path has the line already
	_      [31]byte
}

// Store is the set of live series, (metric, key) → Ring, in shards each guarded by a mutex.
// It is safe for concurrent use. Observe costs a hash, one uncontended lock and a map lookup
// on top of Ring.Add, and allocates nothing for an existing series.
type Store struct {
	cfg     StoreConfig
	ring    RingConfig
	metrics map[string]RingConfig
	shared  map[string]*RingConfig // the configs rings keep, "" the default's
	seed    uint64                 // seriesHash seed
	seedMix uint64                 // seedMix(seed), the hash's per-store constant
	mask    uint64
	shards  []shard
	now     func() int64

	count                                   atomic.Int64
	labelled                                sync.Map // metric → *labelledCount (LabelledSeries)
	late, future, invalid, refused, evicted atomic.Uint64

	metricsMu sync.Mutex
	perMetric map[string]*metricSeries // under metricsMu: each metric's series (Metrics), refusals
	busyBytes int64                    // under metricsMu: the series' weights (MaxBytes)

	levelsMu sync.Mutex                               // IndexLevels
	levels   atomic.Pointer[map[string][]*LevelIndex] // by metric; copied on change, nil without
}

// NewStore returns an empty store, or the config's error.
func NewStore(cfg StoreConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("window store: %w", err)
	}
	n := 64
	if cfg.Shards > 0 {
		n = 1
		for n < cfg.Shards {
			n <<= 1
		}
	}
	if cfg.MaxSeries == 0 {
		cfg.MaxSeries = 1 << 20
	}
	s := &Store{
		cfg:     cfg,
		ring:    cfg.Ring.withDefaults(),
		metrics: make(map[string]RingConfig, len(cfg.Metrics)),
		seed:    newSeed(),
		mask:    uint64(n - 1),
		shards:  make([]shard, n),
		now:     cfg.Now,

		perMetric: map[string]*metricSeries{},
	}
	s.seedMix = seedMix(s.seed)
	s.shared = map[string]*RingConfig{"": &s.ring}
	for m, rc := range cfg.Metrics {
		s.metrics[m] = rc.withDefaults()
		c := s.metrics[m]
		s.shared[m] = &c
	}
	if s.now == nil {
		s.now = func() int64 { return time.Now().UnixMilli() }
	}
	for i := range s.shards {
		s.shards[i].series = make(map[uint64]*series)
		s.shards[i].exOn = cfg.Exemplars
	}
	return s, nil
}

// ringConfigOf is RingConfig as the pointer a ring keeps.
func (s *Store) ringConfigOf(metric string) *RingConfig {
	if c, ok := s.shared[metric]; ok {
		return c
	}
	return s.shared[""]
}

// RingConfig is the ring config of metric's series, defaults filled in.
func (s *Store) RingConfig(metric string) RingConfig {
	if rc, ok := s.metrics[metric]; ok {
		return rc
	}
	return s.ring
}

// RingMetrics returns the metrics with rings of their own (StoreConfig.Metrics), sorted:
// with RingConfig's Spec of each, the --rings value that builds these rings again.
func (s *Store) RingMetrics() []string { return slices.Sorted(maps.Keys(s.metrics)) }

func (s *Store) hash(metric, key string) uint64 {
	return seriesHashMixed(s.seedMix, metric, key)
}

// lookup returns the series, or nil, from its shard; the caller holds sh.mu.
func (sh *shard) lookup(h uint64, metric, key string) *series {
	for se := sh.series[h]; se != nil; se = se.next {
		if sameString(se.key, key) && sameString(se.metric, metric) {
			return se
		}
	}
	return nil
}

// sameString is a == b, without a call when both are the same bytes: the event decoder
// interns keys and metrics, so an event's strings are usually its series' own.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// all yields every series of the shard; the caller holds sh.mu.
func (sh *shard) all() iter.Seq[*series] {
	return func(yield func(*series) bool) {
		for _, head := range sh.series {
			for se := head; se != nil; se = se.next {
				if !yield(se) {
					return
				}
			}
		}
	}
}

// Observe records ev at the store's now. See ObserveAt.
func (s *Store) Observe(ev Event) error { return s.ObserveAt(s.now(), ev) }

// ObserveAt records ev with now (unix ms) as the current time, creating its series if needed.
// It returns nil or one of ErrLate, ErrFuture, ErrInvalidValue, ErrEmptyKey, ErrSeriesCap, and
// counts each refusal in Stats.
func (s *Store) ObserveAt(now int64, ev Event) error {
	if ev.Metric == "" || ev.Key == "" {
		return ErrEmptyKey
	}
	h := s.hash(ev.Metric, ev.Key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	var err error
	if se := sh.lookup(h, ev.Metric, ev.Key); se == nil {
		// A refused event leaves no empty series behind to hold a place under MaxSeries.
		err = s.observeNewAt(sh, h, now, &ev)
	} else { // observeSeriesAt's lines, kept here: the hot path makes no call for them
		if ev.Value-ev.Value != 0 || !se.ring.addCurrent(now, ev.TS, ev.Value, ev.Count) { // NaN and ±Inf give NaN
			err = se.ring.Add(now, ev.TS, ev.Value, ev.Count)
		}
		if err == nil {
			se.partition = ev.Feed.Partition()
			if sh.exOn {
				sh.exemplar(se, &ev)
			}
		}
		if se.watched { // even refused: Add may have moved the ring's time
			sh.touch(se)
		}
	}
	sh.mu.Unlock()
	if err != nil {
		s.countErr(err)
	}
	return err
}

// create adds a series under sh.mu, unless the cap is reached.
func (s *Store) create(sh *shard, h uint64, ev Event) (*series, error) {
	if s.count.Add(1) > int64(s.cfg.MaxSeries) {
		s.count.Add(-1)
		s.refused.Add(1)
		return nil, ErrSeriesCap
	}
	if !s.admitMetric(ev.Metric) {
		s.count.Add(-1)
		s.refused.Add(1)
		return nil, ErrSeriesCap
	}
	se := &series{metric: ev.Metric, key: ev.Key, next: sh.series[h]}
	if HasLabels(ev.Key) {
		se.labelled = true
		s.noteLabelled(ev.Metric, 1)
	}
	se.ring.init(s.ringConfigOf(ev.Metric))
	sh.series[h] = se
	if s.levels.Load() != nil {
		s.indexNew(sh, se)
	}
	return se, nil
}

// unlinkNew removes se, which create has just put at the head of its chain; the caller
// holds sh.mu.
func (s *Store) unlinkNew(sh *shard, h uint64, se *series) {
	if se.next == nil {
		delete(sh.series, h)
	} else {
		sh.series[h] = se.next
	}
	if se.labelled {
		s.noteLabelled(se.metric, -1)
	}
	if se.watched {
		sh.unindex(se)
	}
	if se.exemplar {
		delete(sh.ex, se)
	}
	s.noteRemoved(se.metric)
	s.count.Add(-1)
}

func (s *Store) countErr(err error) {
	switch err {
	case ErrLate:
		s.late.Add(1)
	case ErrFuture:
		s.future.Add(1)
	case ErrInvalidValue:
		s.invalid.Add(1)
	}
}

// Read aggregates one series over the last window at the store's now.
func (s *Store) Read(metric, key string, window time.Duration, qs []float64) (Agg, error) {
	return s.ReadAt(s.now(), metric, key, window, qs)
}

// ReadAt aggregates one series over the last window at now. It returns ErrNotFound for an
// unknown series, ErrBadWindow, or ErrBadQuantile.
func (s *Store) ReadAt(now int64, metric, key string, window time.Duration, qs []float64) (a Agg, err error) {
	err = s.withSeries(metric, key, func(se *series) error {
		a, err = se.ring.Read(now, window, qs)
		return err
	})
	return a, err
}

// scanMetric calls fn for every series of metric that match accepts, a shard at a time under
// its lock (so a scan is not one atomic snapshot): the merged reads' and partials' one loop.
func (s *Store) scanMetric(metric string, match SeriesMatch, fn func(se *series)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for se := range sh.all() {
			if se.metric == metric && match(se.key, se.partition) {
				fn(se)
			}
		}
		sh.mu.Unlock()
	}
}

// byKey is a SeriesMatch of a key filter, whatever the partition.
func byKey(match func(key string) bool) SeriesMatch {
	return func(key string, _ int32) bool { return match(key) }
}

// withSeries runs fn on the series (metric, key) under its shard's lock, or returns
// ErrNotFound: the reads of one series find it so. (Observe's hot paths do not: they
// unlock without a defer.)
func (s *Store) withSeries(metric, key string, fn func(se *series) error) error {
	return s.withShardSeries(metric, key, func(_ *shard, se *series) error { return fn(se) })
}

// withShardSeries is withSeries for a read that also needs the series' shard (what the
// shard keeps beside its series: exemplars).
func (s *Store) withShardSeries(metric, key string, fn func(sh *shard, se *series) error) error {
	h := s.hash(metric, key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	se := sh.lookup(h, metric, key)
	if se == nil {
		return ErrNotFound
	}
	return fn(sh, se)
}

// ReadMerged merges every series of metric whose key satisfies match into one answer over the
// last window at now; Agg.Series says how many series matched. It returns ErrNotFound when
// none did. Series are visited one shard at a time, so the merge is not one atomic snapshot.
func (s *Store) ReadMerged(now int64, metric string, match func(key string) bool, window time.Duration, qs []float64) (Agg, error) {
	var a Agg
	if err := checkQuantiles(qs); err != nil {
		return a, err
	}
	rc := s.RingConfig(metric)
	k, err := readSlots(rc, window)
	if err != nil {
		return a, err
	}
	ix, _ := rc.Sketch.Indexer() // validated by NewStore
	var bins sketch.Bins
	s.scanMetric(metric, byKey(match), func(se *series) {
		var one Agg
		cur := se.ring.at(now)
		se.ring.mergeInto(cur, k, &one, &bins)
		switch {
		case k <= se.ring.n:
			a.From, a.To = se.ring.span(cur, k)
		case a.Series == 0 || one.From < a.From:
			a.From, a.To = one.From, one.To // tiered: the widest span any series covers
		}
		a.Series++
		if one.Count > 0 {
			a.add(one.Count, one.Sum, one.Min, one.Max)
		}
	})
	if a.Series == 0 {
		return a, ErrNotFound
	}
	a.Quantiles = make([]float64, len(qs))
	a.readQuantiles(&bins, ix, qs)
	return a, nil
}

func (s *Store) each(fn func(*series)) {
	var batch [sweepBatch]*series
	flush := func(heads []*series) {
		var sink int64
		for _, se := range heads {
			sink ^= se.ring.cur // load ahead, as removeIf does
		}
		sweepSink.Store(sink)
		for _, head := range heads {
			for se := head; se != nil; se = se.next {
				fn(se)
			}
		}
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		heads := batch[:0]
		for _, head := range sh.series {
			heads = append(heads, head)
			if len(heads) == len(batch) {
				flush(heads)
				heads = heads[:0]
			}
		}
		flush(heads)
		clear(batch[:])
		sh.mu.Unlock()
	}
}

// removeIf deletes the series for which drop returns true and returns how many it deleted.
// It visits a shard's series a batch at a time and first loads each one's first cache line
// in a tight loop, so the misses of a large store (a million series) overlap instead of
// coming one after the other; drop then finds them in cache.
func (s *Store) removeIf(drop func(*series) bool) int {
	type entry struct {
		h    uint64
		head *series
	}
	var batch [sweepBatch]entry
	n := 0
	flush := func(sh *shard, es []entry) {
		var sink int64
		for _, e := range es {
			sink ^= e.head.ring.cur // independent loads: the CPU keeps many in flight
		}
		sweepSink.Store(sink)
		for _, e := range es {
			var keep *series
			for se := e.head; se != nil; {
				next := se.next
				if drop(se) {
					n++
					if se.labelled {
						s.noteLabelled(se.metric, -1)
					}
					if se.watched {
						sh.unindex(se)
					}
					if se.exemplar {
						delete(sh.ex, se)
					}
					s.noteRemoved(se.metric)
				} else {
					if se.watched {
						sh.touch(se) // drop may have moved its ring (Evict's sweep)
					}
					se.next, keep = keep, se
				}
				se = next
			}
			if keep == nil {
				delete(sh.series, e.h)
			} else if keep != e.head {
				sh.series[e.h] = keep
			}
		}
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		es := batch[:0]
		for h, head := range sh.series {
			es = append(es, entry{h, head})
			if len(es) == len(batch) {
				flush(sh, es)
				es = es[:0]
			}
		}
		flush(sh, es)
		clear(batch[:])
		sh.mu.Unlock()
	}
	s.count.Add(-int64(n))
	return n
}

// sweepBatch is how many series removeIf loads ahead.
const sweepBatch = 64

// sweepSink keeps removeIf's loads from being optimized away.
var sweepSink atomic.Int64

// Len is the number of live series.
func (s *Store) Len() int { return int(s.count.Load()) }

// DropPartition removes the series last fed by partition p (on revocation) and returns how many.
func (s *Store) DropPartition(p int32) int {
	return s.removeIf(func(se *series) bool { return se.partition == p })
}

// Reset removes every series.
func (s *Store) Reset() { s.removeIf(func(*series) bool { return true }) }

// Evict removes the series whose ring holds nothing at now and returns how many.
func (s *Store) Evict(now int64) int {
	n := s.removeIf(func(se *series) bool { return se.ring.Empty(now) })
	s.evicted.Add(uint64(n))
	return n
}

// Stats returns the store's counters.
func (s *Store) Stats() StoreStats {
	return StoreStats{
		Late: s.late.Load(), Future: s.future.Load(), Invalid: s.invalid.Load(),
		Refused: s.refused.Load(), Evicted: s.evicted.Load(), Series: s.Len(),
	}
}
