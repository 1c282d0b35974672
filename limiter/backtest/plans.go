package backtest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/slide-metrics/slide/limiter"
)

// planRun is one plan's numbers for one policy (m, a variant of the policy's limiter on
// its state) or rule (max).
type planRun struct {
	m      *limiter.Memory
	max    float64
	hasMax bool
}

// setPlans resolves Config.Plans against the replay's policies and rules: each name a plan
// lists must be one of them (a *limiter.PlanError at its line otherwise), a policy gets a
// variant of its limiter with the plan's numbers, a rule the plan's max.
func (r *Replayer) setPlans() error {
	ps := r.cfg.Plans
	if ps == nil {
		return nil
	}
	var errs []error
	for _, plan := range ps.Names() {
		for _, name := range ps.Listed(plan) {
			l, _ := ps.Limits(plan, name)
			run := r.by[name]
			if run == nil {
				errs = append(errs, &limiter.PlanError{Source: l.Source, Msg: fmt.Sprintf("plan %q: unknown policy or rule %q (known: %s)",
					plan, limiter.ClipName(name), strings.Join(r.names(), ", "))})
				continue
			}
			if run.plans == nil {
				run.plans = map[string]planRun{}
			}
			if run.check != nil {
				if !l.HasMax || l.Limit != 0 || l.Capacity != 0 || l.Levels != nil {
					errs = append(errs, &limiter.PlanError{Source: l.Source, Msg: fmt.Sprintf("plan %q: %q is a usage rule: give it max only", plan, name)})
					continue
				}
				if pr, ok := run.check.(limiter.PlanRefuser); ok && pr.PlanRefusal() != "" {
					errs = append(errs, &limiter.PlanError{Source: l.Source, Msg: fmt.Sprintf("plan %q: %s", plan, pr.PlanRefusal())})
					continue
				}
				run.plans[plan] = planRun{max: l.Max, hasMax: true}
				continue
			}
			p, err := l.Apply(run.p)
			if err == nil {
				var m *limiter.Memory
				if m, err = run.m.Variant(p); err == nil {
					run.plans[plan] = planRun{m: m}
					continue
				}
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// planOf returns key's plan's numbers for run (zero: the policy's own) and the plan. A
// policy with levels takes each level's limit from the plan of the level's own key, as
// the Service does.
func (r *Replayer) planOf(run *policyRun, key string) (planRun, string) {
	if r.cfg.Plans == nil {
		return planRun{}, ""
	}
	plan, _ := r.cfg.Plans.Lookup(key)
	if run.check == nil && run.p.Levels.N > 0 {
		return r.levelsRun(run, key), plan
	}
	if plan == "" {
		return planRun{}, ""
	}
	return run.plans[plan], plan
}

// levelsRun is the variant of run's limiter whose level limits are those of key's levels'
// plans, one per distinct set of limits.
func (r *Replayer) levelsRun(run *policyRun, key string) planRun {
	p := run.p
	keys := p.Levels.LevelKeys(key)
	for i, lk := range keys {
		if plan, ok := r.cfg.Plans.Lookup(lk); ok {
			if l, ok := r.cfg.Plans.Limits(plan, p.Name); ok && l.Levels != nil {
				p.Levels.Limits[i] = l.Levels[i]
			}
		}
	}
	if p.Levels.Limits == run.p.Levels.Limits {
		return planRun{}
	}
	if run.levels == nil {
		run.levels = map[[limiter.MaxLevels]int64]*limiter.Memory{}
	}
	m := run.levels[p.Levels.Limits]
	if m == nil {
		var err error
		if m, err = run.m.Variant(p); err != nil {
			return planRun{} // setPlans validated every plan's levels; not reached
		}
		run.levels[p.Levels.Limits] = m
	}
	return planRun{m: m}
}

// planName is key's plan, or "".
func (r *Replayer) planName(key string) string {
	plan, _ := r.cfg.Plans.Lookup(key)
	return plan
}
