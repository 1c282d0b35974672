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
// memory decision, with no hop.
//
// # The hop: one signed POST per batch
//
// A non-owner sends the decision to the owner's Path (/internal/v1/limit) on the API
// listener, over the peers' keep-alive HTTP connections, signed with the group's key as
// the partial reads are (cluster.Auth: an HMAC over the receiver, the path and the body's
// hash; the answer signed with the request's nonce). Decisions for one owner are batched
// by group commit: at most Config.MaxInflight (4) batches are on the wire to one owner; a
// decision that finds a slot free leaves at once, and those arriving while every slot is
// busy leave together in the next batch (at most MaxBatch). A lone decision never waits for
// a timer, and under load one round trip carries many decisions. The body is a small binary
// format (codec.go: varints, versioned, bounded, fuzzed by FuzzDecode).
//
// The decision's now is the caller's clock (the Service's), as a Redis policy in client
// clock mode: instances' clocks agree to milliseconds under NTP, and a clock behind by d
// decides as if d earlier.
//
// The policy's timeout bounds the hop (default 50 ms) and on_backend_error (open, closed,
// local: this instance's memory of the same policy) decides when the owner does not
// answer in time, answers an error, or is unknown. A caller that gave up before its
// decision left is not sent, so the owner does not count a decision nobody waits for; one
// that gave up after it left may have been counted (as with Redis).
//
// # Ownership moves
//
// The owner checks each forwarded key's partition against its own assignment of the
// current generation (cluster.Assigned, changed before the consumer revokes anything) and
// answers StatusStale for one it no longer holds; the caller describes the group again
// and asks the new owner once, or, when the group names no other owner yet (it is
// rebalancing), decides by on_backend_error. Every instance must run the same policies:
// each forwarded decision carries its policy's Fingerprint, and an owner whose policy
// differs answers StatusPolicy rather than count by other numbers.
package clusterlimit
