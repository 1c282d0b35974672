package limithttp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// Header names written by AllowHandler and the middleware.
const (
	// HeaderRetryAfter is set on 429 (and 503): whole seconds, rounded up.
	HeaderRetryAfter = "Retry-After"
	// HeaderRateLimitPolicy lists each policy as an IETF httpapi
	// ratelimit-headers (draft-10) structured-field item: "name";q=quota;w=window_seconds.
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderRateLimit lists each policy's state: "name";r=remaining;t=seconds, t the
	// draft's time until more quota is made available (see AppendRateLimitValue).
	HeaderRateLimit = "RateLimit"
	// HeaderXRateLimitLimit is the quota of the deciding policy (GitHub style).
	HeaderXRateLimitLimit = "X-RateLimit-Limit"
	// HeaderXRateLimitRemaining is the deciding policy's remaining quota.
	HeaderXRateLimitRemaining = "X-RateLimit-Remaining"
	// HeaderXRateLimitReset is when the deciding policy is back to full, in
	// Unix seconds (rounded up).
	HeaderXRateLimitReset = "X-RateLimit-Reset"
)

// CeilSeconds rounds d up to whole seconds, so a client that waits that long
// is never early: every seconds value of these headers (w, t, Retry-After).
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// RetryAfterSeconds is the Retry-After of a denial whose RetryAfter is d: d
// rounded up, and at least 1, since 0 would invite the client back at once.
func RetryAfterSeconds(d time.Duration) int64 { return max(1, CeilSeconds(d)) }

// AppendPolicyValue appends the RateLimit-Policy value of the decisions all,
// one list member per policy: "name";q=quota;w=window_seconds (w omitted when
// the window is unknown).
func AppendPolicyValue(b []byte, all []limiter.Decision) []byte { return appendList(b, all, false) }

// AppendRateLimitValue appends the RateLimit value of the decisions all, one
// list member per policy: "name";r=remaining;t=seconds. Draft-10 defines t as the time
// until additional quota is made available, and a Retry-After never earlier than it: for
// a denial that is its Retry-After (RetryAfterSeconds; for a token bucket the next tokens,
// for a sliding log the oldest entries' expiry), for an admission the time until the
// policy is back to full quota (exact for a fixed window, a bound for the others).
func AppendRateLimitValue(b []byte, all []limiter.Decision) []byte { return appendList(b, all, true) }

// appendList appends the structured-field list of RateLimit (state) or
// RateLimit-Policy (!state) over all.
func appendList(b []byte, all []limiter.Decision, state bool) []byte {
	for i := range all {
		if i > 0 {
			b = append(b, ", "...)
		}
		d := &all[i]
		b = appendSFString(b, d.Policy)
		if state {
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, d.Remaining, 10)
			b = append(b, ";t="...)
			if d.Allowed {
				b = strconv.AppendInt(b, CeilSeconds(d.ResetAfter), 10)
			} else {
				b = strconv.AppendInt(b, RetryAfterSeconds(d.RetryAfter), 10)
			}
			continue
		}
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, d.Limit, 10)
		if w := CeilSeconds(d.Window); w > 0 {
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, w, 10)
		}
	}
	return b
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

// Canonical forms of the header names, so WriteHeaders can fill the map without
// canonicalizing on every request.
var (
	canonRateLimitPolicy = http.CanonicalHeaderKey(HeaderRateLimitPolicy)
	canonRateLimit       = http.CanonicalHeaderKey(HeaderRateLimit)
	canonXLimit          = http.CanonicalHeaderKey(HeaderXRateLimitLimit)
	canonXRemaining      = http.CanonicalHeaderKey(HeaderXRateLimitRemaining)
	canonXReset          = http.CanonicalHeaderKey(HeaderXRateLimitReset)
	canonRetryAfter      = http.CanonicalHeaderKey(HeaderRetryAfter)
)

// WriteHeaders sets the rate-limit headers of a request decided at now.
// main is the request's decision (as returned by limiter.Service.Decide), all the
// per-policy decisions listed in RateLimit-Policy and RateLimit (nil: just
// main). Retry-After is set only when main denies. X-RateLimit-Reset comes from
// ResetAfter, the time until the policy is back to full quota; t from ResetAfter too,
// but from RetryAfter for a denied policy (AppendRateLimitValue).
// An untracked decision (limiter.Decision.Untracked: admitted uncounted while
// its backend is down) is left out, as rls leaves out such a descriptor: the
// X- headers then describe the tracked decision with the least remaining, and
// none is set when no decision is tracked.
func WriteHeaders(h http.Header, now time.Time, main limiter.Decision, all []limiter.Decision) {
	if all == nil {
		all = []limiter.Decision{main}
	}
	if main.Untracked() || anyUntracked(all) {
		var ok bool
		if main, all, ok = tracked(main, all); !ok {
			return
		}
	}
	// Every value goes into one buffer and one string, sliced per header: two allocations
	// for all six headers instead of two each.
	var stack [256]byte
	b := stack[:0]
	var ends [6]int
	b = AppendPolicyValue(b, all)
	ends[0] = len(b)
	b = AppendRateLimitValue(b, all)
	ends[1] = len(b)
	b = strconv.AppendInt(b, main.Limit, 10)
	ends[2] = len(b)
	b = strconv.AppendInt(b, main.Remaining, 10)
	ends[3] = len(b)
	reset := now.Add(main.ResetAfter)
	secs := reset.Unix()
	if reset.Nanosecond() > 0 {
		secs++
	}
	b = strconv.AppendInt(b, secs, 10)
	ends[4] = len(b)
	n := 5
	if !main.Allowed {
		b = strconv.AppendInt(b, RetryAfterSeconds(main.RetryAfter), 10)
		ends[5] = len(b)
		n = 6
	}
	s := string(b)
	vals := make([]string, n)
	keys := [6]string{canonRateLimitPolicy, canonRateLimit, canonXLimit, canonXRemaining, canonXReset, canonRetryAfter}
	start := 0
	for i := range n {
		vals[i] = s[start:ends[i]]
		h[keys[i]] = vals[i : i+1 : i+1]
		start = ends[i]
	}
}

func anyUntracked(all []limiter.Decision) bool {
	for i := range all {
		if all[i].Untracked() {
			return true
		}
	}
	return false
}

// tracked returns all without its untracked decisions, and main, or when main is
// untracked the decision the X- headers describe in its place: the one
// limiter.Service.Decide would pick among the rest. An untracked main was admitted,
// so every decision was (a denial would have been main): the least remaining wins.
// ok is false when no decision is tracked.
func tracked(main limiter.Decision, all []limiter.Decision) (limiter.Decision, []limiter.Decision, bool) {
	kept := make([]limiter.Decision, 0, len(all))
	for i := range all {
		if !all[i].Untracked() {
			kept = append(kept, all[i])
		}
	}
	if len(kept) == 0 {
		return main, nil, false
	}
	if main.Untracked() {
		main = kept[0]
		for _, d := range kept[1:] {
			if d.Remaining < main.Remaining {
				main = d
			}
		}
	}
	return main, kept, true
}
