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
// every partition, each restored (Config.Restored). OnGeneration clears it before the
// consumer revokes anything, so a read never comes from this instance alone once others
// own part of the topic; and an instance that gains the last partitions in a rebalance
// reads through the cluster until they are restored, so they are missing, not short.
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
// wanted), merges them by key and ranks; /v1/series asks each owner for one page of its
// series (below) and /v1/metrics for every series, to count them. A key matches the key label of a series string (window.Selector), so
// an exact key merges every series of that key, labelled or not. A read with label matchers
// or by-labels (match=, by=) asks each owner for one partial per group (MergeGroups, the
// groups op: the matchers and labels travel with the request, window.GroupPartials come
// back) and merges them group by group; a peer whose series fall in more than
// window.MaxGroups groups says so, and the read is refused with window.ErrTooManyGroups
// rather than answered short.
//
// Each peer request names the partitions it asks for, and the peer serves only those it
// owns and has restored, and says which (an answer claiming any other is refused as
// corrupt). Series fed by no partition (POST /v1/events) are served only by the instance
// holding them. So no partition is counted twice, even while ownership moves. A read
// during which the consumer's generation changed (ingest.Consumer.Generation: a revocation
// may have dropped series mid-read) counts the partitions it read as missing rather than
// short, on the peer and locally.
//
// PromQL (package promapi) cannot use a merged partial: its series are cumulative over the
// slots, one sample per slot end; nor can /v1/range, whose points are windows at every step.
// VisitSlots (VisitSlotsKey with the query API's key beside the matchers) asks each owner for the live slots of its
// series a selector matches (opSlots, see slots.go: index, count, sum, min, max and bins per
// slot of the rings as they stand at the asker's now, up to the read's instant) and hands them with this instance's own, merging slot by
// slot a series string two instances hold; Metrics lists every instance's metric names
// (opMetrics); VisitExemplars (query_exemplars) asks each owner for the exemplars of its
// series a selector matches (opExemplars, see exemplars.go) and keeps, per slot of a series
// two instances hold, the one window.Exemplar.Before puts first, as one store would.
// VisitExtents (promapi's listings: label names and values, series) asks each owner for
// the current and first live slot of its series a selector matches (opExtents, see
// extents.go), all a listing needs, instead of their slots. A peer of an older version
// answers "unknown op", and its partitions count as missing; but one that does not know
// opExtents is asked opSlots instead, so listings answer alike during a rolling upgrade
// (counted as result="older_version" and said at INFO once per peer a minute: expected
// then, not a failed read).
//
// # Listing series a page at a time
//
// Keys (GET /v1/series) sends each owner the page it wants beside the op's metric and key
// (the prefix): m, the label matchers (as opGroups writes them); after_metric and
// after_key, the cursor (the last series of the page before; the page starts strictly
// after it); and limit, the most series to answer (the page and one more, so the asker
// knows whether another follows). The owner scans its series once, keeps the first limit
// in (metric, series string) order in a bounded max-heap (no sort of all it holds) and
// answers them sorted; the asker merges its own page and the owners', drops the series
// two instances hold twice, and keeps the first limit. A page of 100 thus moves at most
// 101 series from each owner, whatever the number it holds (measured: 2.4 KB against
// 2.1 MB, and about a sixth of the time, at 200,000 series, internal/benchreport/by-hand.md). A
// request without limit answers every series, as before (an asker of an older version,
// and /v1/metrics). An owner of an older version never reads these fields (the peer
// route reads its parameters by name and ignores others; a signed request signs its raw
// query, fields and all) and answers every series of the metric with the prefix: the
// asker cuts each answer by the same cursor, matchers and limit, so the page is the same.
//
// Answers are binary (see codec.go: varints, the bins' own compact encoding), versioned,
// bounded (Config.MaxAnswerBytes) and fuzzed (FuzzDecodeAnswer).
//
// # One hop to a key's owner
//
// A read of one exact key (Merge, and MergeGroups with label matchers beside it) and a
// usage decision go to one owner only when the owner is known, and it is known only when
// Config.KeyPartitioner declares that every producer of the topic partitions records by
// key with murmur2 (--key-partitioner murmur2: the Java client's default, kafka-go's
// Murmur2Balancer, slide produce), keyed by the events' own keys. The read then asks the
// owner of murmur2(key) mod partitions alone, and only that partition can be missing.
// Globs, top-k (Each), listings (Keys, Metrics) and PromQL's slots always fan out. A
// record whose events carry other keys than the record's (OTLP spans, an --event-map)
// breaks the declaration for those keys.
//
// Nothing else makes the owner known, so the fan-out stays the default. That slide produce
// keys by murmur2 says nothing of the topic's other producers; that the limiter's cluster
// backend (limiter/clusterlimit) sends each key's decisions to murmur2's owner places its
// limiter state, not the topic's events; that this instance holds a key on a partition
// does not say that no other partition holds it too. A one-hop read that guessed would
// miss those events and answer short without knowing it, which a read never does. What an
// instance can see is evidence against the declaration: every KeyCheckInterval (1 min)
// CheckKeyPartitioner (keycheck.go) looks for series whose key murmur2 places on another
// partition than the one that fed them. With the flag declared, one found turns this
// instance's routing off (its reads fan out again, exact) and is logged and exported in
// slide_cluster_key_partition_mismatches, which must stay 0 on every instance; without
// the flag, a store of at least 1,000 keyed series that all agree with murmur2 logs a
// one-time hint naming the flag. Partitions added to the topic move murmur2's answer for
// most keys while their earlier events stay where they were: the check then finds those
// series, and routing stays off until they have left the windows and the instance restarts.
//
// The hop itself is one signed GET made on the reading goroutine (no goroutine, channel or
// owner map: those are for two owners and more) over the peers' keep-alive connections,
// the Transport that PostPeer's signed POSTs use too: no TCP or TLS handshake per read
// once a connection to the owner exists. BenchmarkClusterOneHop measures it against a
// local read (p50 and p99, goal: p99 at most 2× the local read's + 1 ms).
//
// # Failure: never silently partial
//
// Every read returns the partitions that neither this instance nor an answering peer
// served: the owner is unreachable, hung past the deadline (Config.Timeout, --peer-timeout,
// 1 s, for the whole fan-out), refused the request, answered garbage or an answer that does
// not prove itself, or is restoring the partition. The query API then answers 503 {"error":{"code":"unavailable",...,
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
// 1 s; the flag's 0 is no cache), never from an earlier slot than now's, and dropped at
// every generation. A burst of decisions on one key thus costs one fan-out per key and
// second (a read that missed partitions is cached as well, so a hung peer costs one
// deadline per key and second, not one per decision); the decision reports the age of the
// remote part it used as "stale_ms". A quota can therefore be overshot by what
// peers ingested in that last second, on top of the usage still in flight that every
// usage-based quota admits.
//
// # Peer requests
//
// GET PeerPath (/internal/v1/partial, on the same listener as the API) carries HeaderPeer
// with the sender's address and HeaderDeadline; the peer does not start a read whose
// deadline has passed, and stops one whose asker has gone or whose deadline passes, or
// after 30 s whatever the request says (it looks at the request's context every 256
// series, as the asking side's local scan does with its client's; it then writes nothing
// and counts code 499). The peer handler reads its local store only
// and never asks another peer, so a request cannot loop.
//
// A peer read is a read (issue #25): it changes nothing. window's reads never move a ring
// (a read at a later now computes the window there), and the peer route only reads. The
// asker's now is taken only within the metric's ring skew (--max-skew; 0 means one slot of
// the metric's ring, and never less than MinPeerSkew, 1 s) of this instance's clock
// (Config.Now), either way; further off, the request is refused with 409, counted in
// slide_cluster_peer_served_total{code="409"}, and the asker counts those partitions
// missing. Within it, the peer reads at the asker's now rather than its own clock, so that
// every owner of one fan-out covers the same slots: at its own clock a read near a slot
// boundary would mix spans by the clocks' disagreement.
//
// # Peers prove themselves
//
// With a group key every peer request and every answer is authenticated both ways by
// Auth (auth.go), an HMAC-SHA256 under the key: the asker signs the method, the peer's
// advertised address, the path, the raw query, its timestamp and a fresh nonce
// (HeaderTimestamp, HeaderNonce, HeaderSignature); the peer checks the MAC in constant
// time, the timestamp within DefaultAuthWindow (30 s) of its clock and that the nonce is
// new, or answers 401 (slide_cluster_peer_served_total{code="401"}), then signs its
// answer's bytes together with the request's nonce. An answer without a MAC that verifies
// (forged, signed with another key, or replayed from an earlier request) is not merged:
// its partitions are missing (503, or flagged with partial=allow), and the asker counts it
// as slide_cluster_peer_requests_total{result="unauthenticated"}, as it does a 401 from a
// peer that does not trust it. A request captured on its way to one member is good
// nowhere else: it names its addressee, and its nonce is spent there.
//
// The key is Config.PeerKey (--peer-key-file, at least 32 bytes), or, with only the API's
// bearer token (--auth-token-file), KeyFromToken of it (HKDF-SHA256 with a fixed label),
// so a group set up with a shared token stays closed. The token itself is never sent to a
// peer, and no peer credential works on the API. Every instance of a group needs the same
// key; an instance with another key reads none of its peers and is read by none.
//
// What each setting protects: the key keeps non-members from reading through the peer
// route and from having their answers merged, and keeps a captured request or answer
// from being used again; it does not keep a process with broker access from joining the
// consumer group (the group's assignment alone decides membership), where it receives
// partitions that then go unconsumed and unanswered (503, never a wrong count). Broker
// ACLs on the group (Kafka's Read on the group resource) keep strangers out of
// membership. Without any key the peer route can still only read, but any member is
// believed. HTTPS (--tls-cert, --peer-ca) encrypts peer reads and authenticates servers,
// and with --client-ca the connections too; the HMAC works the same over it, so the two
// combine: TLS for secrecy on the wire, the key for who may read and answer.
//
// slide_cluster_peer_requests_total{op,result} and
// slide_cluster_peer_request_duration_seconds{op} count and time requests sent;
// slide_cluster_peer_served_total{code} and slide_cluster_peer_served_duration_seconds those
// answered; slide_cluster_members is the group's size in the current view;
// slide_cluster_key_partition_mismatches the series that contradict murmur2 (above).
package cluster
