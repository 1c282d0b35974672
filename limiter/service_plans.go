package limiter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// PlanChecker is a Checker whose bound a plan can set per key (a usage rule's max): the
// Service calls CheckMax with the plan's bound instead of Check.
type PlanChecker interface {
	Checker
	CheckMax(ctx context.Context, key string, now time.Time, cost int64, max float64) (Decision, error)
}

// PlanRefuser is a PlanChecker that may refuse every plan: SetPlans refuses a plan naming
// it with PlanRefusal's reason when that is not "" (a usage rule with levels, whose one max
// per level a plan's one max cannot give).
type PlanRefuser interface {
	PlanChecker
	PlanRefusal() string
}

// planTable is the Service's plans as it decides with them: the Plans, each plan's
// numbers resolved per running policy, and the keys' plans set by SetKeyPlans (the
// plans topic), which win over the file's.
type planTable struct {
	ps    *Plans
	over  [][]*override // [plan index][running idx]; nil: the policy's own numbers
	topic *keyPlans     // key → plan index, from SetKeyPlans; nil: none
	base  []*override   // [running idx]: the numbers SetLimits gave; nil (or a nil entry): the policy's own
}

// override is one plan's numbers for one policy (p, pr) or checker (max).
type override struct {
	p   Policy
	pr  params
	max float64
}

// levelOverride returns key's numbers under rt, a policy with levels: each level's limit
// is that of the plan of the level's own key (org-1's plan sets org-1's limit, whoever of
// its users asks), else the policy's; nil when no level's plan lists the policy. It
// allocates (a policy with levels and plans only).
func (t *planTable) levelOverride(rt *running, key string) *override {
	var keys [MaxLevels]string
	n := levelKeys(key, rt.p.Levels.Separator, rt.p.Levels.N, &keys)
	own := t.own(rt)
	p := own.p
	planned := false
	for i := 0; i < n; i++ {
		if j := t.planOf(keys[i]); j >= 0 {
			if ov := t.over[j][rt.idx]; ov != nil {
				p.Levels.Limits[i] = ov.p.Levels.Limits[i]
				planned = true
			}
		}
	}
	if !planned {
		return nil
	}
	ov := &override{p: p}
	if rt.mem != nil {
		ov.pr = own.pr // its calendar's cached period shared
		ov.pr.quota = p.Quota()
		ov.pr.levels = make([]params, len(own.pr.levels))
		for i := range ov.pr.levels {
			ov.pr.levels[i] = own.pr.levels[i]
			ov.pr.levels[i].quota = p.Levels.Limits[i]
		}
	} else {
		ov.pr.quota = p.Quota()
	}
	return ov
}

// planOf returns the plan index of key, or -1.
func (t *planTable) planOf(key string) int32 {
	if j, ok := t.topic.get(key); ok {
		return j
	}
	if t.ps == nil {
		return -1 // numbers from SetLimits only
	}
	return t.ps.index(key)
}

// SetPlans replaces the Service's plans with ps (nil: none), after checking every name it
// lists against the policies and rules and every number against the policy's algorithm
// (each problem a *PlanError at its line, joined). On error the plans in use stay. The
// keys' plans set by SetKeyPlans are kept when their plan is still listed.
// It counts slide_limiter_plan_updates_total{source="file"}.
func (s *Service) SetPlans(ps *Plans) error {
	err := s.setPlans(ps)
	s.countPlans(err)
	return err
}

func (s *Service) countPlans(err error) {
	result := "applied"
	if err != nil {
		result = "refused"
	}
	s.metrics.plans.WithLabelValues("file", result).Inc()
}

// LoadPlans reads the plans file at path and sets it (SetPlans); a file that cannot be
// read or parsed is refused and counted the same way, the plans in use kept.
func (s *Service) LoadPlans(path string) error {
	ps, err := LoadPlans(path)
	if err != nil {
		s.countPlans(err)
		return err
	}
	return s.SetPlans(ps)
}

func (s *Service) setPlans(ps *Plans) error {
	s.planMu.Lock()
	defer s.planMu.Unlock()
	old := s.plans.Load()
	var base []*override
	if old != nil {
		base = old.base
	}
	t, err := s.planTable(ps, base, old)
	if err != nil {
		return err
	}
	s.plans.Store(t)
	return nil
}

