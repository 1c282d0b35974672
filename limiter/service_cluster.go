package limiter

import (
	"context"
	"fmt"
	"time"
)

// loneCluster is the policy named policy when a request of it alone takes allowCluster: a
// cluster policy, no plans loaded, a backend that decides a lone request (OneDecider).
func (s *Service) loneCluster(policy string) *running {
	if s.one == nil {
		return nil
	}
	if rt := s.byName[policy]; rt != nil && rt.checker == nil && rt.p.Backend == BackendCluster && s.plans.Load() == nil {
		return rt
	}
	return nil
}

// allowCluster is Decide of one check of rt (loneCluster's), out its out[0]: the general
// path's steps for that one check, in the same order and with the same outcomes (out
// written where it writes it), without its slices and loops for several. A forwarded
// decision parks its goroutine until the owner answers, and the stack it wakes to is what
// it pays for first (the general path's frame is 2 KB): this path keeps it a fraction of
// that (#30).
func (s *Service) allowCluster(ctx context.Context, rt *running, key string, now time.Time, cost int64, out *Decision) (Decision, error) {
	if err := ValidateKey(key); err != nil {
		return Decision{}, err
	}
	if err := rt.p.Levels.checkKey(key); err != nil {
		return Decision{}, err
	}
	if cost < 0 {
		return Decision{}, ErrInvalidCost
	}
	if quota := rt.p.Quota(); cost > quota {
		return Decision{}, fmt.Errorf("%w: cost %d, policy %q allows at most %d", ErrCostOverLimit, cost, rt.p.Name, quota)
	}
	start := now
	if !s.nowStarts(now) {
		start = time.Now() // now is not the present
	}
	// One call: DecideLocal's steps (a key this instance owns, decided here), else the hop.
	d, answered, local, err := s.one.DecideOne(ctx, start.Add(rt.p.EffectiveTimeout()),
		BackendRequest{Policy: &rt.p, Key: key, Now: now, Cost: cost})
	if local {
		*out = d
		s.count(rt, out)
		return *out, nil
	}
	latency := answered.Sub(start)
	if answered.IsZero() {
		latency = time.Since(start)
	}
	s.metrics.backendLatency("cluster").Observe(latency.Seconds())
	if err != nil {
		return s.clusterFailed(ctx, rt, key, now, cost, err, out)
	}
	*out = d
	s.count(rt, out) // a cluster policy has no deny cache (Redis's alone)
	return *out, nil
}

// clusterFailed is allowCluster's answer when the backend failed with err: the general
// path's, by the policy's failure mode.
func (s *Service) clusterFailed(ctx context.Context, rt *running, key string, now time.Time, cost int64, err error, out *Decision) (Decision, error) {
	unavailable, failed := s.onFailure(ctx, rt, nil, &Charge{Policy: rt.p.Name, Key: key, Cost: cost}, now.UnixNano(), err, out)
	if cerr := ctx.Err(); cerr != nil && failed != nil {
		return Decision{}, fmt.Errorf("deciding: %w", cerr)
	}
	if unavailable {
		return *out, failed
	}
	return *out, nil
}
