package rls

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/limiter"
)

// maxOverridePolicies bounds the distinct (requests_per_unit, unit) pairs the
// memory counters of limit overrides keep (without Redis): a client must not
// grow them without end.
const maxOverridePolicies = 1024

// overrideUnits are the units a limit override may name, with their windows
// (envoyproxy/ratelimit's dividers, as in the config files).
var overrideUnits = map[typev3.RateLimitUnit]string{
	typev3.RateLimitUnit_SECOND: "second",
	typev3.RateLimitUnit_MINUTE: "minute",
	typev3.RateLimitUnit_HOUR:   "hour",
	typev3.RateLimitUnit_DAY:    "day",
	typev3.RateLimitUnit_MONTH:  "month",
	typev3.RateLimitUnit_YEAR:   "year",
}

// overrides decides the descriptors that carry their own limit (Envoy's
// RateLimitDescriptor.limit), which no configured policy knows: a fixed window
// of requests_per_unit per unit, as envoyproxy/ratelimit counts it, in Redis
// when the server has it, else in memory.
type overrides struct {
	redis limiter.Backend
	errs  *prometheus.CounterVec // the limiter's slide_limiter_backend_errors_total
	clock func() time.Time
	mu    sync.Mutex
	mem   map[limiter.Policy]*limiter.Memory
}

// overrideLimit is the limit of a descriptor's override: its window, quota and
// current_limit, named rls-override.UNIT (no configured descriptor's policy
// name starts so). The unit was checked by validate.
func overrideLimit(domain string, o *rlv3.RateLimitDescriptor_RateLimitOverride) *limit {
	unitName := overrideUnits[typev3.RateLimitUnit(o.GetUnit())]
	u := units[unitName]
	name := "rls-override." + unitName
	return &limit{idx: -1, domain: domain, path: "override", policy: name, label: name,
		quota: int64(o.GetRequestsPerUnit()), banned: o.GetRequestsPerUnit() == 0, window: u.d,
		current: &pb.RateLimitResponse_RateLimit{RequestsPerUnit: o.GetRequestsPerUnit(), Unit: u.unit}}
}

// overrideKey is the counter of an override: the domain and every entry's key
// and value, escaped and joined ("domain|key=value|…"), or "\h" + 32 hex of
// their SHA-256 when that is no valid limiter key. Unlike a configured
// descriptor's key it names the entries' keys: no policy name carries them.
func overrideKey(domain string, d *rlv3.RateLimitDescriptor) string {
	var b strings.Builder
	esc := func(s string) {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c == '\\' || c == '|' || c == '=' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[i])
		}
	}
	esc(domain)
	for _, e := range d.GetEntries() {
		b.WriteByte('|')
		esc(e.GetKey())
		b.WriteByte('=')
		esc(e.GetValue())
	}
	if k := b.String(); limiter.ValidateKey(k) == nil {
		return k
	}
	h := sha256.New()
	var n [8]byte
	for _, s := range append([]string{domain}, entryStrings(d)...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return `\h` + hex.EncodeToString(h.Sum(nil)[:16])
}

func entryStrings(d *rlv3.RateLimitDescriptor) []string {
	var out []string
	for _, e := range d.GetEntries() {
		out = append(out, e.GetKey(), e.GetValue())
	}
	return out
}

// decide charges cost to key under l's fixed window. A failing Redis or a full
// set of memory counters admits, marked Degraded (on_backend_error open, the
// default of configured limits).
func (o *overrides) decide(ctx context.Context, now time.Time, l *limit, key string, cost int64) (limiter.Decision, error) {
	p := limiter.Policy{Name: l.policy, Algorithm: limiter.FixedWindow, Limit: l.quota, Window: l.window,
		Backend: limiter.BackendMemory, OnBackendError: limiter.FailOpen}
	open := limiter.Decision{Allowed: true, Limit: l.quota, Remaining: l.quota, Window: l.window, Policy: l.policy, Degraded: true}
	if o.redis != nil {
		p.Backend = limiter.BackendRedis
		if err := p.Validate(); err != nil {
			return limiter.Decision{}, err
		}
		cctx, cancel := context.WithTimeout(ctx, p.EffectiveTimeout())
		defer cancel()
		out := make([]limiter.Decision, 1)
		if err := o.redis.Decide(cctx, []limiter.BackendRequest{{Policy: &p, Key: key, Now: now, Cost: cost}}, out); err != nil {
			if ctx.Err() != nil {
				return limiter.Decision{}, ctx.Err()
			}
			// Counted as the Service counts its own policies' failures, so an alert on
			// backend errors sees an outage that only override traffic meets.
			o.errs.WithLabelValues(l.policy, limiter.BackendErrorReason(err)).Inc()
			return open, nil
		}
		return out[0], nil
	}
	o.mu.Lock()
	m := o.mem[p]
	if m == nil && len(o.mem) < maxOverridePolicies {
		var err error
		if m, err = limiter.NewMemory(p, limiter.MemoryConfig{Clock: o.clock}); err != nil {
			o.mu.Unlock()
			return limiter.Decision{}, err
		}
		if o.mem == nil {
			o.mem = map[limiter.Policy]*limiter.Memory{}
		}
		o.mem[p] = m
	}
	o.mu.Unlock()
	if m == nil {
		return open, nil
	}
	d, err := m.AllowN(ctx, key, now, cost)
	if err != nil {
		return open, nil
	}
	return d, nil
}
