// Package rls is slide as Envoy's global rate limit service: a gRPC server of
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit (the types of
// github.com/envoyproxy/go-control-plane), configured with envoyproxy/ratelimit's
// YAML files unchanged, deciding through a limiter.Service, so every request
// takes the path of POST /v1/allow: slide's algorithms, the Redis scripts, the
// deny cache, shadow mode, failure modes and metrics.
//
// # Configuration
//
// Load reads one file or a directory of *.yaml files, one domain each, in
// envoyproxy/ratelimit's format:
//
//	domain: shop
//	descriptors:
//	  - key: client_id              # one counter per value
//	    rate_limit: {unit: minute, requests_per_unit: 20}
//	  - key: client_id
//	    value: partner              # an override for one value
//	    rate_limit: {unit: minute, requests_per_unit: 30}
//	  - key: client_id
//	    value: internal             # no rate_limit: allowed
//	  - key: tenant
//	    value: acme
//	    descriptors:                # nested: tenant=acme, then path
//	      - key: path
//	        rate_limit: {unit: second, requests_per_unit: 5}
//	  - key: path
//	    value: /api/*               # wildcard: '*' matches any run of bytes (window.MatchKey, the API's key glob)
//	    share_threshold: true       # all matching values share one counter
//	    rate_limit: {unit: minute, requests_per_unit: 3}
//	  - key: health
//	    rate_limit: {unlimited: true}
//	  - key: ip
//	    shadow_mode: true           # decide and count, never deny
//	    rate_limit: {unit: minute, requests_per_unit: 3}
//	  - key: plan
//	    value: gold
//	    rate_limit:
//	      unit: minute
//	      requests_per_unit: 4
//	      replaces: [{name: per_user}]   # when both match, per_user is not checked
//
// Its fields keep their meaning: unit (second … year), counted as envoyproxy/ratelimit
// counts it: in windows of the unit's length from the Unix epoch (its UnitToDivider), so a
// day is the UTC day, a week starts on a Thursday (the epoch's weekday), a month is 30
// days and a year 365 (recent envoyproxy/ratelimit has an opt-in setting for a UTC
// calendar month; its default, kept here, is the 30 days). For calendar periods use
// slide's window: calendar_day, calendar_week (from Monday) or calendar_month (from the
// 1st), with timezone: (IANA, default UTC), on a fixed_window limit; the answer's
// duration_until_reset then reaches the local boundary. requests_per_unit (0: every request is over the limit),
// name and replaces, unlimited, shadow_mode, quota_mode (such descriptors fail
// the request only when all of them are over), share_threshold. metadata,
// detailed_metric and value_to_metric are accepted and have no effect: slide's
// metrics name the configured descriptor, and no dynamic metadata is returned.
// Every other field is an error naming its line, as are the checks
// envoyproxy/ratelimit makes (empty domain or key, duplicate composite keys, a
// unit with unlimited, bad units, empty or self replaces); a domain in two
// files is an error (no merging).
//
// Server.ReloadFile (slide serve's SIGHUP) loads the config again and swaps it in for the
// requests that start from then on (Server.Reload says what may change): the trees, the
// limits the Server decides itself, and the numbers of the policies the limiter Service
// runs, whose counters are kept (limiter.Service.SetLimits), as envoyproxy/ratelimit keeps
// its Redis counters. A descriptor that maps to a policy the Service lacks, or runs with
// another window, algorithm or backend, or with other usage rules, is ErrNeedsRestart: the
// config in use stays, as it does for a file that does not load. The swap is one to a
// request: one whose cost the old limit held but the new numbers do not (it matched with
// the old config, the limiter had the new numbers when it decided) is started again, with
// nothing charged, under the new config, rather than answered InvalidArgument.
//
// slide's own fields extend a rate_limit: algorithm (fixed_window by default,
// as envoyproxy/ratelimit counts; sliding_log, sliding_counter, token_bucket,
// leaky_bucket), window (a duration instead of unit, e.g. 90s), backend
// (memory or redis), on_backend_error (open by default, closed, local) and
// timeout. The buckets take requests_per_unit as their capacity and refill it
// over the window (token_bucket capacity 4 per second refills 4 a second). A
// descriptor may carry usage rules (limiter/usage), each a rule mapping whose
// name defaults to the descriptor's policy name + ".ruleN" and whose {key} is
// the request value of that descriptor's own entry (a value ingest would refuse
// as a key, such as one over 256 bytes, has no usage: {key} rules allow it):
//
//	descriptors:
//	  - key: tenant
//	    rules:
//	      - {metric: cost, agg: sum, window: 1h, max: 50000}
//
// Limits without a backend field use LoadOptions.DefaultBackend: slide serve
// passes redis when --redis is set (envoyproxy/ratelimit always counts in
// Redis) and memory otherwise; on_backend_error and timeout are ignored on a
// limit that is in memory only for want of --redis, so one file serves both.
//
// # Mapping: descriptor → policy and key
//
// Each descriptor with a quota becomes one limiter.Policy, named
// "rls." + domain + "." + envoy's full key of the descriptor (key, or
// key_value, joined with "." down the nesting): client_id above is
// rls.shop.client_id, the nested path rls.shop.tenant_acme.path. When that is
// not a valid policy name (over 64 bytes, or bytes outside A-Z a-z 0-9 _ . -,
// such as the '/' and '*' of a wildcard), the invalid bytes become '-', the
// name is cut to fit and "-" + 8 hex digits of the FNV-1a hash of
// domain NUL path are appended: rls.edge.path_-api---25e7d542. The names
// appear in RateLimit-Policy, in slide_limiter_* metrics and in Redis keys,
// and POST /v1/allow can name them too (one service decides both).
//
// The limiter key of a request descriptor is the values of all its entries,
// each escaped ('\' → "\\", '|' → "\|") and joined with '|' (a share_threshold
// entry contributes its pattern instead of its value): client_id=c1 is key
// "c1", tenant=acme,path=/cart is "acme|/cart". When that is not a valid
// limiter key (empty, over 256 bytes, or holding a control character) it is
// "\h" + 32 hex digits of the SHA-256 of the length-prefixed values, a form
// escaping never produces. In Redis the state is rl:{KEY}:POLICY:ALG, e.g.
// rl:{c1}:rls.shop.client_id:fw, and a fixed window counts in
// rl:{KEY}:POLICY:fw:N for window number N (limiter/redislimit).
//
// # Matching
//
// As envoyproxy/ratelimit: each entry of a request descriptor descends one
// level of its domain's tree, trying key and value exactly, then the wildcard
// values in file order, then the key alone; the limit is that of the level the
// last entry reaches, so a request descriptor shorter or longer than the
// configured path gets none. An unknown domain or descriptor is OK with no
// current_limit. replaces removes, from one request, every matched limit whose
// name another matched limit replaces.
//
// # Answer
//
// The descriptors of a request are decided together by Service.Decide (the
// Redis ones in one round trip, and on a single redis-server the fixed-window
// ones of concurrent requests in one script call; each is charged even when another is over, as
// in envoyproxy/ratelimit). The cost is the descriptor's hits_addend when set
// (0 checks without charging), else the request's, else 1; a cost above the
// quota (requests_per_unit, or the limit the key's plan gives the policy, above or
// below it) is OVER_LIMIT without charging, until its window ends (for a window that is
// not fixed, a window from now), as a requests_per_unit 0 one is. A cost above
// what remains is OVER_LIMIT and charges nothing too, where envoyproxy/ratelimit
// counts every hit: usage charged after the fact (Envoy's apply_on_stream_done
// with an LLM's tokens as hits_addend) that does not fit is not recorded, so
// count such usage as events and limit it with a usage rule. Each status has its code,
// current_limit (requests_per_unit and the largest unit dividing the window,
// with unit_multiplier when that is not 1: 2 per 90 s is 2 per SECOND × 90;
// for a key whose plan (limiter.Service.SetPlans, slide serve --plans) gives the
// descriptor's policy another limit, that limit in the same unit, the one its
// limit_remaining and headers count from),
// limit_remaining (MaxUint32 when unlimited) and duration_until_reset, the
// time until the key is back to its full quota (at least the time until the
// request would be admitted). A descriptor with usage rules takes the worst of
// its checks. The overall code is OVER_LIMIT when a descriptor not in
// quota_mode is, or when every quota_mode one is. response_headers_to_add
// carries the draft-10 RateLimit-Policy and RateLimit lists of every decided
// descriptor and, when the request is over its limit, Retry-After (whole
// seconds, rounded up): when it would pass, once its descriptors not in
// quota_mode free and, if every quota_mode one is over, the first of those
// frees. Envoy forwards them to the client. With ServerConfig.LimitHeaders
// (slide serve --rls-response-headers) three more follow, as envoyproxy/ratelimit
// sends them with LIMIT_RESPONSE_HEADERS_ENABLED (named RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset by default, as there): the
// current_limit's requests_per_unit, limit_remaining and duration_until_reset in whole seconds
// (rounded up) of one descriptor: the last one over its limit that is not in
// quota_mode, else the first with the least limit_remaining; none when no
// descriptor has a current_limit (unknown, unlimited). A response's
// current_limit and header values may be shared with other responses (a
// limit reuses the headers it built last while their numbers repeat, as a hot
// key's denials do for a second at a time): a caller of Server.ShouldRateLimit
// must not modify them.
//
// # Limit overrides
//
// A descriptor may carry its own limit (RateLimitDescriptor.limit, which Envoy
// fills from a route's limit override). As in envoyproxy/ratelimit it replaces
// whatever the file says for that descriptor when the domain is configured,
// and is ignored in an unknown domain: a fixed window of requests_per_unit per
// unit (0: always over), with hits_addend as the cost and current_limit as
// given, never in shadow mode. It is not a policy of the limiter Service (its
// numbers come with each request): the Server decides it itself, under policy
// name rls-override.UNIT (no file's policy name starts so) and key
// DOMAIN|key=value|… ('\', '|' and '=' escaped; "\h" + SHA-256 when that is
// no valid key), so the same descriptor's configured counter is not charged.
// With ServerConfig.Redis (slide serve passes its --redis backend) it counts
// in Redis, shared by every instance, failing open when Redis fails;
// otherwise in memory, up to 1,024 distinct (requests_per_unit, unit) pairs
// (more are admitted, marked Degraded). The deny cache does not cover it.
// slide_rls_descriptors_total counts it as descriptor "override".
//
// # Errors
//
// A request is refused with InvalidArgument naming the problem when its domain
// is empty, it has no descriptors or more than MaxDescriptors (128), a
// descriptor has more than MaxEntries (32) entries, a domain, key or value is
// over MaxValueBytes (4096), or a descriptor asks for is_negative_hits (not
// supported) or for a limit override without a unit (UNKNOWN; envoyproxy/ratelimit
// panics on it), or a domain that is not UTF-8. A key or value that is not
// UTF-8 is decided as its bytes are (Envoy copies header bytes into them, obs-text
// included, and refusing the request would let one such byte skip every limit
// of it under failure_mode_deny: false): such a key matches no descriptor, such
// a value counts apart (its limiter key hashed). A message that does not
// decode (not protobuf, truncated) is InvalidArgument too, "malformed rate limit
// request" with the decoder's reason: NewGRPC decodes requests itself, since
// gRPC answers Internal for any decoding error and the fault is the client's.
// gRPC refuses a message over 1 MiB (ResourceExhausted) before it is decoded.
// With an auth token a call without "authorization: Bearer TOKEN" metadata is
// Unauthenticated (checked before a malformed request is refused); the token is
// compared as the HTTP API compares its own, SHA-256 of both sides through
// subtle.ConstantTimeCompare, so a wrong one takes the same time whatever its
// content and length. A
// Redis failure follows each limit's on_backend_error; under closed the call
// fails with Unavailable, and Envoy's failure_mode_deny then decides. Under
// open (a limit override too) the descriptor is OK but claims no quota, since
// none was counted: no current_limit, limit_remaining or duration_until_reset,
// and no RateLimit entry or LimitHeaders from it (envoyproxy/ratelimit's call
// fails on a Redis error, so Envoy sends no rate limit headers either); under
// local the in-memory count's numbers are reported.
//
// # Metrics
//
// slide_rls_requests_total{code} (OK, OVER_LIMIT),
// slide_rls_descriptors_total{domain,descriptor,result} by configured domain
// and descriptor (result ok, over_limit, shadow_over_limit, unlimited,
// replaced, no_limit; an unmatched descriptor has descriptor "" and, for an
// unknown domain, domain ""), slide_rls_errors_total{reason}
// (unauthenticated, invalid_request, unavailable, canceled, internal),
// slide_rls_config_reloads_total{result} (applied, refused), next to the limiter's own
// metrics per policy. slide_limiter_decisions_total{policy,result}
// counts every decided descriptor, also those the Server decides without the
// limiter Service: a requests_per_unit 0 block (denied, or shadow_denied),
// an unlimited descriptor (allowed) and a cost above the quota (denied), under
// the policy name of the mapping, and a limit override under rls-override.UNIT
// (error when Redis failed and it was admitted; the failure itself counts in
// slide_limiter_backend_errors_total{policy="rls-override.UNIT",reason}, timeout
// or error, as a configured descriptor's does). A descriptor without a limit,
// or replaced, is no decision.
//
// NewGRPC serves a Server with the standard health service (SERVING for "" and
// ServiceName until Shutdown) and server reflection, on 16 stream workers per
// CPU (at least 64), so concurrent calls run on goroutines whose stacks have
// grown to fit instead of a new goroutine per call.
package rls
