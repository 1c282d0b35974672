package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// BackendRequest is one admission request handed to a Backend.
type BackendRequest struct {
	// Policy must have passed Validate; the backend does not check it again.
	Policy *Policy
	// Key is the caller's key (user, tenant, API key), already validated.
	Key string
	// Now is the caller's clock. A Redis backend uses Redis TIME instead
	// unless configured otherwise.
	Now time.Time
	// Cost is 0 (peek) to Policy.Quota().
	Cost int64
	// Route is where a LocalDecider's DecideLocal found the request must go, its own note
	// (opaque to the Service) handed back with the request so that the backend does not
	// look the key's owner up again; 0: not looked up.
	Route uint64
}

// Backend decides requests whose state lives outside the process (Redis), or in another
// instance's (backend cluster: limiter/clusterlimit).
// Decide answers every request in one round trip (a pipelined or multi-key
// call), writing out[i] for reqs[i]; len(out) ≥ len(reqs). An error means no
// decision in out can be trusted: the caller applies each policy's failure
// mode. Implementations must not retry a call that may have reached the
// server, since a retried decision can count a request twice.
type Backend interface {
	Decide(ctx context.Context, reqs []BackendRequest, out []Decision) error
}

// DeadlineDecider is a Backend that bounds a call by a deadline itself (backend cluster:
// its batches' timers end every caller's wait at its deadline), so the Service derives no
// context with a timer for each call. ctx is the caller's; an answer not had by deadline
// is an error wrapping context.DeadlineExceeded. DecideBy keeps neither reqs nor out past
// its return (the Service reuses them). answered is when the last answer arrived, read by
// the backend once for all the calls one answer serves (the Service's latency then ends
// there, without a clock read of its own); zero: the Service reads the clock.
type DeadlineDecider interface {
	DecideBy(ctx context.Context, deadline time.Time, reqs []BackendRequest, out []Decision) (answered time.Time, err error)
}

// OneDecider is a DeadlineDecider that also decides a lone request passed by value
// (backend cluster): the Service's path for one check of such a policy (AllowN) then
// needs no slices, which a call through an interface would move to the heap, nor Decide's
// for several checks. DecideOne is, in one call, DecideLocal of req when the backend is a
// LocalDecider (local reports that it decided req so: d is its decision, answered zero),
// and otherwise DecideBy of reqs = {req}, its decision returned.
type OneDecider interface {
	DecideOne(ctx context.Context, deadline time.Time, req BackendRequest) (d Decision, answered time.Time, local bool, err error)
}

// remoteScratch holds the requests and answers of a DeadlineDecider's call of up to four
// decisions.
type remoteScratch struct {
	reqs [4]BackendRequest
	res  [4]Decision
}

var remoteScratches = sync.Pool{New: func() any { return new(remoteScratch) }}

// LocalDecider is a Backend that can decide some requests in this process, with no call
// and no context (backend cluster: the keys this instance owns). DecideLocal reports false
// when the request must go through Decide (or DecideBy); it then changed nothing, and
// route, when not 0, is what it found of where the request goes (backend cluster: the
// key's owner), for the caller to hand back as the request's Route so that the backend
// does not find it again. (The decision is returned by value: a pointer into the caller's
// out would move it to the heap.)
type LocalDecider interface {
	DecideLocal(req BackendRequest) (d Decision, route uint64, ok bool)
}

// PolicyResolver is a Backend that decides for other instances (backend cluster: a key's
// owner decides what the others forward to it). NewService hands it EffectivePolicy, so
// that the owner decides a forwarded key by the numbers of the key's plan, as its caller
// did (a forwarded decision names its policy and a fingerprint of those numbers, not the
// numbers themselves).
type PolicyResolver interface {
	SetResolver(func(name, key string) (Policy, string, bool))
}

// nowStarts reports whether now is the present to start a backend call's timeout at: the
// default clock's reading (the Service's MonotonicClock: its times carry a monotonic
// reading, and its wall part is anchored at the Service's start, so only the monotonic
// part is the present; a backend on deadlines compares them by it, clusterlimit does).
func (s *Service) nowStarts(now time.Time) bool { return s.ownClock && now != now.Round(0) }

