package rls

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

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

// currentLimit is the current_limit of a descriptor of l decided by d: l's own, unless
// l's policy decided it by another limit than requests_per_unit (the key's plan, or the
// numbers of a Reload swapping in as the request ran), when it is that limit in l's unit,
// so that current_limit tells the limit that limit_remaining and the headers count from.
// Such a current_limit is kept per limit while its number repeats, as a planned hot key's
// answers do.
func (cur *served) currentLimit(l *limit, d *limiter.Decision) *pb.RateLimitResponse_RateLimit {
	c := l.current
	// A usage rule's decision (d.Policy the rule's) keeps l's own: its max is no count of
	// requests a unit.
	if c == nil || l.policy == "" || d.Policy != l.policy || d.Limit == int64(c.GetRequestsPerUnit()) ||
		d.Limit < 0 || d.Limit > math.MaxUint32 {
		return c
	}
	if h := cur.held[l.idx].Load(); h != nil && int64(h.GetRequestsPerUnit()) == d.Limit {
		return h
	}
	h := &pb.RateLimitResponse_RateLimit{Name: c.GetName(), RequestsPerUnit: uint32(d.Limit), Unit: c.GetUnit(),
		UnitMultiplier: c.GetUnitMultiplier()}
	cur.held[l.idx].Store(h)
	return h
}

// The header names as HTTP/2 sends them.
var (
	headerPolicy     = strings.ToLower(limithttp.HeaderRateLimitPolicy)
	headerRateLimit  = strings.ToLower(limithttp.HeaderRateLimit)
	headerRetryAfter = strings.ToLower(limithttp.HeaderRetryAfter)
)

// LimitHeaderNames name the three response headers of envoyproxy/ratelimit's
// LIMIT_RESPONSE_HEADERS_ENABLED (ServerConfig.LimitHeaders): the limit, the
// remaining requests and the seconds to the reset, of one descriptor.
type LimitHeaderNames struct {
	Limit, Remaining, Reset string
}

// DefaultLimitHeaderNames are envoyproxy/ratelimit's defaults (its
// LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER).
var DefaultLimitHeaderNames = LimitHeaderNames{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}

// Validate checks that the names are HTTP header names, distinct from each
// other and from the headers every answer carries (RateLimit-Policy,
// RateLimit, Retry-After): Envoy would send a name twice.
func (n LimitHeaderNames) Validate() error {
	seen := map[string]bool{headerPolicy: true, headerRateLimit: true, headerRetryAfter: true}
	for _, name := range []string{n.Limit, n.Remaining, n.Reset} {
		if !validHeaderName(name) {
			return fmt.Errorf("rate limit header name %q: want an HTTP header name (letters, digits, and !#$%%&'*+-.^_`|~)", name)
		}
		lower := strings.ToLower(name)
		if seen[lower] {
			return fmt.Errorf("rate limit header name %q is used twice (RateLimit-Policy, RateLimit and Retry-After are always sent)", name)
		}
		seen[lower] = true
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// appendLimitHeaders returns hv (which may be shared: never appended to in
// place) followed by the three LimitHeaders of the status envoyproxy/ratelimit
// picks: of those with a current_limit, the first with the least
// limit_remaining, unless a descriptor not in quota_mode is over its limit,
// when it is the last of those. Limit is its requests_per_unit, Remaining its
// limit_remaining, Reset its duration_until_reset in seconds, rounded up (on a
// fixed window of a unit, what envoyproxy/ratelimit computes from the clock).
// hv as it is when no status has a current_limit, as envoyproxy/ratelimit adds
// none then.
func (s *Server) appendLimitHeaders(hv []*corev3.HeaderValue, resp *pb.RateLimitResponse, sc *scratch) []*corev3.HeaderValue {
	var pick *pb.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, st := range resp.GetStatuses() {
		if st.GetCurrentLimit() != nil && st.GetLimitRemaining() < least {
			pick, least = st, st.GetLimitRemaining()
		}
		if st.GetCode() == pb.RateLimitResponse_OVER_LIMIT && !sc.matched[i].l.quotaMode {
			pick, least = st, 0
		}
	}
	if pick == nil {
		return hv
	}
	out := make([]*corev3.HeaderValue, len(hv), len(hv)+3)
	copy(out, hv)
	n := s.limitHdr
	return append(out,
		&corev3.HeaderValue{Key: n.Limit, Value: strconv.FormatUint(uint64(pick.GetCurrentLimit().GetRequestsPerUnit()), 10)},
		&corev3.HeaderValue{Key: n.Remaining, Value: strconv.FormatUint(uint64(pick.GetLimitRemaining()), 10)},
		&corev3.HeaderValue{Key: n.Reset, Value: strconv.FormatInt(limithttp.CeilSeconds(pick.GetDurationUntilReset().AsDuration()), 10)})
}
