package limiter

import (
	"context"
	"fmt"
	"time"
)

// Quota is how much of a key's quota under one policy is left: GET /v1/quota and
// `slide query quota`. Its numbers are those of a peek (a decision of cost 0, which
// charges nothing): the RateLimit headers of that peek carry the same.
type Quota struct {
	Policy    string
	Key       string
	Plan      string // the key's plan, "" for none
	Limit     int64
	Used      int64 // Limit − Remaining, or a usage rule's usage, which can pass Limit
	Remaining int64
	// Reset is when the key's quota is whole again; for a fixed window with nothing
	// used, the end of the current window (a calendar period's local boundary).
	Reset time.Time
	// Levels are each level's numbers, org first, for a policy with levels.
	Levels []LevelQuota
}

// LevelQuota is one level's part of a Quota.
type LevelQuota struct {
	Level     string // the level's key, e.g. "org-1/team-a"
	Limit     int64
	Used      int64
	Remaining int64
	Reset     time.Time
}

// LevelChecker is a Checker with levels (a usage rule's): Service.Quota asks it for each
// level's decision and key, org first.
type LevelChecker interface {
	Checker
	CheckLevels(ctx context.Context, key string, now time.Time) ([]Decision, []string, error)
}

// LevelPeeker is a Backend that can report each level of a policy with levels
// (redislimit.Backend, clusterlimit.Backend): Service.Quota asks it for a Redis or
// cluster policy's levels. No levels and no error: the backend cannot tell them (a
// cluster owner too old to answer a peek), and the Quota carries the key's numbers only.
type LevelPeeker interface {
	PeekLevels(ctx context.Context, p *Policy, key string, now time.Time) ([]Decision, []string, error)
}

// Quota peeks at key under the named policy or rule at now, charging nothing. Errors are
// Decide's (ErrUnknownPolicy, ErrInvalidKey, ErrBackendUnavailable).
func (s *Service) Quota(ctx context.Context, policy, key string, now time.Time) (Quota, error) {
	checks := [1]Charge{{Policy: policy, Key: key, Cost: 0}}
	var out [1]Decision
	d, err := s.Decide(ctx, now, checks[:], out[:])
	if err != nil {
		return Quota{}, err
	}
	q := Quota{Policy: policy, Key: key, Plan: d.Plan, Limit: d.Limit, Remaining: d.Remaining}
	q.Used = max(q.Limit-q.Remaining, d.Used, 0)
	p, _, isPolicy := s.EffectivePolicy(policy, key)
	q.Reset = resetAt(&p, isPolicy, now, d)
	var per []Decision
	var keys []string
	rt := s.byName[policy]
	lc, isLC := rt.checker.(LevelChecker)
	switch {
	case !isPolicy && isLC:
		if per, keys, err = lc.CheckLevels(ctx, key, now); err != nil {
			return q, fmt.Errorf("rule %q: %w", policy, err)
		}
	case !isPolicy || p.Levels.N == 0:
		return q, nil
	case p.Backend == BackendMemory:
		var perBuf [MaxLevels]Decision
		var keyBuf [MaxLevels]string
		pr := newParams(&p)
		var agg Decision
		if r := rt.mem.decideLevels(&pr, key, now.UnixNano(), 0, &agg, perBuf[:], keyBuf[:]); r != takeOK {
			return q, fmt.Errorf("reading the levels of %q: %w", ClipName(key), ErrStoreFull)
		}
		n := len(p.Levels.LevelKeys(key))
		per, keys = perBuf[:n], keyBuf[:n]
	default:
		backend := s.redis
		if p.Backend == BackendCluster {
			backend = s.cluster
		}
		lp, ok := backend.(LevelPeeker)
		if !ok {
			return q, nil
		}
		if per, keys, err = lp.PeekLevels(ctx, &p, key, now); err != nil {
			return q, fmt.Errorf("policy %q: %w: %w", policy, ErrBackendUnavailable, err)
		}
	}
	for i := range per {
		lq := LevelQuota{Level: keys[i], Limit: per[i].Limit, Remaining: per[i].Remaining}
		lq.Used = max(lq.Limit-lq.Remaining, per[i].Used, 0)
		lq.Reset = resetAt(&p, isPolicy, now, per[i])
		q.Levels = append(q.Levels, lq)
	}
	return q, nil
}

// resetAt is when d's key is whole again: now + ResetAfter, or for a fixed window with
// nothing used, the end of the window holding now.
func resetAt(p *Policy, isPolicy bool, now time.Time, d Decision) time.Time {
	if d.ResetAfter > 0 || !isPolicy || p.Algorithm != FixedWindow {
		return now.Add(d.ResetAfter)
	}
	ns := now.UnixNano()
	if p.Calendar != 0 {
		_, end := p.Calendar.Bounds(p.Location, ns)
		return time.Unix(0, end)
	}
	w := int64(p.Window)
	return time.Unix(0, (ns/w+1)*w) // now is after the epoch
}
