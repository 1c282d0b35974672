package limiter

import (
	"context"
	"fmt"
	"time"
)

// allowCluster is AllowN of one check of rt, a cluster policy, when no plans are loaded and
// the cluster backend decides a lone request (OneDecider): Decide's steps for that one
// check, in the same order and with the same outcomes, without its slices and loops for
// several. A forwarded decision parks its goroutine until the owner answers, and the
// stack it wakes to is what it pays for first (Decide's frame is 2 KB): this path keeps
// it a fraction of that (#30).
func (s *Service) allowCluster(ctx context.Context, rt *running, key string, now time.Time, cost int64) (Decision, error) {
	if err := ValidateKey(key); err != nil {
		return Decision{}, err
	}
	if cost < 0 {
		return Decision{}, ErrInvalidCost
	}
	if quota := rt.p.Quota(); cost > quota {
		return Decision{}, fmt.Errorf("%w: cost %d, policy %q allows at most %d", ErrCostOverLimit, cost, rt.p.Name, quota)
	}
	var route uint64
	if s.local != nil {
		d, r, ok := s.local.DecideLocal(BackendRequest{Policy: &rt.p, Key: key, Now: now, Cost: cost})
		if ok {
			s.count(rt, &d)
			return d, nil
		}
		route = r
	}
	start := now
	if !s.nowStarts(now) {
		start = time.Now() // now is not the present
	}
	d, answered, err := s.one.DecideOne(ctx, start.Add(rt.p.EffectiveTimeout()),
		BackendRequest{Policy: &rt.p, Key: key, Now: now, Cost: cost, Route: route})
	latency := answered.Sub(start)
	if answered.IsZero() {
		latency = time.Since(start)
	}
	s.metrics.backendLatency("cluster").Observe(latency.Seconds())
	if err == nil {
		s.count(rt, &d) // a cluster policy has no deny cache (Redis's alone)
		return d, nil
	}
	unavailable, failed := s.onFailure(ctx, rt, &Charge{Policy: rt.p.Name, Key: key, Cost: cost}, now.UnixNano(), err, &d)
	if cerr := ctx.Err(); cerr != nil && failed != nil {
		return Decision{}, fmt.Errorf("deciding: %w", cerr)
	}
	if unavailable {
		return d, failed
	}
	return d, nil
}
