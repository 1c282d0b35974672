// Package ingest moves events from a Kafka topic into a window.Store, correctly across
// restarts and rebalances, and refuses bad input without stopping. What an event is, how a
// record's value decodes into events and why one is refused are package event's: ingest
// hands it each record.
//
// # Parts
//
//   - Consumer: a segmentio/kafka-go consumer group member (ConsumerGroup / Generation for
//     assignments and commits; each partition dialled at its leader with kafka-go's Conn,
//     whose socket is read through a 256 KiB buffer: kafka-go's own 4 KiB one made two or
//     three read syscalls a record of a few KiB, most of the consumer's reading; and read
//     with the consumer's own Fetch v4, record batches parsed in place and each record's key
//     and value copied into a reused arena, not allocated anew as kafka-go's Batch does:
//     fetch_raw.go). A chunk's arena is sized for its records at once (judged by the batch's),
//     and an ended fetch session's chunks go through a sync.Pool to the next, so a reconnect
//     or a rebalance reads into arenas already grown. A session's seek to its planned offset
//     asks the broker nothing (an offset retention passed meanwhile is the fetch's
//     OffsetOutOfRange, which resets as a checked seek's would).
//     Each record's value goes through event.Intake.TakeRecord with a decoder per partition,
//     an event.Format of Config.Format (slide's JSON by default, OTLP spans with
//     event.NewOTLPProto or NewOTLPJSON: one ExportTraceServiceRequest a record, a refused
//     span's dead letter the span's bytes): the decoding, the store's judgement against the
//     record's timestamp and the refusal Reasons are package event's, as for POST
//     /v1/events; counting, logging and dead-lettering each refusal are the consumer's.
//   - StartBroker: an in-process Kafka-protocol broker (github.com/twmb/franz-go/pkg/kfake)
//     for `slide serve` without --brokers, demos and tests.
//   - Producer, Demo, DemoGen: the writing side of `slide produce` and
//     `slide serve --demo`, records in event.Append's layout.
//   - Security: TLS (and mTLS) and SASL (kafka-go's sasl/plain and sasl/scram, SCRAM-SHA-256
//     and -512) in one *kafka.Dialer that the consumer group, the partition readers, the
//     dead-letter writer and the producer all use; CheckBrokers dials once with it, so a
//     refused password or an untrusted certificate is one error naming the broker.
//
// # Window state is a function of the log
//
// When a partition is assigned, its series are dropped and it is replayed from the first
// record whose timestamp is at or after now − Config.Restore, with the wall clock as the
// windows' now. Slide finds that record itself, by a binary search over offsets that reads
// record timestamps (about log2(records ÷ batch) small fetches: a fetch answers with a whole
// record batch, and a probe reads every record of it, so the search settles inside the
// batch where the span starts without fetching it again; the first probe reads the log
// start, so a log wholly inside the span answers in one fetch), not with ListOffsets by
// time: a broker answers with the first record after which the running maximum of
// timestamps reaches the start, so one future-stamped record at a partition's head made
// every restore replay the whole partition, and kfake (the embedded broker, `slide
// broker`) inflates the whole batch its lookup lands in, so a compression bomb in the span
// inflated inside the broker. A probe passes over records stamped beyond now + skew and
// bombs; the search assumes timestamps that do not fall back along the log by more than
// the skew, and a probe that learns nothing counts as "at or after the start" (more is
// replayed, never less). Config.Restore must cover the longest retention plus
// skew of any metric (RestoreSpan). The partition counts as restored once it has been read
// up to the log end seen at assignment; until every assigned partition is restored, Ready
// is false (a partition counts as restoring from the generation that assigns it, while its
// restore is planned too), Restoring names them and Progress shows how far each is.
// WasReady stays true once Ready was: slide serve's /readyz answers 503 only until the
// first restore, and a read over a partition restoring later is refused or flagged by the
// cluster read, which takes only restored partitions. A revoked partition's series are dropped;
// a partition kept across a rebalance carries on from where it was, without a replay.
// Because the windows are rebuilt from the log, or from a snapshot of exactly the state at
// an offset and the log after it (Snapshots, below), a crash, a restart or a rebalance
// loses no event and counts none twice. Committed offsets serve lag
// monitoring and one more purpose, below.
//
// Decisions worth knowing:
//
//   - Future and late are judged against the record while its timestamp agrees with this
//     instance's clock to within the skew (`--max-skew`, default one slot of the metric's
//     ring). An event whose ts is ahead of its record's timestamp by more than the skew is
//     refused as future; one already older than its metric's retention at the record's
//     timestamp as late. The record's timestamp is part of the log, so these checks give
//     the same answer on every replay. When the record's timestamp disagrees beyond the
//     skew, it is a producer's clock (or lag, or a replay) and the event's own time is
//     judged against this instance's clock instead: a record stamped ahead of now by more
//     than the skew (a producer clock ahead: its correctly stamped events were all lost as
//     late) has both checks made against now; a record stamped behind now by more than the
//     skew (a producer clock behind: its events were all lost as future) has "future"
//     judged against now and "late" still against the record. The price: an event refused
//     as future when first read is accepted by a replay once its time has come.
//   - Expired is refused like the rest. An event that was within its window at its record's
//     time but is out of it when read (consumer lag, a skewed producer, or a replay reaching
//     back further than its metric keeps: latency_ms events during a replay sized for the
//     1 h cost windows) is refused as expired: counted in slide_ingest_rejected_total{reason
//     ="expired"} (and, as before, slide_ingest_expired_total) and dead-lettered.
//   - Compression bombs are refused unopened. kafka-go inflates a compressed record batch
//     whole inside its reader; slide installs bounded codecs in kafka-go's codec table, so a
//     batch that inflates beyond Config.MaxInflatedBytes (`--max-inflated-bytes`, 32 MiB)
//     stops there with ErrInflateBudget. Each of its records is refused as too_large and
//     dead-lettered as a pointer (the letter's headers name topic, partition and offset; its
//     value is empty), and reading goes on at the next offset. While inflating, kafka-go's
//     buffer doubles as it grows, so a bomb costs about four budgets of memory for a moment.
//     What a stream declares is bounded too, before anything of its size is allocated: a
//     zstd frame's window (kafka-go's decoder allocated up to 512 MiB for a 300-byte frame),
//     and a snappy xerial chunk's or block's length (up to 4 GiB from a header).
//   - Reading and applying overlap. Each partition has a reader goroutine (fetch, and
//     the parse and copy of each record) and an applier (decode, checks, observe,
//     refusals), handed chunks of up to 128 records over a channel four chunks deep, so a
//     partition costs the slower of the two rather than their sum, and a lone restoring
//     partition uses two cores. Everything that names an offset (p.next, /readyz
//     progress, commits, snapshots, the restore) moves in the applier, after the records
//     below it are in the windows; a reconnect, an error or a stop waits for the applier
//     first, so no record is applied twice or skipped (TestProgressNamesOnlyAppliedRecords).
//   - Offsets out of range reset to the restore span, never to the log end. When retention
//     deleted the next offset, or the log ends below it (a broker restarted empty, an
//     unclean leader election), reading moves to the first record of the restore span the
//     log holds (for a shortened log: the first stamped after the last record processed, so
//     a log that kept records already counted does not count them twice, and one that lost
//     everything has all written since counted). Each reset is counted in
//     slide_ingest_offset_resets_total{partition,reason} (retention, log_truncated) and
//     logged once.
//   - Keys are bytes (package event's rule): a key or metric that is not valid UTF-8 (a raw
//     byte, or an escaped lone surrogate) is refused as bad_field, never rewritten to
//     U+FFFD, which made "t\xff" and "t\xfe" one series; so is one holding a C0 or C1
//     control, DEL or a bidi override or isolate (window.ValidName, the rule the limiter,
//     the read routes and snapshot restores share), escaped or not.
//   - Refusals say what. A dead letter's slide.reason header (HeaderReason) is the reason's
//     code, as before, what tools and the metric's label filter on; its slide.detail header
//     (HeaderDetail) says which field and what is wrong, for a person (`no field "value"`,
//     `ts 2026-12-02T09:05:00Z is 1h0m0s ahead of the record (skew 10s)`, event.Intake.Explain;
//     for too_large the budget). A line too large to copy into a dead letter the broker
//     takes is written as a pointer to its record (HeaderLineBytes, no value), and the
//     writer's batches stay under the broker's limit (kafkarange.MaxBatchBytes): one such
//     letter made kafka-go refuse every letter written with it. The issue asked for that text in slide.reason; it has a
//     header of its own so that the code stays a stable value to match. The rate-limited
//     log line carries it as its detail attribute. It is built only for a refusal that is
//     logged or dead-lettered, by decoding the refused line again: the accepting path is as
//     before.
//   - Refusals are counted and dead-lettered once. Records below the offset the group had
//     committed at assignment were processed by some instance already: when they are
//     refused again during a replay they are counted in slide_ingest_restore_skipped_total,
//     not in slide_ingest_rejected_total, and not dead-lettered again. Offsets are committed
//     only after the dead letters of the records below them are written (or failed: a
//     letter the dead-letter topic refuses after the writer's retries is counted in
//     slide_ingest_dead_letter_errors_total and not retried), and a commit never moves an
//     offset back during a replay. Dead letters are therefore at least once: a crash
//     between writing a letter and the next commit repeats it.
//   - A record with no non-blank line (a tombstone, an empty value) carries no event: it is
//     skipped and counted in slide_ingest_tombstones_total, not in
//     slide_ingest_rejected_total and not dead-lettered. It is not bad input (a compacted
//     topic deletes with tombstones), so it must not trip the alert on refusals, yet a
//     producer sending empty records by mistake shows up there.
//   - Each line of an NDJSON record is its own event: one bad line is refused and
//     dead-lettered alone (the letter's value is that line), the others are observed.
//
// # Snapshots
//
// A full replay costs retention × rate. With SnapshotConfig.Interval set (`slide serve`:
// --snapshot-interval, 30 s), each partition's worker encodes the series it feeds
// (window.Store.WriteSnapshot: every ring's slots with count, sum, min, max and sketch
// bins) between two batches, so the snapshot is exactly the state after every record below
// the partition's next offset, zstd-compresses it (fastest level) as it is encoded and cuts
// it into chunk records as it is compressed, and hands those to one writer goroutine: what
// a snapshot holds is its compressed size, never the encoding whole (4-20 times as large;
// TestSnapshotTakeHoldsNoEncoding). The writer puts it on
// the compacted snapshot topic (default "<topic>.slide-snapshots", created with
// cleanup.policy=compact and the events topic's partition count when missing, at start and
// after a failed write finds it gone; partition p's snapshots go to partition p mod n):
// chunks of at most ChunkBytes keyed
// "<group>/<p>/<set>/<i>", then, once the dead letters of the records it covers are
// written, a manifest keyed "<group>/<p>" with the source offset, the time, the chunk
// count, the payload's size, codec, decoded size and CRC-32C. The manifest is what makes a
// snapshot complete. An hour of 1,000 cost series, 14.9–15.1 MB encoded (mostly one-byte
// bin counts), is written as 0.33–0.44 MB (BenchmarkSnapshotRestore logs both). Manifests
// of format version 1 (uncompressed) are still read.
//
// Snapshots are admitted like events (issue #25): anyone who can write to the topic can
// make every checksum valid, so nothing in a snapshot is trusted for its cost. A manifest
// declaring a decoded size beyond 256× its payload, or a payload beyond what its chunk
// count can carry, is corrupt; one declaring more than SnapshotConfig.MaxBytes is too_large,
// and so is a read whose chunk records held pass twice it; the chunks' real sizes must add
// up to the declared one. All before anything is allocated by a declared size: the chunks
// stay the records they came in, their CRC is computed piece by piece, and the payload
// streams into window.Store.LoadSnapshotFrom through the zstd reader record batches use (a
// frame's window and the decoder's memory within Config.MaxInflatedBytes: one budget for
// both; beyond it too_large), in 64 KiB reads. The store holds every series to an event's
// rules: window.ValidName and Config.MaxKeyLen for its key and metric (bad_field,
// key_too_long, the event refusals' names), no ring or slot ahead of now by more than the
// ring's skew (future; so is a manifest taken more than the skew ahead of now: its clock
// was ahead, and what had left its windows is inside them now), no series listed twice (duplicate), the store's ring shape
// (config_changed). One failing series refuses the whole snapshot. A series the store
// already holds when a partition's snapshot loads was fed by another feed (the
// partition's own series were dropped at assignment): it sums both parts, as their events
// would, the decision of a series fed by two partitions since snapshots began.
// Snapshots alternate between chunk sets a and b, so a crash in the middle of one leaves
// the chunks of the previous complete snapshot untouched, and compaction keeps one manifest
// and two chunk sets per (group, partition). A partition whose offset has not moved is
// rewritten only every half restore span. Restoring partitions are snapshotted too, so a
// crash late in a long replay resumes from there.
//
// When a generation ends (a rebalance, which may hand partitions to another instance, or
// Run's shutdown) the consumer writes a final snapshot of every partition it owns, after
// its workers have stopped and the offsets are committed and before it rejoins the group
// (kafka-go waits for the generation's goroutines, and the coordinator for this member), so
// the next owner replays only what was produced after. It is bounded by
// SnapshotConfig.Final (5 s, or half the rebalance timeout when that is shorter): a write
// not done by then is given up and the next owner starts from the snapshot before. A
// partition whose last snapshot already covers its next offset, or whose restore was cut
// short (its state is not whole), is skipped.
//
// On assignment the partition's worker reads the snapshot partition backwards from its end
// in growing windows, keeping the latest record of each of its keys, until it holds the
// latest manifest and all its chunks: correct whether or not the broker has compacted the
// topic yet (kfake compacts in the background). The first window is four records; once
// the manifest is in hand the next reaches exactly back to where its chunks are when they
// were written just before it, so a snapshot is read once (a fixed first window of 64
// records read 31.5 MB for an 11.8 MB snapshot). It loads the snapshot into the store
// (all or nothing) and replays the log from the snapshot's offset. It replays from
// now − Restore instead, as without snapshots, when there is no snapshot (reason missing),
// a chunk is missing or was overwritten (incomplete), a checksum or the encoding fails
// (corrupt), the format version is another (unknown_version), the snapshot was taken
// before now − Restore or the log no longer holds its offset (too_old), the rings have
// another shape than the store's config or its events were made by other rules
// (SnapshotConfig.Events) than this instance's (config_changed), its offset is past the log end
// (ahead_of_log), the topic cannot be read (read_error), its manifest's slide-topic header
// names another events topic (other_topic: two deployments of one group name sharing a
// snapshot topic), or it is not admitted (too_large,
// future, duplicate, bad_field, key_too_long: above). Each choice is counted in
// slide_snapshot_restore_total{source,reason} and logged. Progress says per partition
// whether it restores from a snapshot or the log and how far it is.
//
// What stays exactly as with a full replay: records after the snapshot go through the same
// checks (future, late, expired), dead letters and restore-skipped counting use the same
// committed offset, and a loaded series beyond MaxSeries is refused and counted as its
// first event would be (which series win the cap is then the snapshot's order, not the
// log's). Eviction sees loaded rings as it sees replayed ones: a series with nothing left
// in its window is not loaded at all. A series fed by two partitions (a producer that does
// not key by series) is in both partitions' snapshots with the part each fed last; as with
// revocation, keep one key in one partition.
//
// # kafka-go against kfake
//
// kafka-go's ConsumerGroup (join, sync, heartbeat, leave, offset fetch and commit),
// ListOffsets and Fetch all work against kfake unchanged, as the tests in this
// package show; no workaround was needed. Two things matter for tests: kfake's
// default minimum session timeout is 6 s (StartBroker and internal/kafkatest lower it to
// 100 ms so tests can use short sessions), and kafka-go asks the broker to answer a fetch
// a quarter of MaxWait before its own socket deadline, so a MaxWait of tens of
// milliseconds times out on a loaded machine (Config.MaxWait defaults to 1 s).
//
// # Metrics
//
// All on Config.Registerer: slide_ingest_events_total{partition} (accepted events,
// replays included), slide_ingest_bytes_total{partition}, slide_ingest_lag{partition},
// slide_ingest_rejected_total{reason}, slide_ingest_restore_skipped_total{reason},
// slide_ingest_expired_total, slide_ingest_tombstones_total, slide_ingest_offset_resets_total{partition,reason},
// slide_ingest_restore_duration_seconds, slide_ingest_partitions{state},
// slide_ingest_dead_letters_total, slide_ingest_dead_letter_errors_total,
// slide_ingest_commit_errors_total, slide_ingest_generations_total, slide_ingest_series
// and slide_ingest_series_refused_total (the store's, read at scrape time); and for
// snapshots slide_snapshot_restore_total{source,reason},
// slide_snapshot_restore_duration_seconds{source}, slide_snapshot_age_seconds{partition},
// slide_snapshot_written_bytes_total, slide_snapshot_writes_total,
// slide_snapshot_write_errors_total and slide_snapshot_skipped_total.
package ingest
