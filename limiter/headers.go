package limiter

import (
	"net/http"
	"strconv"
	"time"
)

// Header names written by AllowHandler and the middleware.
const (
	// HeaderRetryAfter is set on 429 (and 503): whole seconds, rounded up.
	HeaderRetryAfter = "Retry-After"
	// HeaderRateLimitPolicy lists each policy as an IETF httpapi
	// ratelimit-headers (draft-10) structured-field item: "name";q=quota;w=window_seconds.
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderRateLimit lists each policy's state: "name";r=remaining;t=reset_seconds.
	HeaderRateLimit = "RateLimit"
	// HeaderXRateLimitLimit is the quota of the deciding policy (GitHub style).
	HeaderXRateLimitLimit = "X-RateLimit-Limit"
	// HeaderXRateLimitRemaining is the deciding policy's remaining quota.
	HeaderXRateLimitRemaining = "X-RateLimit-Remaining"
	// HeaderXRateLimitReset is when the deciding policy is back to full, in
	// Unix seconds (rounded up).
	HeaderXRateLimitReset = "X-RateLimit-Reset"
)

// ceilSeconds rounds d up to whole seconds, so a client that waits that long
// is never early.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// appendSFString appends s as a structured-field String (RFC 8941 §3.3.3),
// dropping bytes a String cannot carry.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// WriteHeaders sets the rate-limit headers of a request decided at now.
// main is the request's decision (as returned by Service.Decide), all the
// per-policy decisions listed in RateLimit-Policy and RateLimit (nil: just
// main). Retry-After is set only when main denies. t and X-RateLimit-Reset
// come from ResetAfter, the time until the policy is back to full quota.
func WriteHeaders(h http.Header, now time.Time, main Decision, all []Decision) {
	if all == nil {
		all = []Decision{main}
	}
	var pol, st []byte
	for i := range all {
		d := &all[i]
		if i > 0 {
			pol = append(pol, ", "...)
			st = append(st, ", "...)
		}
		pol = appendSFString(pol, d.Policy)
		pol = append(pol, ";q="...)
		pol = strconv.AppendInt(pol, d.Limit, 10)
		if w := ceilSeconds(d.Window); w > 0 {
			pol = append(pol, ";w="...)
			pol = strconv.AppendInt(pol, w, 10)
		}
		st = appendSFString(st, d.Policy)
		st = append(st, ";r="...)
		st = strconv.AppendInt(st, d.Remaining, 10)
		st = append(st, ";t="...)
		st = strconv.AppendInt(st, ceilSeconds(d.ResetAfter), 10)
	}
	h.Set(HeaderRateLimitPolicy, string(pol))
	h.Set(HeaderRateLimit, string(st))
	h.Set(HeaderXRateLimitLimit, strconv.FormatInt(main.Limit, 10))
	h.Set(HeaderXRateLimitRemaining, strconv.FormatInt(main.Remaining, 10))
	reset := now.Add(main.ResetAfter)
	secs := reset.Unix()
	if reset.Nanosecond() > 0 {
		secs++
	}
	h.Set(HeaderXRateLimitReset, strconv.FormatInt(secs, 10))
	if !main.Allowed {
		h.Set(HeaderRetryAfter, strconv.FormatInt(max(1, ceilSeconds(main.RetryAfter)), 10))
	}
}
