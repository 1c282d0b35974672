package clusterlimit

import (
	"encoding/binary"
	"hash/fnv"
	"math"

	"github.com/slide-metrics/slide/limiter"
)

// Plans, calendar windows and levels (issue #29) under backend cluster.
//
// A key's plan changes the numbers its policy decides by, not its state: the owner decides
// a planned key with a variant of the policy's limiter (limiter.Memory.Variant: the plan's
// numbers on the same keys and state), so checkpoints, handovers and forgetting cover it
// with the policy's own keys. A forwarded decision names its policy and the fingerprint of
// the numbers its caller decided by; the owner resolves the key's plan with its own plans
// (limiter.PolicyResolver, the Service's EffectivePolicy) and decides only when that
// gives the same fingerprint, else answers StatusPolicy: instances whose plans disagree (a
// plans file rolled out to some instances only) fall back to on_backend_error rather than
// count one key by two sets of numbers.
//
// A policy with levels places a key by its first level (limiter.Policy.RouteKey): every
// key of an org, and the org's own counter, lives on the org's owner, which decides all
// levels in one step as memory does. The cost: an org's traffic is one owner's, however
// many users it has.

// route is the part of key that names its partition under o's policy.
func (o *owned) route(key string) string { return o.p.RouteKey(key) }

// SetResolver is limiter.PolicyResolver: the Service's EffectivePolicy, which an owner asks
// for a forwarded key whose fingerprint is not its policy's own.
func (b *Backend) SetResolver(fn func(name, key string) (limiter.Policy, string, bool)) {
	b.resolve.Store(&fn)
}

var _ limiter.PolicyResolver = (*Backend)(nil)

// sameNumbers reports whether p decides by o's own numbers (no plan, or a plan that
// changes nothing): the common case, with no fingerprint to compute.
func (o *owned) sameNumbers(p *limiter.Policy) bool {
	return p.Limit == o.p.Limit && p.Capacity == o.p.Capacity && p.RefillPerSecond == o.p.RefillPerSecond &&
		p.LeakPerSecond == o.p.LeakPerSecond && p.Levels.Limits == o.p.Levels.Limits
}

// fingerprintOf is the fingerprint a caller sends for a decision by p.
func (o *owned) fingerprintOf(p *limiter.Policy) uint64 {
	if o.sameNumbers(p) {
		return o.fp
	}
	return Fingerprint(p)
}

// variant is the limiter deciding by p's numbers on o's state (o.mem itself for o's own
// numbers); nil when p is not a variant of o's policy. Variants are kept by fingerprint:
// one per plan that lists the policy (with levels, per combination of the levels' plans in
// use), so their number is bounded by the plans file.
func (o *owned) variant(p *limiter.Policy, fp uint64) *limiter.Memory {
	if fp == o.fp {
		return o.mem
	}
	if v, ok := o.variants.Load(fp); ok {
		return v.(*limiter.Memory)
	}
	v, err := o.mem.Variant(*p)
	if err != nil {
		return nil
	}
	got, _ := o.variants.LoadOrStore(fp, v)
	return got.(*limiter.Memory)
}

// forwarded is the limiter an owner decides a forwarded item by: its policy's own when the
// fingerprint is the policy's, else the variant of the key's plan here when that plan gives
// the same fingerprint; nil when the numbers disagree (StatusPolicy).
func (b *Backend) forwarded(o *owned, it *item) *limiter.Memory {
	if it.fp == o.fp {
		return o.mem
	}
	if v, ok := o.variants.Load(it.fp); ok {
		// Known numbers; still the key's own plan here? A key moved to another plan must
		// not be decided by its old one's numbers.
		if p, ok := b.effective(o, it.key); ok && Fingerprint(&p) == it.fp {
			return v.(*limiter.Memory)
		}
		return nil
	}
	p, ok := b.effective(o, it.key)
	if !ok || Fingerprint(&p) != it.fp {
		return nil
	}
	return o.variant(&p, it.fp)
}

// effective is key's policy under this instance's plans.
func (b *Backend) effective(o *owned, key string) (limiter.Policy, bool) {
	fn := b.resolve.Load()
	if fn == nil {
		return o.p, true
	}
	p, _, ok := (*fn)(o.p.Name, key)
	return p, ok
}

// Fingerprint is what an owner checks of a forwarded decision's policy: its algorithm,
// its numbers (a plan's, when the key has one), its calendar and time zone and its levels,
// so instances whose policy files or plans disagree refuse rather than count alike.
func Fingerprint(p *limiter.Policy) uint64 {
	var buf [160]byte
	b := buf[:0]
	b = binary.AppendVarint(b, int64(p.Algorithm))
	b = binary.AppendVarint(b, p.Limit)
	b = binary.AppendVarint(b, int64(p.Window))
	b = binary.AppendVarint(b, p.Capacity)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(p.RefillPerSecond))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(p.LeakPerSecond))
	b = binary.AppendVarint(b, int64(p.MaxDelay))
	b = binary.AppendVarint(b, int64(p.Calendar))
	if p.Calendar != 0 && p.Location != nil {
		b = appendString(b, p.Location.String())
	}
	if p.Levels.N > 0 {
		b = binary.AppendVarint(b, int64(p.Levels.N))
		b = appendString(b, p.Levels.Separator)
		for _, l := range p.Levels.Limits[:p.Levels.N] {
			b = binary.AppendVarint(b, l)
		}
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}
