// Package clusterlimit is the limiter's backend cluster (issue #30): exact limits across the
// instances of one consumer group without Redis. Each key's decisions are taken by one
// instance, its owner, in its memory (limiter.Memory, the same algorithms and state as
// backend memory); every other instance forwards to it.
//
// # Owner: the group's assignment, no new membership
//
// A key's owner is the owner of partition murmur2(key) mod the topic's partitions — the
// partition the Java client's default partitioner, kafka-go's Murmur2Balancer and slide
// produce write the key's events to, so a key's events and its limit live on one
// instance — as the cluster package learns it from the consumer group (each member
// advertises its HTTP address; see cluster's doc). An instance assigned the partition in
// the current generation decides at once: with one instance every decision is a plain
// memory decision, with no hop (Backend.DecideLocal, the Service's limiter.LocalDecider
// path: no call, no deadline, nothing allocated). A key another instance owns is looked up
// once: DecideLocal hands the route it found (the policy and the owner's channel) back to
// the Service, which passes it to DecideBy with the request. A request of one check of a
// cluster policy without plans (AllowN, and Decide of one check, as most of /v1/allow's)
// makes one call instead, DecideOne (limiter.OneDecider): DecideLocal's steps, then the
// hop, the owner looked up once and the request by value, the Service's and this
// package's short paths for one decision, whose goroutine wakes to a small stack when the
// owner answers.
//
// # The hop: batches as frames over one stream per owner
//
// A non-owner sends its decisions to the owner over one persistent connection: a POST to
// the owner's Path (/internal/v1/limit) on the API listener, signed with the group's key
// as the partial reads are (cluster.Auth: an HMAC over the receiver, the path and a fresh
// nonce, so a replayed upgrade is refused), upgraded to a stream (cluster's peer stream,
// protocol slide-stream/2; answered 101 with the owner's nonce, signed). Both ends derive
// the stream's key from the group's key and the two nonces, and from it (HKDF-SHA256) a
// key per direction; every frame then carries a 16-byte GMAC (AES-256-GCM sealing no
// plaintext) under its direction's key of its bytes, with its direction and sequence
// number as the nonce, so a stranger can neither open a stream, nor inject, replay or
// reorder a frame on one (stream.go has the frame format). slide-stream/1 bound the same
// with a truncated HMAC-SHA256, five times the CPU per byte; an instance of the other
// version does not take the upgrade (an owner of this one answers 426), so during a
// rolling upgrade the two forward to each other by POST, below; so does a process whose
// GCM refuses counter nonces (GODEBUG=fips140=only). Decisions for one owner are batched by
// group commit: at most Config.MaxInflight (2) batches are on the wire to one owner, the
// second only behind a batch of a few decisions (smallBatch); a decision that finds a slot
// free leaves at once, and those arriving while every slot is busy leave together in the
// next batch (at most MaxBatch). A batch answered on a stream frees its slot once each of
// its callers took its answer, so the callers that decide again at once join the next
// batch. A lone decision never waits for a timer, and under load one frame carries nearly
// every decision in flight. The batch is a small
// binary format (codec.go: varints, versioned, bounded, fuzzed by FuzzDecode, as are the
// frames by FuzzFrame, and a peek's request and answer, peek.go); on a stream a batch names
// each of its policies (and fingerprints) once and each decision's time as a difference
// from the batch's first (versionStream: about half a POST batch's bytes a decision). An owner that answers the upgrade with anything but 101 (a slide
// before streams, or of another stream version) is asked by one signed POST per batch, the same batch as body, for a
// minute before the caller tries a stream again; the POST route stays served.
//
// The decision's now is the caller's clock (the Service's), as a Redis policy in client
// clock mode: instances' clocks agree to milliseconds under NTP, and a clock behind by d
// decides as if d earlier. A forwarded decision reads the clock once, the Service's
// reading, which also starts its deadline; the rest are a frame's (its send, its answer's
// arrival, which ends the callers' latency), and the owner reads none per decision. An
// owner decides a batch at one instant of its assignment, as gubernator's owner decides a
// batch: it takes its ownership lock once for the batch and looks each partition's
// ownership up once.
//
// The policy's timeout bounds the hop (default 50 ms; the Service hands the deadline to
// Backend.DecideBy, limiter.DeadlineDecider, rather than a context with a timer per
// decision: each batch's timer, and each owner's queue timer, end a caller's wait at its
// own deadline, even behind batches of a longer timeout; deadlines are compared on the
// monotonic clock, so a wall clock stepped or slewed moves none, and the Service's clock
// reading starts them without a second read) and on_backend_error (open, closed,
// local: this instance's memory of the same policy) decides when the owner does not
// answer in time, answers an error, or is unknown. A caller that gave up before its
// decision left is not sent, so the owner does not count a decision nobody waits for; one
// that gave up after it left may have been counted (as with Redis), unless the batch
// reaches the owner past its deadline (each frame's, or a POST's cluster.HeaderDeadline:
// the latest of its callers'): the owner then decides nothing and answers late (a POST:
// 504), as a SIGSTOPped owner does on waking. A batch unanswered at its deadline is
// abandoned, not its stream: the batches behind it keep their own deadlines, and an
// owner that wakes answers them in order. A stream that fails (reset, a write stuck
// past its batch's deadline, a frame that does not verify) fails the batches on it, and
// the next batch dials a new one.
//
// The route is signed as peer reads are (the group's key, or the one derived from
// --auth-token-file); without either it is as open as POST /v1/allow itself.
//
// # Ownership moves
//
// The owner checks each forwarded key's partition against its own assignment of the
// current generation (cluster.Assigned, changed before the consumer revokes anything) and
// answers StatusStale for one it no longer holds; the caller describes the group again
// and asks the new owner once, or, when the group names no other owner yet (it is
// rebalancing), decides by on_backend_error. Every instance must run the same policies and
// plans: each forwarded decision carries the Fingerprint of the numbers its caller decided
// by (its key's plan's, if any), and an owner whose policy or plans give other numbers
// answers StatusPolicy rather than count by them.
//
// # Plans, calendar windows and levels
//
// They work as in backend memory (plans.go). An owner decides a planned key with a variant of
// the policy's limiter (the plan's numbers on the policy's state), after resolving the key's
// plan with its own plans (limiter.PolicyResolver) to the fingerprint the caller sent. A
// calendar period is computed by the owner, in the policy's time zone, and the caller states
// its length at the decision's time. A policy with levels places a key by its first level
// (limiter.Policy.RouteKey): the owner of org-1 holds org-1, its teams and its users, and
// decides every level of a request in one step; a denial names its level (sent as the
// level key's length, a prefix of the key). Service.Quota (GET /v1/quota) of such a key
// lists each level (Backend.PeekLevels, limiter.LevelPeeker): the owner peeks every level on
// its memory (the key's plan's variant) with cost 0, charging nothing; another instance
// asks the owner by one signed POST to Path whose first byte is a peek's kind, not the
// batch's version (peek.go), answered with each level's numbers and key length. A stale
// owner is asked again once at the new one, as a decision is; no owner, a timeout (the
// policy's), or an owner that does not decide is an error (on_backend_error does not apply
// to a peek), which Quota reports as limiter.ErrBackendUnavailable. An owner from before
// peeks refuses one as a batch of an unknown version: Quota then gives the key's numbers
// without levels, and the caller logs it.
//
// A partition leaves an instance only between decisions: OnGeneration (chained after the
// cluster's generation hook, before the consumer revokes anything) takes the ownership
// lock every decision holds for reading. The window in which two instances could both
// decide one key is the rebalance itself: the old owner stops at the start of its new
// generation, the new one starts after restoring (below), which waits for the old one's
// final checkpoint.
//
// # Checkpoints and handover
//
// Every CheckpointConfig.Interval (--limiter-checkpoint-interval, 1 s) the owner writes
// one record per partition it owns to the compacted topic <topic>.slide-limiter (created
// with cleanup.policy=compact and the events topic's partition count when missing), keyed
// group/partition: every live key of the cluster policies in it, each with its policy's
// fingerprint, its expiry and its state (limiter.Memory.Export). A partition whose keys
// take more than 512 KiB (about 8,000 keys at ~62 bytes each) is written in parts: records
// keyed group/partition#i, acknowledged before the partition's record, which names them,
// since a broker refuses a record past its message.max.bytes (1 MB by default). A part ends
// before an entry that would carry it past 512 KiB, so a key larger than that goes alone
// in one. The largest key, a sliding log of MaxLogLimit (100,000) entries, fits one record:
// limiter.Memory.Export writes a log of more than 1,024 entries as differences (~5 bytes
// an entry for 100,000 an hour; 700 KB for 100,000 spread over the longest window), where
// absolute instants took ~12 bytes an entry and 1.2 MB for 100,000, and every checkpoint of
// the key's partition failed, so a new owner admitted the key's whole limit again. So one
// key's entries are never split across parts, and no sliding_log limit is refused for its
// checkpoint's size. A slide from before this refuses such a log's state (its restore
// counts it refused) and reads a smaller log's, which keeps the absolute form for it:
// during a rolling upgrade only logs of more than 1,024 entries can start afresh. A reader
// takes a record with all its parts or not at all. A partition that leaves
// the owner gets a final record (flagged so, with the generation), then its keys are
// dropped here; Close (SIGTERM, after the API drained and before the consumer leaves the
// group) writes the final record of every partition owned. A final write is logged with
// its partitions and their keys in all, to set against the next owners' restore lines
// ("keys", one a partition, less the keys expired meanwhile).
//
// A new owner restores a gained partition before deciding it: it reads the tail of the
// checkpoint partition for the latest record of the partition and takes it at once when
// it is final and of this or the previous generation (the predecessor handed it over)
// and not the final record this instance itself wrote when it last lost the partition
// (handed back a generation later, its own record is older than the predecessor's),
// else waits up to CheckpointConfig.Wait (two intervals) for one, then takes the latest
// there is; it stops waiting as soon as the group, described after the generation began,
// has no member at the predecessor's address (it crashed, and its session ran out). The
// predecessor is the owner the view names when the generation begins; a view naming this
// instance itself (already the new generation's, or a process that ran before this one at
// its address) names none: the restore then waits for a final record whenever the
// partition has checkpoints, so a process restarted at the address of one that crashed
// waits the whole Wait (taking that one's "nothing to wait for" let a restore read the old
// owner's periodic record before its final one). The partitions gained in one generation restore side by side, so a whole group restarted
// waits about Wait, not Wait per partition; one whose checkpoint cannot be read at all
// starts empty, logged as a warning. A restore takes a record's keys only once the group
// was described (each key is checked against the topic's partition count, which an
// instance just started may not know yet at its first generation).
// Meanwhile its decisions answer StatusNotReady, the callers decide by on_backend_error,
// and Backend.Restoring names the partitions still restoring (slide serve's /readyz:
// Backend.Ready holds an instance's first readiness, later restores are named in its 200).
//
// An owner stopped past its session (SIGSTOP, a long pause, a starved machine) is
// expelled: the group goes on without it and its partitions' new owners restore its last
// checkpoint. Once it wakes and its view of the group, described after its generation
// began, has no member at its address, it stops deciding its partitions (checked every 100
// ms; its own requests for their keys follow on_backend_error until it rejoins) and
// forgets their keys, writing no final record; the generation in which it rejoins restores
// every partition it is assigned, even one it held before, from the latest owner's
// checkpoint. Before, it went on deciding from its stale memory until its consumer
// rejoined and, handed the same partitions, never restored them: the others' decisions
// while it was out were lost.
//
// So a planned handover loses nothing, and a SIGKILL loses the decisions since the last
// checkpoint, at most an interval's (plus the write's own time): a key may then admit up
// to that many beyond its limit. Keys expired by the time of the restore are skipped; a
// state that does not fit its policy (another algorithm, negative counts or tokens) is
// refused by limiter.Memory.Import and counted in the restore's log line ("refused"); one
// past the key's numbers (its plan's and, with levels, its own level's limit: a plan cut
// since it was written) is brought down to them, so the key stays denied as it would in
// memory rather than start afresh. The records are decoded
// bounded (FuzzDecode), since anyone who can write to the topic can write one.
package clusterlimit
