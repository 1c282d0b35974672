package rls

import (
	"strconv"
	"strings"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
)

// The response headers (draft-10 RateLimit-Policy and RateLimit, Retry-After)
// of a request with one decided descriptor depend only on a few whole numbers:
// the policy, its quota and window, the remaining units and the seconds to the
// reset and to the retry. A hot key's denials
// repeat them for a second at a time, so each configured limit keeps the last
// headers it built and answers the same numbers with the same (immutable)
// values instead of formatting them again.

// headerKey is what one descriptor's headers are built from.
type headerKey struct {
	policy                                     string
	limit, window, remaining, resetIn, retryIn int64
	allowed                                    bool
}

// headerEntry is a limit's last built headers.
type headerEntry struct {
	k  headerKey
	hv []*corev3.HeaderValue
}

// headerCache holds each configured limit's last headers, by limit.idx.
type headerCache []atomic.Pointer[headerEntry]

// keyOf is the headerKey of decision d, the request's answer allowed or not.
func keyOf(d *limiter.Decision, allowed bool) headerKey {
	k := headerKey{policy: d.Policy, limit: d.Limit, window: limithttp.CeilSeconds(d.Window), remaining: d.Remaining,
		resetIn: limithttp.CeilSeconds(d.ResetAfter), allowed: allowed}
	if !allowed {
		k.retryIn = limithttp.CeilSeconds(d.RetryAfter)
	}
	return k
}

// headers returns the response_headers_to_add of a request whose answer is
// md (Allowed: the request's overall answer) over the decided descriptors
// all: from the cache of limit idx when the request decided one descriptor
// (idx >= 0) with the numbers of the last, else formatted from the decisions'
// numbers by limithttp, the values /v1/allow sends, in one string. The values
// returned may be shared by other responses: never modify them.
func (cur *served) headers(idx int, md limiter.Decision, all []limiter.Decision) []*corev3.HeaderValue {
	var k headerKey
	cacheable := idx >= 0 && idx < len(cur.hdrs) && len(all) == 1
	if cacheable {
		k = keyOf(&all[0], md.Allowed)
		if e := cur.hdrs[idx].Load(); e != nil && e.k == k {
			return e.hv
		}
	}
	var stack [256]byte
	b := limithttp.AppendPolicyValue(stack[:0], all)
	policyEnd := len(b)
	b = limithttp.AppendRateLimitValue(b, all)
	stateEnd := len(b)
	if !md.Allowed {
		b = strconv.AppendInt(b, limithttp.RetryAfterSeconds(md.RetryAfter), 10)
	}
	v := string(b)
	hv := make([]*corev3.HeaderValue, 2, 3)
	hv[0] = &corev3.HeaderValue{Key: headerPolicy, Value: v[:policyEnd]}
	hv[1] = &corev3.HeaderValue{Key: headerRateLimit, Value: v[policyEnd:stateEnd]}
	if !md.Allowed {
		hv = append(hv, &corev3.HeaderValue{Key: headerRetryAfter, Value: v[stateEnd:]})
	}
	if cacheable {
		cur.hdrs[idx].Store(&headerEntry{k: k, hv: hv})
	}
	return hv
}

// The header names as HTTP/2 sends them.
var (
	headerPolicy     = strings.ToLower(limithttp.HeaderRateLimitPolicy)
	headerRateLimit  = strings.ToLower(limithttp.HeaderRateLimit)
	headerRetryAfter = strings.ToLower(limithttp.HeaderRetryAfter)
)
