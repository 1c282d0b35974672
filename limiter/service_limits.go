package limiter

import (
	"errors"
	"fmt"
	"slices"
)

// ErrNotNumbers: SetLimits was given a policy that differs from the running one in more
// than its numbers (its algorithm, window, backend, …), which needs a new Service.
var ErrNotNumbers = errors.New("only a policy's numbers change while it runs")

// own returns rt's numbers: SetLimits's when it gave some, else the policy's own. pr is
// meaningful for a memory policy only.
func (t *planTable) own(rt *running) override {
	if t != nil && t.base != nil && t.base[rt.idx] != nil {
		return *t.base[rt.idx]
	}
	ov := override{p: rt.p}
	if rt.mem != nil {
		ov.pr = rt.mem.pr
	}
	return ov
}

// numbersOnly returns p with running's numbers (limit, capacity, refill, leak, level limits)
// and source, to compare with running: equal when p differs from it in numbers alone.
func numbersOnly(p, running Policy) Policy {
	p.Limit, p.Capacity, p.RefillPerSecond, p.LeakPerSecond = running.Limit, running.Capacity, running.RefillPerSecond, running.LeakPerSecond
	p.Levels.Limits, p.Source = running.Levels.Limits, running.Source
	if p.Location.String() == running.Location.String() {
		p.Location = running.Location // loaded again, a zone is a new pointer
	}
	return p
}

func sameNumbers(a, b Policy) bool {
	return a.Limit == b.Limit && a.Capacity == b.Capacity && a.RefillPerSecond == b.RefillPerSecond &&
		a.LeakPerSecond == b.LeakPerSecond && a.Levels.Limits == b.Levels.Limits
}

// SetLimits gives running policies new numbers — Limit, Capacity, RefillPerSecond,
// LeakPerSecond and the level limits — and keeps their state: a key's count in the current
// window (or its tokens) stays and is held to the new numbers from the next decision on, as
// envoyproxy/ratelimit's Redis counters, keyed by descriptor and window, keep counting
// when a limit changes. Decisions already under way finish with the numbers they began
// with. A policy not in ps keeps its numbers; the plans are resolved again over the new
// ones (a plan's numbers still win for its keys).
//
// Every policy in ps must be running and validate, and differ from the running one in
// its numbers alone (ErrNotNumbers otherwise: a new algorithm, window, backend or failure
// mode needs a new Service). On error nothing changes. A raised limit admits at once: the
// denials cached for a Redis policy answer only decisions by the numbers they were made by.
func (s *Service) SetLimits(ps []Policy) error {
	s.planMu.Lock()
	defer s.planMu.Unlock()
	old := s.plans.Load()
	base := make([]*override, len(s.names))
	if old != nil && old.base != nil {
		copy(base, old.base)
	}
	var errs []error
	for _, p := range ps {
		rt := s.byName[p.Name]
		if rt == nil || rt.checker != nil {
			errs = append(errs, fmt.Errorf("%s: %w %q", p.Source, ErrUnknownPolicy, ClipName(p.Name)))
			continue
		}
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if numbersOnly(p, rt.p) != rt.p {
			errs = append(errs, fmt.Errorf("%s: policy %q: %w (limit, capacity, refill, leak, level limits); its other fields are as at start (%s)",
				p.Source, p.Name, ErrNotNumbers, rt.p.Source))
			continue
		}
		p.Location = rt.p.Location
		if sameNumbers(rt.p, p) {
			base[rt.idx] = nil // back to the policy's own numbers
			continue
		}
		ov := &override{p: p, pr: newParams(&p)}
		base[rt.idx] = ov
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if !slices.ContainsFunc(base, func(o *override) bool { return o != nil }) {
		base = nil
	}
	var ps0 *Plans
	if old != nil {
		ps0 = old.ps
	}
	t, err := s.planTable(ps0, base, nil)
	if err != nil {
		return fmt.Errorf("the plans over the new numbers: %w", err)
	}
	if t != nil && old != nil {
		t.topic = old.topic // the same plans: every key's plan stays
	}
	s.plans.Store(t)
	return nil
}
