package rls

import (
	"net/http"
	"sync/atomic"
	"time"

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

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// keyOf is the headerKey of decision d, the request's answer allowed or not.
func keyOf(d *limiter.Decision, allowed bool) headerKey {
	k := headerKey{policy: d.Policy, limit: d.Limit, window: ceilSeconds(d.Window), remaining: d.Remaining,
		resetIn: ceilSeconds(d.ResetAfter), allowed: allowed}
	if !allowed {
		k.retryIn = ceilSeconds(d.RetryAfter)
	}
	return k
}

// headers returns the response_headers_to_add of a request whose answer is
// md (Allowed: the request's overall answer) over the decided descriptors
// all: from the cache of limit idx when the request decided one descriptor
// (idx >= 0) with the numbers of the last, else built by limithttp.WriteHeaders.
// The values returned may be shared by other responses: never modify them.
func (s *Server) headers(sc *scratch, idx int, now time.Time, md limiter.Decision, all []limiter.Decision) []*corev3.HeaderValue {
	var k headerKey
	cacheable := idx >= 0 && idx < len(s.hdrs) && len(all) == 1
	if cacheable {
		k = keyOf(&all[0], md.Allowed)
		if e := s.hdrs[idx].Load(); e != nil && e.k == k {
			return e.hv
		}
	}
	if sc.hdr == nil {
		sc.hdr = http.Header{}
	}
	clear(sc.hdr)
	limithttp.WriteHeaders(sc.hdr, now, md, all)
	hv := make([]*corev3.HeaderValue, 0, 3)
	for _, h := range [...]struct{ name, canon string }{
		{"ratelimit-policy", canonPolicy}, {"ratelimit", canonRateLimit}, {"retry-after", canonRetryAfter},
	} {
		if v := sc.hdr[h.canon]; len(v) > 0 {
			hv = append(hv, &corev3.HeaderValue{Key: h.name, Value: v[0]})
		}
	}
	if cacheable {
		s.hdrs[idx].Store(&headerEntry{k: k, hv: hv})
	}
	return hv
}

var (
	canonPolicy     = http.CanonicalHeaderKey(limithttp.HeaderRateLimitPolicy)
	canonRateLimit  = http.CanonicalHeaderKey(limithttp.HeaderRateLimit)
	canonRetryAfter = http.CanonicalHeaderKey(limithttp.HeaderRetryAfter)
)