// planTable resolves ps over the policies' numbers (base: SetLimits's), keeping old's keys'
// plans that ps still lists; nil when there is nothing to resolve. s.planMu must be held.
func (s *Service) planTable(ps *Plans, base []*override, old *planTable) (*planTable, error) {
	if ps == nil {
		if base == nil {
			return nil, nil
		}
		return &planTable{base: base}, nil
	}
	t := &planTable{ps: ps, over: make([][]*override, len(ps.names)), base: base}
	var errs []error
	for j := range ps.names {
		t.over[j] = make([]*override, len(s.names))
		for _, name := range sortedKeys(ps.limits[j]) {
			l := ps.limits[j][name]
			rt := s.byName[name]
			if rt == nil {
				errs = append(errs, &PlanError{Source: l.Source, Msg: fmt.Sprintf("plan %q: unknown policy or rule %q (known: %s)",
					ps.names[j], ClipName(name), strings.Join(s.names, ", "))})
				continue
			}
			if rt.checker != nil {
				if _, ok := rt.checker.(PlanChecker); !ok || !l.HasMax || len(l.fields) != 1 {
					errs = append(errs, &PlanError{Source: l.Source, Msg: fmt.Sprintf("plan %q: %q is a usage rule: give it max only", ps.names[j], name)})
					continue
				}
				if pr, ok := rt.checker.(PlanRefuser); ok && pr.PlanRefusal() != "" {
					errs = append(errs, &PlanError{Source: l.Source, Msg: fmt.Sprintf("plan %q: %s", ps.names[j], pr.PlanRefusal())})
					continue
				}
				t.over[j][rt.idx] = &override{max: l.Max}
				continue
			}
			p, err := l.Apply(t.own(rt).p)
			if err != nil {
				var pe *PlanError
				if errors.As(err, &pe) {
					pe.Msg = fmt.Sprintf("plan %q: %s", ps.names[j], pe.Msg)
				}
				errs = append(errs, err)
				continue
			}
			t.over[j][rt.idx] = &override{p: p, pr: newParams(&p)}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if old != nil && old.ps != nil && old.topic.len() > 0 {
		// The keys' plans by name, into this file's indexes; a plan no longer listed drops.
		idx := map[string]int32{}
		for j, n := range ps.names {
			idx[n] = int32(j)
		}
		kept := map[string]int32{}
		old.topic.each(func(key string, j int32) {
			if nj, ok := idx[old.ps.names[j]]; ok {
				kept[key] = nj
			}
		})
		t.topic = &keyPlans{base: kept}
	}
	return t, nil
}

// ErrUnknownPlan: SetKeyPlans named a plan the plans do not list (or there are none).
var ErrUnknownPlan = errors.New("unknown plan")

// SetKeyPlans sets the plans of keys (key → plan name; an empty name drops the key's own
// and its plan is the file's again), winning over the plans file, as a billing system
// publishes them (slide serve --plans-topic). A plan the plans do not list is refused
// with ErrUnknownPlan, that key's plan kept, and counted
// (slide_limiter_plan_updates_total{source="topic",result="refused"}); the others apply.
func (s *Service) SetKeyPlans(keys map[string]string) error {
	s.planMu.Lock()
	defer s.planMu.Unlock()
	old := s.plans.Load()
	var errs []error
	changes := make(map[string]int32, len(keys))
	for k, plan := range keys {
		j := int32(noPlan)
		if plan != "" {
			if j = old.indexOf(plan); j < 0 {
				errs = append(errs, fmt.Errorf("key %q: %w %q", ClipName(k), ErrUnknownPlan, ClipName(plan)))
				s.metrics.plans.WithLabelValues("topic", "refused").Inc()
				continue
			}
		}
		changes[k] = j
	}
	if old != nil && len(changes) > 0 {
		s.plans.Store(&planTable{ps: old.ps, over: old.over, topic: old.topic.with(changes), base: old.base})
		s.metrics.plans.WithLabelValues("topic", "applied").Add(float64(len(changes)))
	}
	return errors.Join(errs...)
}

// indexOf is the index of plan name in t's plans, or -1 (t nil: no plans).
func (t *planTable) indexOf(name string) int32 {
	if t == nil || t.ps == nil {
		return -1
	}
	for j, n := range t.ps.names {
		if n == name {
			return int32(j)
		}
	}
	return -1
}

// Plans returns the plans in use, or nil.
func (s *Service) Plans() *Plans {
	if t := s.plans.Load(); t != nil {
		return t.ps
	}
	return nil
}

// PlanOf returns key's plan (the topic's, else the file's), or "" when it has none.
func (s *Service) PlanOf(key string) string {
	t := s.plans.Load()
	if t == nil {
		return ""
	}
	if j := t.planOf(key); j >= 0 {
		return t.ps.names[j]
	}
	return ""
}

// EffectivePolicy returns the policy as key's plan sets it (with levels, each level's own
// plan), and key's plan ("" for none).
func (s *Service) EffectivePolicy(name, key string) (Policy, string, bool) {
	rt, ok := s.byName[name]
	if !ok || rt.checker != nil {
		return Policy{}, "", false
	}
	t := s.plans.Load()
	if t == nil {
		return rt.p, "", true
	}
	j := t.planOf(key)
	plan := ""
	if j >= 0 {
		plan = t.ps.names[j]
	}
	if rt.p.Levels.N > 0 {
		if ov := t.levelOverride(rt, key); ov != nil {
			return ov.p, plan, true
		}
		return t.own(rt).p, plan, true
	}
	if j >= 0 && t.over[j][rt.idx] != nil {
		return t.over[j][rt.idx].p, plan, true
	}
	return t.own(rt).p, plan, true
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
