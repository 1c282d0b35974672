// Package window keeps sliding windows: per-series time rings of slots for the live engine,
// and count windows (sliding sum, monotonic-deque max/min) for batch jobs.
//
// # Count windows
//
// SumWindow keeps the sum of the last k values in O(1) a step (add the newcomer, subtract
// the leaver), compensated so 10M steps do not drift. MaxWindow and MinWindow stream the
// block (van Herk/Gil-Werman) algorithm over a buffer of 2k values; SlidingMax and SlidingMin
// run it over a slice; Deque is the textbook monotonic deque, used for time windows. Counter
// counts hits in the time window (now − span, now], the article's WindowCounter. The batch
// jobs over files built on them, and their exact semantics, are in package batch.
//
// # Time rings
//
// A series is (metric, key). Its Ring has Slots slots of Slot width aligned to the epoch
// (slot index = floor(ts / width)); the defaults are 10 s × 30 = 5 minutes of retention, and
// StoreConfig.Metrics overrides them per metric (e.g. cost: 60 s × 60 for hourly quotas).
// A slot holds count, sum, exact min and max, and quantile bins (package sketch); an empty
// slot holds no bins at all.
//
// Memory grows with what a series holds (issue #19). A ring starts sparse: no slots, its
// events kept raw (slot index, value, count: 24 bytes each), up to RawEvents (16). The 17th
// event allocates the slots and replays the raw events into them in arrival order; a ring
// whose slots all empty goes back to raw events. Reads of a sparse ring fold its raw events
// slot by slot (sums in the order a dense ring adds them) into one pooled scratch Bins, so
// both representations answer bit for bit alike. Measured (heap after GC, key, map entry
// and header included, default ring): 383 B for 1 event, 456 B for 3, 744-758 B for 10
// (100k and 1M series; TestSparseSeriesMemoryBudget holds ≤ 1 KB), against 3.0 KB for the
// same 10 events in slots up front. A dense ring packs every slot it has moved past
// (sketch.Slot: lossless, about 100 bytes for 1,000 latencies against 280 open); a late
// event reopens its slot, which the next advance packs again. A series of 30 full slots of
// 1,000 latencies costs 6.1 KB, 0.097× 30 sketches-go sketches (TestDenseSeriesMemoryBudget);
// DenseSeriesBytes is the rule for sizing MaxSeries from memory (TieredSeriesBytes, a ring's
// with its tiers, is what MaxBytes weighs each series by). The store hashes metric and key in place (seeded
// wyhash-style mix), and Store.ObserveFrom judges an event's time once, in the ring, against
// its record (Source) and now: ingest's hot path.
//
// One event into an existing series (issue #19) is: the hash (two multiply-mixes for a
// metric and a key of 8-16 bytes, in one call), the shard lock, the map lookup (interned
// strings compare by pointer), then Ring.addCurrent for an event of the current slot of a
// dense ring at a now in that slot: count, sum, min, max and one Bins.Add, whose DDSketch
// index is a table load (sketch's cubicIndexer, bit-identical to the mapping's formula). Any
// other event (a sparse ring, another slot, a slot to advance, a packed or new slot, an
// invalid value, or for ObserveFrom a record whose judgement might refuse it:
// judgeCannotRefuse) takes the full path, Ring.Add or addFrom, with the same result
// (TestAddCurrentMatchesFullPath). It allocates nothing once the slot's bins cover the value
// (TestObserveHotPathAllocatesNothing). BenchmarkObserve measures it against a bare
// sketches-go Add: ours (ObserveAt) and from (ObserveFrom, ingest's call). Ingest's spans go
// through Store.ObserveFromAll, a record's events at once: each series hashed, locked and
// found once for all its events, which it takes in their order, with ObserveFrom's results
// and slots bit for bit (TestObserveFromAllMatchesOneByOne; BenchmarkObserveFromAll); the
// spans of a request over HTTP through Store.ObserveAtAll, the same grouping with ObserveAt's
// results (TestObserveAtAllMatchesOneByOne).
//
// Semantics users rely on:
//
//   - "now" is an argument (ObserveAt, ReadAt); Observe and Read use StoreConfig.Now, the
//     wall clock by default. A ring's time never goes backwards, and only writes move it
//     (ObserveAt, ObserveFrom, Ring.Add, Evict's sweep, snapshots). Reads never do (issue
//     #25): a read at a now past a ring's current slot answers what the ring would hold
//     there, computed from its slots as they are (for a whole-retention window, the kept
//     aggregate plus the slots that join and minus those that leave, into scratch), so no
//     read API, at any now, changes what a later read or a later event sees
//     (TestReadsChangeNothing), and the answer is bit for bit the one a moved ring gives
//     (TestReadAheadEqualsAdvanced). A read in the current slot, the hot case, is as before.
//   - An event lands in its own slot even when it arrives out of order, as long as that
//     slot is still inside the retention. Older events are refused with ErrLate; events more
//     than Skew (default one slot) ahead of now are refused with ErrFuture. An event inside
//     the skew is kept in its future slot and joins reads when now reaches that slot.
//   - A read of window W (a positive multiple of the slot width, at most the retention)
//     covers the current slot and the W/slot − 1 before it; Agg.From and Agg.To state that
//     span, [From, To), so an exact oracle can be computed over the same events. Count and
//     Sum are exact, Min and Max are exact (tracked beside the sketch: a sketch's p100 is
//     not the max), quantiles are within the sketch's relative accuracy and clamped to
//     [Min, Max]. RatePerSec divides by the part of the span already elapsed, ElapsedSec,
//     counted from From even when the store (or the log it was restored from) is younger.
//   - The ring keeps the bins of its live slots summed in one aggregate, adding the slot
//     that completes and subtracting the one that leaves (the sliding-sum trick on bucket
//     counts), so a full-retention quantile is one read instead of a merge of 30 sketches.
//     The current slot joins the aggregate at its first full-window read, so a series that
//     nobody reads updates one set of bins per event. Shorter windows scan their few slots.
//   - History: ReadRange (Ring), ReadRangeAt and ReadRangeMerged (Store) return the windows
//     of length W ending at the current slot and at every step before it, as far back as a
//     whole window fits in the retention, oldest first. Each point is exactly what a read of
//     W answered when that slot was current (count, sum, min, max, the same union of bins
//     for quantiles); a window and step of one slot give every slot of the retention.
//     Each packed slot is decoded at most once per read: a one-slot point reads its
//     quantiles straight from the encoding (sketch.Slot.Quantiles), points of several
//     slots decode the ones they need once into pooled scratch; no decoded copy is kept.
//   - VisitWindowAt hands an exporter a window's bins (the kept aggregate for a full-retention
//     window) under the series' lock, so a histogram export copies buckets, not quantiles.
//     VisitSlots hands it every live slot of the selected series instead (count, sum, min,
//     max and the slot's bins as kept, packed or open): promapi's one sample per slot end.
//     RangeSlots composes a range read from slots so handed, by the same code as
//     ReadRangeSelected and ReadRangeGroups: a cluster member's history of every partition.
//   - The window max is the max of the slot maxima, a scan of at most Slots values. A
//     monotonic deque over slots would be O(1) amortized only for in-order data: an
//     out-of-order event can raise an older slot's max, which a deque cannot absorb.
//
// # Tiers
//
// A ring may have coarser tiers (RingConfig.Tiers, issue #29), e.g. 10 s × 360, then 1 h × 24,
// then 1 d × 32: each width a multiple of the one before, all aligned to the epoch. When the
// ring advances, a slot leaving its retention folds into the slot of the first tier holding
// its start (tier.go: count and sum added, min and max compared, packed bins merged or, into
// an empty tier slot, moved), and a tier slot leaving folds into the next tier; past the last
// it is gone. Only slots aging out move, so the per-event path is the untiered one (the hot
// path touches no tier; BenchmarkObserve is unchanged), and a ring allocates its tiers at its
// first fold. A tier slot is 32 bytes plus its packed bins; NoSketch keeps no bins anywhere (a
// sum-only metric, quantiles NaN): 35 days of an event every 10 s in 1h:6:none+1d:36 take
// 1,936 B of heap per series against 14.5 MB in 10 s slots (TestTieredSeriesMemoryBudget,
// BenchmarkTieredMemory); TieredSeriesBytes is the sizing rule.
//
// A read of window W up to Reach (the retention plus Slots − 1 slots of each tier) that is
// longer than the retention takes every place that holds events of [to − W, to): the ring's
// slots and the tiers' (foldTiered). Events are in exactly one place, so count, sum, min and
// max are exact over the span read. The span's start is to − W unless a tier slot holds it
// strictly inside, when it rounds down to that slot's start (finest tier first): the answer
// covers the window, never less, and Agg.From says where it starts, so an oracle over
// [From, To) is exact (TestTieredFoldMatchesOracle); a start on the boundaries of the tier
// holding it is exact. Quantiles read the union of the slots' bins, so they have the sketch's
// relative accuracy. A read ahead of the ring rounds as the ring moved there would (roundFrom
// folds, into a scratch copy of the tiers' counts, the slots such a move would fold), so no
// read moves anything and the answer is the moved ring's (TestTieredReadAheadEqualsAdvanced).
// Partials of tiered windows merge to the earliest start of equal end. Calendar windows
// (calendar.go: local midnight, Monday, the 1st, in an IANA zone) are read as windows from
// their boundary, rounded as any start is: a +05:30 zone's midnight inside an hour slot reads
// from the hour. Range reads (ReadRange, ReadRangeMerged, ReadRangeGroups) reach through the
// tiers (range_tiers.go): the reach is tiled by cells, each tier's slots (a tier's newest
// slot ending where the finer slots begin) and then the ring's own, and a point older than
// the retention rounds its end and start down to cell boundaries, so it is exact over its [From, To) and comes
// from the finest tier that covers it (TestReadRangeTiered). Evict keeps a
// series while its tiers hold anything a read can reach. Snapshots (version 2) carry the tiers.
//
// # Store
//
// Store shards series over mutex-guarded maps; it is safe for concurrent use and allocates
// nothing per event once a series exists. MaxSeries caps memory, and MaxBytes by what each
// series' ring may take busy (TieredSeriesBytes): events that would create a series beyond
// either are refused (ErrSeriesCap) and counted. Evict removes series whose ring
// is empty (call it periodically), DropPartition removes the series last fed by one feed
// (ingest: a revoked Kafka partition). Event.Feed names the feed; its zero value is no feed,
// so an event from the API, a file or a test needs nothing set and is never dropped with a
// feed. Every refusal is counted in Stats by reason. ReadKey and ReadRangeKey read a key or
// a key pattern (glob.go: '*' matches any run of bytes), ReadAt and ReadRangeAt for one
// series, ReadMerged and ReadRangeMerged for a pattern: readers make that choice there.
// IndexLevels makes a LevelIndex of a metric (issue #29): the series under each key prefix
// of a hierarchy (org/team/user), kept as series come and go, whose MergeUnder answers what
// MergePartial answers for the prefix while visiting only its series, and from the prefix's
// cached aggregate while none of them has been written, made or removed since.
// StoreConfig.Exemplars keeps, beside each ring, one exemplar per slot: the accepted event
// of the largest value that carried a trace id (Event.TraceID, filled by the span formats and
// by access logs' trace ids), read by VisitExemplars (promapi's query_exemplars); see exemplar.go.
//
// ValidName is the key rule of every door (issue #25): a key or metric is valid UTF-8
// without C0 or C1 controls, DEL or bidi overrides and isolates. Ingest's decoder, snapshot
// restores, the limiter's keys and the read routes' parameters hold names to it; the store's
// own Observe calls take any non-empty name, so a library caller decides (and the /metrics
// export skips a key it cannot carry).
//
// # Labels
//
// A series is a metric and a set of labels, key the default one (issue #27). The store keeps
// it under its series string (labels.go), which for a series without labels is its key, so
// nothing written before labels reads differently, and three labels cost a sparse series 36 B
// (TestLabelledSeriesMemoryBudget holds ≤ 64). Readers select series with a Selector
// (selector.go): the key parameter (exact, a glob, or any) and PromQL label matchers (=, !=,
// =~, !~), regexps anchored and compiled as Prometheus compiles them, an absent label reading
// as "". An exact key selects every series of that key; while a metric has no labelled series
// (LabelledSeries) that is one series, and ReadSelected and ReadRangeSelected keep the one
// lookup. Match allocates nothing and answers literals, alternations of literals, prefixes,
// suffixes, substrings and 5..-like sequences with string comparisons (FuzzSelectorMatch
// holds them to the regexp): a match= read over 100k series costs 1.3× a glob read of them.
// ReadGroups and ReadRangeGroups answer one aggregate per group of by-labels (groups.go),
// each merged exactly as ReadMerged merges a glob, at most MaxGroups (ErrTooManyGroups);
// GroupPartials carry groups between instances as a Partial carries one merged answer.
//
// # Vocabulary
//
// The words other packages use for windows are defined here once (vocab.go), so the query
// API, usage rules, exports and batch jobs cannot drift apart: Stat is the statistic a reader
// selects from an Agg (ParseStat reads count|sum|avg|min|max|rate, pNN and 0.NN; Value reads
// it, with quantiles 0 and 1 answered by the exact Min and Max); ParseWindow reads a window
// length as every caller takes one (Go's durations and whole days, 1d = 24h; ParseDuration
// the same spelling where 0 means none), and RingConfig.CheckWindow says whether a ring can
// read it, both in the words the HTTP API answers 400 with;
// RingConfig.Span is the span a read covers; FormatDuration writes a window as users type it
// (5m, not 5m0s); FloorDiv is the slot index of an instant, and the index of a limiter's fixed
// window (limiter, limiter/redislimit) and of a backtest's timeline bucket too: every limiter
// package sits above window in the import order, so they use it rather than a copy, and no
// leaf package is needed for one line of arithmetic.
//
// # Where things go
//
// A new statistic of a window (an aggregate readers select) that an Agg can answer, from its
// count, sum, min, max, span and quantiles, is five files: window/vocab.go (its StatKind
// before statEnd, its name in statNames and its Value; ParseStat, String and StatNames then
// carry it to the query API's by=, export specs, usage rules, slide batch --agg and every
// message listing them), batch/agg.go (its window arithmetic over rows: Job.aggregator for
// count windows, timeAgg.feed for time windows), query/export.go (its /metrics gauge),
// README.md and cmd/slide/help.go (the lists users read), and their tests. /v1/window answers
// a fixed set of members (query's appendStats), which a statistic joins only if it should be
// in every answer. A statistic an Agg cannot answer (a sum of squares, say) is a new slot
// field first: the ring (ring.go), its snapshot (snapshot.go) and partials (partial.go), and
// cluster's codec.
//
// A new unit or kind of window length (calendar windows, issue #29) goes into ParseDuration
// and ParseWindow, which every caller reads lengths through; CheckWindow says which lengths a
// ring can serve. A key-matching rule goes into MatchKey (glob.go), which the read routes,
// usage rules and rls wildcards share; a label-matching rule into the Selector (selector.go). A limiter algorithm, an event format and an HTTP
// route are not window's: see the docs of limiter, ingest (the decoder) and query.
//
// # Snapshots
//
// AppendSnapshot encodes the series of one source partition (every live slot of every ring:
// index, count, sum, min, max and sketch bins, with a table of ring shapes) in a versioned
// format with a CRC-32C trailer, and WriteSnapshot writes the same to an io.Writer in pieces
// of about SnapshotFlushBytes (ingest's compressor), never holding it whole; LoadSnapshot (in memory) and LoadSnapshotFrom (streamed
// from a reader: ingest's decompressor) decode one, all or nothing, and merge its rings
// into the store, so a restore costs the size of the state rather than the length of the
// history. Reads of a loaded ring equal reads of the ring it was taken from, and later
// events land in it alike. A snapshot whose ring shape (slot, slots, sketch kind) differs
// from the store's config, or whose ring holds more slots than the store's, is refused
// (ErrSnapshotShape; the tiers and NoSketch count from version 2, and a version 1 snapshot,
// from before tiers, restores the ring with its tiers empty); another format version is
// ErrSnapshotVersion, anything malformed
// ErrSnapshotCorrupt. A snapshot comes from a topic anyone allowed to write to it can fill,
// so its series are admitted as events are (issue #25): a metric failing ValidName or a key
// and labels failing CheckSeries (ErrSnapshotName) or over SnapshotLimits.MaxNameLen (ErrSnapshotNameLength), a ring or
// slot ahead of now by more than the store's skew (ErrSnapshotFuture), a series listed
// twice (ErrSnapshotDuplicate) each refuse the whole snapshot. The stream is decoded in
// pieces: a 64 KiB read buffer, one slot's bins (at most 32 MiB), and the last 4 MiB,
// read at once for the shape table and the checksum at the end; series are staged (at most
// MaxSeries; beyond them they are checked, not kept, and counted as refused) and resolved
// against the table once it is in, so a snapshot's cost is what its series would cost,
// never its declared size (TestSnapshotStreamStopsAtGarbage: 1 GiB of zeros after a header
// is refused after one read). In memory the checksum is checked before any series. The
// decoder is fuzzed, in memory and streamed against each other, never panics, and in
// memory allocates at most a small multiple of its input. The ring's side of it
// is two methods, export and restore, so the ring's layout can change under them. A sparse
// ring exports its raw events as the slots they make; restore puts an empty ring back
// sparse when every slot rebuilds exactly from its count, sum, min and max (one event, one
// value repeated, or two values; at most RawEvents events; the sum checked bit for bit as a
// dense slot adds it), else dense: 100,000 restored series of 10 events take 696 B of heap
// each instead of 3,152 B (TestSnapshotKeepsSparseSeriesSparse).
package window
