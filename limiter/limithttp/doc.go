// Package limithttp is the limiter's HTTP face: the POST /v1/allow handler
// (AllowHandler), a middleware in front of an http.Handler (NewMiddleware) and
// the rate-limit response headers (WriteHeaders), over a limiter.Service. It
// is apart from package limiter, as promhttp is from prometheus, so the core
// that decides carries no net/http.
//
// # POST /v1/allow
//
// The body speaks the event decoder's JSON dialect: field names match
// exactly ({"Policy":...} is an unknown field, not policy), a field given
// twice is refused (not "the last wins"), unknown fields and trailing data
// are refused, and a key or policy name that is not valid UTF-8 (a raw byte,
// or an escaped lone surrogate) is a 400, never rewritten to U+FFFD: keys are
// bytes, and "tÿ" and "tþ" must not share a bucket. Policy names that
// differ only by case ("P" and "p") are refused when policies are loaded.
//
// POST /v1/allow with {"policy":"login","key":"u42","cost":1} answers 200 or
// 429 with {"allowed","policy","limit","remaining","retry_after_ms",
// "reset_after_ms"} (plus "delay_ms", "shadowed", "degraded", "stale_ms" when set, and
// "decisions" for several policies). Errors are the API's (package httperr):
// 400 {"error":{"code":"bad_parameter","message":...,"param":"key"}} naming
// the bad field (policy, policies, key, cost), 400 bad_body for a body that is
// not one JSON object, 413 body_too_large above 64 KiB, 503 unavailable with
// Retry-After: 1 when a closed policy's backend is down. (Before, this handler
// had codes of its own: invalid_parameter, missing_parameter, unknown_policy,
// invalid_key and invalid_cost are bad_parameter now, invalid_json bad_body,
// backend_unavailable unavailable.)
//
// # Headers
//
// WriteHeaders, after a denial of login 3 per 60 s:
//
//	Retry-After: 58                      seconds, rounded up, on 429 only
//	RateLimit-Policy: "login";q=3;w=60   IETF httpapi ratelimit-headers draft-10
//	RateLimit: "login";r=0;t=58          r remaining, t seconds until more quota
//	X-RateLimit-Limit: 3
//	X-RateLimit-Remaining: 0
//	X-RateLimit-Reset: 1764489662        Unix seconds, as GitHub sends it
//
// Several policies are listed in one structured-field list each; the X-
// headers describe the deciding one. For the buckets, w is capacity/rate,
// the time to refill from empty. t is the draft's "seconds until additional quota is
// made available": a denied policy's Retry-After (so Retry-After is never earlier than
// t, as the draft asks), an admitted one's time to full quota (X-RateLimit-Reset's).
//
// A decision admitted uncounted (limiter.Decision.Untracked: the backend
// failed and on_backend_error is open) claims no quota, as rls's answer for
// such a descriptor: it has no entry in RateLimit-Policy and RateLimit, the X-
// headers describe the tracked decision with the least remaining instead, and
// a request no policy counted gets none of these headers. Its JSON keeps
// "degraded":true and "limit" (the policy's quota) and says "remaining":0,
// since nothing vouches for more. The top level of the JSON is always the
// decision the X- headers describe: limiter.Service.Decide ranks an untracked
// admission after every counted one, so it decides a request only when no
// policy of it counted (then without X- headers); its own entry stays under
// "decisions". The IETF draft's server sends no quota it
// cannot vouch for; the full quota it sent before told a client pacing itself
// by the headers to spend it all while nothing counted. A local fallback
// counts in memory, so its numbers are sent, a peek's (cost 0) too.
//
// The values come from a Decision's numbers alone (AppendPolicyValue,
// AppendRateLimitValue, RetryAfterSeconds, each seconds value rounded up by
// CeilSeconds), so a face that is not an http.Header (rls, whose gRPC answer
// carries Envoy's response headers) formats the same bytes.
package limithttp
