package clusterlimit

import (
	"context"
	"fmt"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// Forwarding: a request's decisions sent to their keys' owners, and the retry at a new owner
// after a stale one.

// DecideBy is Decide bounded by deadline (limiter.DeadlineDecider: the Service derives no
// context with a timer per call; a batch's timer, or its peer's queue timer, ends the
// wait of a call at its deadline). answered is when the last of the owners' answers
// arrived (its batch's one clock read), zero when every key was decided here.
func (b *Backend) DecideBy(ctx context.Context, deadline time.Time, reqs []limiter.BackendRequest, out []limiter.Decision) (answered time.Time, err error) {
	err = b.decideBy(ctx, deadline, reqs, out, &answered)
	return answered, err
}

var _ limiter.OneDecider = (*Backend)(nil)

// DecideOne is DecideLocal of the lone request req, then, when it did not decide it here,
// DecideBy of it (limiter.OneDecider): one call that looks the key's owner up once, req
// passed by value so that nothing of it moves to the heap.
func (b *Backend) DecideOne(ctx context.Context, deadline time.Time, req limiter.BackendRequest) (d limiter.Decision, answered time.Time, local bool, err error) {
	o := b.owned[req.Policy.Name]
	if o == nil {
		return b.decideOneBy(ctx, deadline, req)
	}
	p, addr, ok := b.g.KeyOwner(o.route(req.Key))
	if !ok {
		return b.decideOneBy(ctx, deadline, req)
	}
	if addr == b.g.Self() {
		if d, ok = b.decideHere(o, p, &req); ok {
			return d, answered, true, nil
		}
		return b.decideOneBy(ctx, deadline, req)
	}
	// decideBy's steps for one request forwarded, in a frame its caller's goroutine wakes
	// to that is a fraction of decideBy's.
	pe := b.peerOf(p, addr)
	c := newCall(ctx, deadline, item{policy: req.Policy.Name, fp: o.fingerprintOf(req.Policy), key: req.Key, now: req.Now.UnixNano(), cost: req.Cost})
	pe.submit(c)
	if err = wait(ctx, c); err != nil {
		return d, answered, false, err
	}
	if c.res.status == StatusStale {
		reqs, out := []limiter.BackendRequest{req}, []limiter.Decision{{}}
		err = b.retryStale(ctx, deadline, reqs, out, &answered, []*call{c}, []string{pe.addr}, []int{0})
		return out[0], answered, false, err
	}
	answered = c.at
	err = b.finish(&req, c, &d)
	c.release()
	return d, answered, false, err
}

// decideOneBy is DecideOne of req by decideBy (its rare cases: no such policy, no owner, its
// own key it could not decide by DecideLocal's steps).
func (b *Backend) decideOneBy(ctx context.Context, deadline time.Time, req limiter.BackendRequest) (limiter.Decision, time.Time, bool, error) {
	reqs := [1]limiter.BackendRequest{req}
	var out [1]limiter.Decision
	var answered time.Time
	err := b.decideBy(ctx, deadline, reqs[:], out[:], &answered)
	return out[0], answered, false, err
}

// decideBy is DecideBy, the last answer's arrival in *answered.
func (b *Backend) decideBy(ctx context.Context, deadline time.Time, reqs []limiter.BackendRequest, out []limiter.Decision, answered *time.Time) error {
	var calls []*call
	var owners []string
	var callBuf [4]*call // most requests name one policy: no slices to allocate
	var ownerBuf [4]string
	for i := range reqs {
		r := &reqs[i]
		o, pe := b.routed(r) // the owner DecideLocal found, if it did
		if o == nil {
			if o = b.owned[r.Policy.Name]; o == nil {
				abandonAll(calls) // those already submitted: none will be taken
				return fmt.Errorf("clusterlimit: policy %q is not a cluster policy", r.Policy.Name)
			}
		}
		it := item{policy: r.Policy.Name, fp: o.fingerprintOf(r.Policy), key: r.Key, now: r.Now.UnixNano(), cost: r.Cost}
		if pe == nil {
			p, addr, ok := b.g.KeyOwner(o.route(r.Key))
			if !ok {
				abandonAll(calls)
				return ErrNoOwner
			}
			if addr == b.g.Self() {
				if err := b.decideOwned(o, o.variant(r.Policy, it.fp), p, &it, &out[i]); err != nil {
					abandonAll(calls)
					return err
				}
				continue
			}
			pe = b.peerOf(p, addr)
		}
		if calls == nil {
			if len(reqs) <= len(callBuf) {
				calls, owners = callBuf[:len(reqs)], ownerBuf[:len(reqs)]
			} else {
				calls, owners = make([]*call, len(reqs)), make([]string, len(reqs))
			}
		}
		calls[i] = newCall(ctx, deadline, it)
		owners[i] = pe.addr
		pe.submit(calls[i])
	}
	if calls == nil {
		return nil
	}
	var stale []int
	for i, c := range calls {
		if c == nil {
			continue
		}
		if err := wait(ctx, c); err != nil {
			abandonAll(calls[i+1:])
			return err
		}
		if c.res.status == StatusStale {
			stale = append(stale, i)
			continue
		}
		if c.at.After(*answered) {
			*answered = c.at
		}
		err := b.finish(&reqs[i], c, &out[i])
		c.release()
		if err != nil {
			abandonAll(calls[i+1:])
			return err
		}
	}
	if len(stale) == 0 {
		return nil
	}
	return b.retryStale(ctx, deadline, reqs, out, answered, calls, owners, stale)
}

// retryStale asks the new owners of reqs[stale] (calls[i] was answered StatusStale by
// owners[i]) once, out[i] their decisions, *answered their last answer's arrival if later.
func (b *Backend) retryStale(ctx context.Context, deadline time.Time, reqs []limiter.BackendRequest, out []limiter.Decision, answered *time.Time, calls []*call, owners []string, stale []int) error {
	// The owner's assignment moved: learn the new one (unless the view was described anew
	// since the first of these left: it was routed by an older one), and ask it once.
	since := calls[stale[0]].sent
	for _, i := range stale[1:] {
		since = min(since, calls[i].sent)
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	b.g.Describe(dctx, time.Unix(0, since))
	cancel()
	for _, i := range stale {
		r := &reqs[i]
		o := b.owned[r.Policy.Name]
		p, addr, ok := b.g.KeyOwner(o.route(r.Key))
		switch {
		case !ok:
			return ErrNoOwner
		case addr == owners[i]:
			return fmt.Errorf("%w: %s is a stale owner of %q and the group names no other yet", ErrOwner, addr, r.Key)
		case addr == b.g.Self():
			if err := b.decideOwned(o, o.variant(r.Policy, calls[i].it.fp), p, &calls[i].it, &out[i]); err != nil {
				return err
			}
			continue
		}
		c := newCall(ctx, deadline, calls[i].it)
		b.peer(addr).submit(c)
		if err := wait(ctx, c); err != nil {
			return err
		}
		if c.at.After(*answered) {
			*answered = c.at
		}
		err := b.finish(r, c, &out[i])
		c.release()
		if err != nil {
			return err
		}
	}
	return nil
}
