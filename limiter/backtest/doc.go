// Package backtest replays a recorded request log through slide's limiter algorithms, with
// each request's own time as now: "what would this limit have done to last week's traffic?"
//
// Every policy runs on the memory backend (limiter.Memory) with its clock never read:
// AllowN gets the request's timestamp, so a replay is deterministic and runs as fast as the
// log can be read. The Redis backend runs the same algorithms as Lua scripts (limitertest
// checks they agree), so a Redis or cluster policy replays here with the memory backend's
// answers (its timeout and on_backend_error, about a hop the replay does not make, unread); the
// live server, given the same requests at the same instants, answers exactly as the replay
// (tested through POST /v1/allow with a fixed clock).
//
// A request that names a policy is decided by that policy only; one without is decided by
// every policy of the replay, each with its own state, as if each were the only limit (not
// as a multi-policy request, where one policy's denial does not refund another's charge).
// Shadow policies count what they would have denied. A cost above a policy's quota can
// never be admitted: it is counted as denied and in OverQuota.
//
// A log is read (ReadLog) by the rules of events, package event's, one set for every door: a
// metric event is decoded by event.Decoder, and a request's ts and key are read by its field
// readers, so a log line holds what ingest and POST /v1/events would take and no more (a ts
// of "1764489600123", a key with a NUL or invalid UTF-8 are errors naming the line). The
// log must be sorted by time (equal times are fine): an earlier request stops the
// replay with ErrUnsorted naming its line, as slide batch does. A log out of order by a
// bounded time (an access log written as requests end, stamped with their starts) goes
// through Reorder first (slide backtest --reorder), which hands it on in time order. Memory is O(keys held by
// the limiters, bounded by Config.MaxKeys, + distinct denied keys + timeline buckets).
//
// A log of another shape (an access log) is read through one of event's Formats instead
// (ReadFormatLog, slide backtest --event-map): each line is a request of cost 1 by its first
// event's key at that event's time, followed by its events as metric events.
//
// A log of OpenTelemetry spans (ReadSpans: OTLP/JSON requests a line, or OTLP/protobuf
// requests each after its 4-byte length) replays each span as a request of cost 1 of its key
// (service.name) at its end, then its duration_ms event; the spans are read whole and sorted
// by time first, since exporters batch them out of order, so such a log needs not be sorted.
//
// A report per policy has the allowed and denied counts, the most denied keys and the denial
// timeline (buckets of Config.Bucket with at least one denial).
//
// Usage rules (Config.Rules) replay from the log's metric events (Request.Metric set): each is
// recorded into a window.Store with Config.Store's rings at its own time (the store's now is
// the replay's), and each request is checked against the rules like a policy, by the same
// usage.Checker the server runs. Events the store refuses (older than the ring's retention,
// bad values) are counted in Replayer.Refused, not fatal. The rings must be the server's for
// the answers to be its answers.
//
// Plans (Config.Plans, slide backtest --plans) replay as slide serve --plans decides: each
// key with its plan's numbers, on the policy's state (a variant of its limiter, so the
// levels of keys on different plans share their org's counter); the most denied keys name
// their plan; a policy with levels takes each level's limit from its own key's plan, as
// the server does. Calendar windows and levels replay as they are (the memory backend's).
//
// The first article's boundary burst (100 requests at 10:00:59.9 and 100 at 10:01:00.1,
// limit 100 per minute) replays as 200 allowed by fixed_window, 101 by sliding_counter and
// 100 by sliding_log.
package backtest
