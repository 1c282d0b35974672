// Package cluster makes several slide instances in one Kafka consumer group answer as one
// engine: any instance answers any read (/v1/window, /v1/top, /v1/series, /v1/metrics,
// usage rules) over the whole topic, equal to what one instance owning every partition
// would answer, or says which partitions it could not cover. window knows nothing of it
// and ingest serves nobody: this package owns membership, routing and merging.
//
// # Membership: the consumer group, nothing else
//
// Ownership is the group's assignment. Each member advertises its HTTP address in its join
// metadata (the user data of kafka-go's group balancers, ingest.Config.MemberData =
// MemberData(addr), as Kafka Streams' application.server), and every instance learns
// partition → member → address by describing the group: at the start of every generation
// (ingest.WithGenerationHook → OnGeneration) and every Config.Refresh (2 s). Only a Stable
// group's answer replaces the view; while the group rebalances the previous view stays,
// and the partitions' owners say themselves what they still serve (below). There is no
// gossip and no registry of our own.
//
// The advertised address is --advertise-addr, or --addr when that names a host (with this
// host's name and --addr's port when --addr is a wildcard such as :8081). It must be an
// address the other instances can reach; CheckAdvertise refuses wildcards and port 0.
//
// # One instance: no hop
//
// An instance assigned every partition answers from its store exactly as before: Local is
// one atomic load, true once the group was described and this member's assignment covers
// every partition. OnGeneration clears it before the consumer revokes anything, so a read
// never comes from this instance alone once others own part of the topic.
//
// # Routing and merging
//
// Producers' partitioners differ (Java clients murmur2, librdkafka crc32, kafka-go round
// robin by default), so a key's partition cannot be computed in general, and one key may
// even live on several partitions. A read therefore fans out to the owner of every
// partition this instance does not serve, in parallel, and merges their partial
// aggregates (window.Partial: count, sum, exact min and max, the sketch's bins) with its
// own. Partials of disjoint partitions merge exactly — count and sum add, min and max
// compare, bins add bucket by bucket — so counts, sums, min and max equal one instance's,
// and quantiles come from the same merged bins, within the same 1%. A glob merges into one
// partial on each owner (one small answer per owner, whatever the number of series);
// /v1/top asks each owner for one partial per series (bins only when a quantile is
// wanted), merges them by key and ranks; /v1/series and /v1/metrics merge the owners'
// sorted key lists.
//
// When Config.KeyPartitioner declares that every producer partitions by key with murmur2
// (--key-partitioner murmur2), a read of one exact key (and a usage decision) routes to the
// owner of murmur2(key) mod partitions only: the instance can know the owner, so one hop
// replaces the fan-out, and only that partition can be missing. Globs, top-k and listings
// always fan out.
//
// Each peer request names the partitions it asks for, and the peer serves only those it
// owns and has restored, and says which (an answer claiming any other is refused as
// corrupt). Series fed by no partition (POST /v1/events) are served only by the instance
// holding them. So no partition is counted twice, even while ownership moves. A read
// during which the consumer's generation changed (ingest.Consumer.Generation: a revocation
// may have dropped series mid-read) counts the partitions it read as missing rather than
// short, on the peer and locally.
//
// Answers are binary (see codec.go: varints, the bins' own compact encoding), versioned,
// bounded (Config.MaxAnswerBytes) and fuzzed (FuzzDecodeAnswer).
//
// # Failure: never silently partial
//
// Every read returns the partitions that neither this instance nor an answering peer
// served: the owner is unreachable, hung past the deadline (Config.Timeout, --peer-timeout,
// 1 s, for the whole fan-out), refused the token, answered garbage, or is restoring the
// partition. The query API then answers 503 {"error":{"code":"unavailable",...,
// "missing_partitions":[...]}}, or with partial=allow a 200 flagged "partial":true with
// "missing_partitions". Usage rules follow their on_unavailable (open by default: allow,
// degraded; closed: 503), except that a count, max or non-negative sum already over the
// limit in what could be read is denied either way. Before the group was described once, the topology is unknown and
// a read reports the single missing partition UnknownPartitions (-1); readiness waits for it.
// slide_cluster_unavailable_total{caller} counts such reads.
//
// # Usage rules and staleness
//
// A usage decision on an instance that does not own the key reads this instance's part
// fresh and the peers' part from a cache at most Config.Staleness old (--usage-staleness,
// 1 s), never from an earlier slot than now's, and dropped at every generation. A burst of
// decisions on one key thus costs one fan-out per key and second (a read that missed
// partitions is cached as well, so a hung peer costs one deadline per key and second, not
// one per decision); the decision reports the
// age of the remote part it used as "stale_ms". A quota can therefore be overshot by what
// peers ingested in that last second, on top of the usage still in flight that every
// usage-based quota admits.
//
// # Peer requests
//
// GET PeerPath (/internal/v1/partial, on the same listener as the API) carries the
// instance's bearer token when one is configured (--auth-token-file: every instance of a
// group must share it; compared in constant time), HeaderPeer with the sender's address,
// and HeaderDeadline; the peer does not start a read whose deadline has passed, and stops
// one whose asker has gone (it looks at the request's context every 256 series, as the
// asking side's local scan does with its client's; it then writes nothing and counts code
// 499). The peer handler reads its local store only and never asks another peer, so a
// request cannot loop. slide_cluster_peer_requests_total{op,result} and
// slide_cluster_peer_request_duration_seconds{op} count and time requests sent;
// slide_cluster_peer_served_total{code} and slide_cluster_peer_served_duration_seconds those
// answered; slide_cluster_members is the group's size in the current view.
package cluster