// decideRemote decides checks[idx] (rts[i]: the policy of checks[i]) in one call of
// backend (named for the latency metric), its timeout and latency counted from start. On
// failure it applies each policy's mode and returns the indexes of the closed ones (whose
// out entry is a denial marked Degraded) and the error to report for them.
func (s *Service) decideRemote(ctx context.Context, now, start time.Time, checks []Charge, rts []*running, idx []int, routes []uint64, ovs []*override, out []Decision, backend Backend, name string) ([]int, error) {
	dd, _ := backend.(DeadlineDecider)
	var reqs []BackendRequest
	var res []Decision
	if dd != nil && len(idx) <= len(remoteScratch{}.reqs) {
		// It keeps neither slice past its return (a Backend on deadlines decides in the
		// caller's goroutine): they go back to a pool, and a decision allocates none.
		sc := remoteScratches.Get().(*remoteScratch)
		reqs, res = sc.reqs[:len(idx)], sc.res[:len(idx)]
		defer func() {
			clear(reqs)
			remoteScratches.Put(sc)
		}()
	} else {
		reqs, res = make([]BackendRequest, len(idx)), make([]Decision, len(idx))
	}
	timeout := time.Duration(0)
	for j, i := range idx {
		rt := rts[i]
		p := &rt.p
		if ovs != nil && ovs[i] != nil {
			p = &ovs[i].p // the key's plan: its numbers, the policy's name and keys
		}
		reqs[j] = BackendRequest{Policy: p, Key: checks[i].Key, Now: now, Cost: checks[i].Cost}
		if routes != nil {
			reqs[j].Route = routes[j]
		}
		if t := rt.p.EffectiveTimeout(); timeout == 0 || t < timeout {
			timeout = t // one round trip serves all: the strictest bound wins
		}
	}
	var err error
	var answered time.Time
	if dd != nil {
		answered, err = dd.DecideBy(ctx, start.Add(timeout), reqs, res)
	} else {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err = backend.Decide(cctx, reqs, res)
		cancel()
	}
	latency := answered.Sub(start)
	if answered.IsZero() {
		latency = time.Since(start)
	}
	s.metrics.backendLatency(name).Observe(latency.Seconds())
	nowNs := now.UnixNano()
	var failed error
	var unavailable []int
	for j, i := range idx {
		rt := rts[i]
		if err == nil {
			out[i] = res[j]
			if d := &out[i]; !d.Allowed && rt.deny != nil && d.RetryAfter > 0 && rt.p.Levels.N == 0 {
				rt.deny.put(checks[i].Key, denyEntry{p: reqs[j].Policy, until: nowNs + int64(d.RetryAfter), resetAt: nowNs + int64(d.ResetAfter),
					cost: max(checks[i].Cost, 1), remaining: d.Remaining, window: d.Window}, nowNs)
			}
			s.count(rt, &out[i])
			continue
		}
		var ov *override
		if ovs != nil {
			ov = ovs[i]
		}
		un, f := s.onFailure(ctx, rt, ov, &checks[i], nowNs, err, &out[i])
		if un {
			unavailable = append(unavailable, i)
		}
		if failed == nil {
			failed = f
		}
	}
	return unavailable, failed
}

// onFailure decides check c of rt into d after its backend call failed with err: by the
// policy's failure mode, or, when the caller's context ended, by none (no error metric:
// Decide returns the context's error). ov is the key's numbers (its plan's, or
// SetLimits's; nil: the policy's own), which the local fallback counts by, as the backend
// did. It reports whether the check is unavailable (d a denial that does not answer the
// request) and the error to report for it (nil: none).
func (s *Service) onFailure(ctx context.Context, rt *running, ov *override, c *Charge, nowNs int64, err error, d *Decision) (unavailable bool, failed error) {
	p, pr := &rt.p, (*params)(nil)
	if ov != nil {
		p, pr = &ov.p, &ov.pr
	}
	if ctx.Err() != nil {
		*d = Decision{Limit: p.Quota(), Window: p.QuotaWindow(), Policy: rt.p.Name}
		return true, ctx.Err()
	}
	if BackendErrorReason(err) == ReasonTimeout {
		rt.m.errTimeout.Inc()
	} else {
		rt.m.errOther.Inc()
	}
	rt.m.failed.Inc()
	s.logFailure(rt, err)
	switch rt.p.OnBackendError {
	case FailOpen:
		*d = Decision{Allowed: true, Limit: p.Quota(), Remaining: p.Quota(), Window: p.QuotaWindow(),
			Policy: rt.p.Name, Degraded: true}
	case FailLocal:
		if pr == nil {
			pr = &rt.mem.pr
		}
		if rt.mem.decide(pr, c.Key, nowNs, c.Cost, d) {
			d.local = true // counted in memory (unless the store was full: untracked then)
		}
		d.Degraded = true
		s.shadow(rt, d)
	default: // FailClosed
		*d = Decision{Limit: p.Quota(), Window: p.QuotaWindow(), Policy: rt.p.Name, Degraded: true}
		if rt.p.Shadow {
			d.Allowed = true
			return false, nil
		}
		return true, fmt.Errorf("policy %q: %w: %w", rt.p.Name, ErrBackendUnavailable, err)
	}
	return false, nil
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
