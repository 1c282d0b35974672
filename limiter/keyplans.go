package limiter

import "maps"

// keyPlans is the keys' plans a topic set (SetKeyPlans), as plan indexes: a large base that
// every planTable since its last merge shares, and the recent changes over it. A table is
// never changed once stored (decisions read it without a lock), so a change makes a new one;
// copying every key's plan for each change made a topic of a million tenants take five
// minutes to read from its start (each batch of 10,000 records copied all the keys before
// it). Now a change copies the recent changes alone, and they merge into a new base when they
// reach a quarter of it: each key is copied a bounded number of times on average.
type keyPlans struct {
	base map[string]int32 // never changed once shared
	over map[string]int32 // changes since the base; noPlan: the key's plan was dropped
}

// noPlan in keyPlans.over drops a key of the base: its plan is the file's again.
const noPlan = -1

// minMerge is the fewest changes kept over the base before they merge into it.
const minMerge = 1 << 14

// get returns key's plan index and true, or false when the topic gives key none.
func (k *keyPlans) get(key string) (int32, bool) {
	if k == nil {
		return 0, false
	}
	if j, ok := k.over[key]; ok {
		return j, j != noPlan
	}
	j, ok := k.base[key]
	return j, ok
}

// len is how many keys have a plan (an upper bound while drops are pending over the base).
func (k *keyPlans) len() int {
	if k == nil {
		return 0
	}
	return len(k.base) + len(k.over)
}

// with returns the keyPlans with changes applied (key → plan index, or noPlan to drop the
// key's); k is not changed.
func (k *keyPlans) with(changes map[string]int32) *keyPlans {
	var base, over map[string]int32
	if k != nil {
		base = k.base
		over = maps.Clone(k.over)
	}
	if over == nil {
		over = make(map[string]int32, len(changes))
	}
	for key, j := range changes {
		if _, inBase := base[key]; j == noPlan && !inBase {
			delete(over, key)
			continue
		}
		over[key] = j
	}
	if len(over) < max(minMerge, len(base)/4) {
		return &keyPlans{base: base, over: over}
	}
	merged := make(map[string]int32, len(base)+len(over))
	maps.Copy(merged, base)
	for key, j := range over {
		if j == noPlan {
			delete(merged, key)
		} else {
			merged[key] = j
		}
	}
	return &keyPlans{base: merged}
}

// each calls fn for every key with a plan.
func (k *keyPlans) each(fn func(key string, j int32)) {
	if k == nil {
		return
	}
	for key, j := range k.base {
		if _, changed := k.over[key]; !changed {
			fn(key, j)
		}
	}
	for key, j := range k.over {
		if j != noPlan {
			fn(key, j)
		}
	}
}
