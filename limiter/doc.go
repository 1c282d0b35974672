// Package limiter makes slide's admission decisions: "may key K spend cost c
// under policy P now?", in-process or cluster-wide through Redis
// (limiter/redislimit), answered as a Decision; over HTTP (POST /v1/allow) and by
// a middleware in front of an http.Handler through limiter/limithttp.
//
// # Algorithms
//
// Every algorithm is a pure state transition over a small struct that takes
// now as an argument, shared by the memory backend and the tests; the Lua
// scripts of limiter/redislimit mirror them, and limitertest runs one conformance
// suite over both. Windows are aligned to the Unix epoch, but for a fixed_window with a
// Calendar: calendar_day, calendar_week (from Monday) or calendar_month (from the 1st) in
// its Location (IANA, default UTC), so a period starts at local midnight and a day is 23
// or 25 hours across DST; RetryAfter and ResetAfter reach the boundary exactly and
// Decision.Window is the period's own length. The memory backend caches the current
// period (a decision in it compares two integers); the Redis script is told the period
// as it is told a window (below), its counter named by the period's start.
//
//   - fixed_window: a counter per window floor(now/window). One integer per
//     key, but a burst across a boundary is admitted twice: 100 requests at
//     59.9 s and 100 at 60.1 s with 100/min are all 200 admitted.
//   - sliding_log: the admitted requests in (now−window, now], each a timestamp
//     and the running total of units up to it. Exact; one entry (16 bytes in
//     memory, one sorted-set member in Redis) per request whatever its cost, so
//     a key holds at most min(requests, limit) entries (limit ≤ 100,000) and a
//     cost of 100,000 is one entry, not 100,000. RetryAfter is when enough old
//     units leave (found by binary search over the running totals): oldest +
//     window − now for cost 1.
//   - sliding_counter: floor(prev × (window−elapsed)/window) + cur, the
//     weighted estimate of the previous window; two counters per key. On the
//     burst above it admits 101 (at 60.1 s the estimate is 99.8, room for one).
//     The estimate is computed in integers, so memory and Redis agree exactly.
//   - token_bucket: capacity tokens, refilled lazily at refill_per_second;
//     bursts up to capacity, long-run rate refill_per_second. Capacity 10 at
//     5/s admits 10 of 12 at t=0 with RetryAfter 200 ms, then 5 of 6 at 1 s.
//     Tokens are float64; a bucket within a billionth of a token (and a few
//     ulps of its capacity) of a whole number holds it, so a request arriving
//     as its token is due is admitted as in exact arithmetic, on memory and
//     Redis alike (the conformance suite replays 1,500 requests a bucket
//     against rational arithmetic).
//   - leaky_bucket: the leaky bucket as a meter (GCRA, as nginx limit_req and
//     redis_rate): one "theoretical arrival time" per key. With max_delay it
//     shapes instead of policing: a request that would overflow is admitted
//     with Decision.Delay (≤ max_delay) to wait, and denied only beyond it.
//
// RetryAfter is exact: waiting exactly RetryAfter admits the same request if
// nothing else happens, and any earlier instant does not (tested as a
// property over random traffic). ResetAfter is the time until the key is
// back to its initial state (Remaining == Limit).
//
// A new algorithm is: its Algorithm constant and policy-file name and the fields it
// takes (policy.go: Validate, params), its state transition over now
// (algorithms.go) and its state in the memory backend (memory.go), its Lua script
// mirroring that transition (limiter/redislimit/scripts/NAME.lua, listed in
// redislimit's script table, redis.go), and the README's policy section; the
// conformance suite (limitertest) then runs it over memory and Redis alike, and
// the backtest replays it as it is.
//
// # Cost
//
// A request spends cost units (default 1). Cost 0 peeks: the decision
// reports whether a request of cost 1 would be admitted now, with the current
// Remaining, and changes nothing (no Redis write either). While Redis is down,
// a peek of a policy whose on_backend_error is local reads the in-memory count
// like its other requests (a fresh key: the full quota, not Untracked), as
// envoyproxy/ratelimit answers hits_addend 0 with its counter; under open it
// is Untracked, as any admission nothing counted. A cost above the
// policy's quota (limit or capacity) can never be admitted and is refused
// with ErrCostOverLimit (HTTP 400) rather than denied with a meaningless
// RetryAfter.
//
// # Backends
//
// Memory keeps per-key state in a sharded map: one hash, one shard lock and
// one map probe per decision (the shard's last key skips the probe). The key is
// hashed once, by a seeded hash inline for keys up to 16 bytes (maphash beyond),
// which picks the shard and keys its map, so a probe compares key bytes only for the
// entry it finds. A token bucket past its limit keeps the instant its denied cost is
// next admitted, so a flood of one key costs a compare, not a refill solve, per
// denial. No allocation for an existing key, nor for a new key that takes an
// evicted one's place; idle keys dropped by a lazy sweep, and two
// budgets per policy: MaxKeys and MaxBytes (`slide serve --limiter-max-bytes`,
// default 256 MiB: each key's entry, key and map slot, estimated, plus a
// sliding log's ring). When a new key would pass either, the least recently
// used keys whose state is back to initial make room (dropping them changes
// no decision). A key with live state is never evicted for a new one: that
// handed a denied key a fresh allowance. When only live state is left (at
// most 4 keys are looked at, so admission stays O(1) when full), the new key
// (or a sliding log's growth) is refused with ErrStoreFull and decided by the
// policy's on_backend_error: open (the default) admits it untracked and
// Degraded, closed refuses it with ErrBackendUnavailable (503). Refusals are
// counted in slide_limiter_store_full_total. Its clock must be monotonic: the default MonotonicClock
// reads the wall time once and advances it with the monotonic clock, so
// windows align to the minute but a clock step (NTP, an operator) neither
// frees nor freezes quota. Memory is per process: N instances behind a load
// balancer admit up to N× the limit, silently (the scale-out test shows 1,000
// admitted of 1,000 for 10 pods at 100/min); use it only for limits that are
// meant per instance. Backend cluster (limiter/clusterlimit, Config.Cluster) keeps the
// same Memory state exact across instances without Redis: each key lives on one owner
// instance of the consumer group and the others forward to it.
//
// The Redis backend runs one Lua script per algorithm (EVALSHA, and EVAL
// only after NOSCRIPT), reading the server's TIME so every instance shares
// one clock, with unique members in the log, fractional tokens kept as
// strings, the TTL set in the same script, and keys rl:{key}:policy:alg
// whose hash tag is the caller's key, so Redis Cluster works and all the
// policies of one key share a slot (a key starting with '}', which would make
// the tag empty, is tagged with its hash instead: rl:}{H}key:policy:alg). The same 10 pods admit exactly 100.
// A fixed window is one INCRBY in its script, on an integer string per window,
// rl:{key}:policy:fw:N for window number N, which expires when the window ends
// (a denial is taken back in the same script, so it counts nothing); on a
// single server the fixed-window calls that arrive while one is in flight are
// decided together in one script call (redislimit.Config.Pipelines). Counters
// of the older format (a hash at rl:{key}:policy:fw) are not read: a fleet
// upgraded mid-window counts that window afresh, once.
// Every script starts with a `#!lua` shebang (Redis 7 or later): Redis then
// refuses it with OOM before its first write when it is over maxmemory
// (without it, a script whose first write was a trim was let through to its
// ZADD past maxmemory under noeviction). A call adds at most one log entry
// and does O(log N) work besides the entries it trims (each trimmed once), so
// no cost makes one call block Redis. A sliding log written by an older slide
// (one member per unit) is restarted once, on its first call after the upgrade.
//
// # Failure modes
//
// A Redis policy bounds each call with its timeout (default 50 ms; 1 ms to
// 1 m, since no round trip fits under a millisecond and such a policy would
// answer 503 with Redis healthy). On a timeout or error, on_backend_error
// decides (for a memory policy: its store full of live state, above;
// open or closed only):
//
//   - open: admit (Decision.Degraded; the outage of the limiter does not
//     become an outage of the service), uncounted, so the answer claims no
//     quota (Decision.Untracked: no RateLimit headers from it, "remaining":0);
//   - closed: refuse with ErrBackendUnavailable, HTTP 503 (login, OTP, where
//     failing open invites brute force);
//   - local: decide with an in-process limiter of the same policy (each
//     instance then enforces the limit on its own share), by the key's
//     numbers as Redis would: its plan's, or those SetLimits gave.
//
// A failed call is never retried: it may have run, and a second run would
// count the request twice (limiter/redislimit refuses go-redis clients that
// retry). Only NOSCRIPT, which proves the script did not run, is answered
// with EVAL. Decisions recover by themselves when Redis returns.
//
// Hot keys: a denial from Redis is cached locally as "denied until now +
// RetryAfter" for that key and cost, so a key flooding at 10× its limit costs
// one round trip per admitted request plus one, not one per request. The
// cache is exact, not a guess: scripts never count denials and other
// instances can only consume more, so nothing but a reset of the Redis state
// could admit the request earlier. A denial answers only decisions by the
// numbers it was made by: a key moved to a bigger plan (plans file or topic)
// or given a raised limit (SetLimits) asks Redis again at once.
//
// # Several policies in one request
//
// Service.Decide (and {"policies":[...]} over HTTP) decides a request against
// several policies: the Redis ones in one pipelined round trip. It is denied
// if any denies. Every policy is charged independently: the policies that
// admitted the request are charged even when another denies it, as in
// Envoy's ratelimit service and gubernator (a per-user allowance is spent by
// a request the per-tenant limit refused; all-or-nothing would need a second
// round trip or a single-slot script). The request's decision is the denial
// with the longest RetryAfter, or, when all admit, the decision nearest its
// limit (least Remaining; an admission nothing counted, Decision.Untracked,
// only when none was counted: its Remaining vouches for nothing). A real
// denial outranks a closed policy's backend failure: 429, not 503.
//
// # Levels
//
// A fixed_window policy with Levels (levels: {separator: "/", limits: [50, 30, 20]})
// charges every level of org-1/team-a/user-7 (org-1, org-1/team-a, the key) in one
// decision, all or none: the first level without room denies (Decision.Level names it)
// and no level is charged. A key starting with the separator, whose first level would be
// empty, is refused with ErrEmptyLevel (an ErrInvalidKey). In memory the levels' shards are locked in ascending order
// (so two decisions never wait on each other in a cycle) and each level decided on a
// copy of its state, written back only when all admit. In Redis one script charges every
// level (an INCRBY each) and takes every charge back in the same call when one level is
// over; its keys rl:{org-1}:policy:fwl:N:LEVEL all carry
// the first level's hash tag, so Redis Cluster serves them from one slot (all of an
// org's traffic lands there). A level's denial is not put in the deny cache.
//
// # Plans
//
// Service.SetPlans (slide serve --plans) maps keys, exactly or by glob (the most
// specific wins), to plans, and a plan gives a policy its own limit, capacity, rates or
// level limits and a usage rule (a PlanChecker) its max; a key without a plan gets the
// policy's. Under levels each level's limit is that of its own key's plan (org-1's plan
// sets org-1's limit whichever of its users asks: one counter, one limit). The plans are checked whole against the policies and rules, each problem at
// its file:line, and swapped in atomically; a refusal keeps the plans in use
// (slide_limiter_plan_updates_total counts both). SetKeyPlans sets single keys' plans
// (a billing system's topic), winning over the file's. A decision costs one more atomic
// load without plans, and a map probe (plus the globs, for a key not listed) with them;
// Decision.Plan names the plan. A key whose plan changes keeps its state, judged by the
// new numbers from its next decision (a leaky bucket's state is a time, its theoretical
// arrival time, so its backlog keeps its length in time, not in requests). Service.Quota peeks (cost 0, nothing charged) and reports
// limit, used, remaining, reset and each level: GET /v1/quota.
//
// Shadow policies (shadow: true) decide and count but never deny: the
// decision is admitted with Shadowed set, and the metric result is
// shadow_denied, so a new limit can be observed before it is enforced.
//
// Checkers are named checks consulted like policies: usage rules that read
// window.Store plug in through this interface and deny with their own name
// and RetryAfter.
//
// # HTTP
//
// The HTTP face (POST /v1/allow, the middleware, the rate-limit headers) is
// package limiter/limithttp: this package is the core and imports no net/http,
// nor does a package of this module under it (TestCoreImportsNoNetHTTP), as
// client_golang keeps promhttp apart from prometheus.
//
// # Metrics
//
// Registered on the Registerer given to NewService:
// slide_limiter_decisions_total{policy,result} (allowed, denied,
// shadow_denied, error), slide_limiter_backend_errors_total{policy,reason}
// (timeout, error), slide_limiter_backend_duration_seconds{backend} (a
// histogram exposed as client_golang's, whose observations go to one of a few
// shards summed at a scrape: no count that every core writes),
// slide_limiter_deny_cache_hits_total{policy}, and for every in-process store
// (memory policies, local fallbacks) slide_limiter_keys{policy},
// slide_limiter_bytes{policy}, slide_limiter_evictions_total{policy} (idle
// keys dropped to make room) and slide_limiter_store_full_total{policy}.
// DecisionCounter hands the decisions counter to code that decides without a
// Service (package rls's blocks and limit overrides), so it counts in the same
// series; a Service registered on the same Registerer shares it.
package limiter
