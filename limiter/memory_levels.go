package limiter

import "time"

// takeLevels decides key under every level of p (p.levels, a fixed_window's) as one
// decision, atomically: the shards of the levels' keys are locked in ascending order (so
// two decisions never wait on each other in a cycle), each level's count is decided on a
// copy, and the copies are written back only when every level admits. d receives the
// request's decision: the first level that denies (d.Level its key), else the level
// nearest its limit. per, when not nil, receives each level's decision (up to the first
// that denies; with cost 0, every level's).
func takeLevels(st *store[fixedWindow], p *params, keys []string, now, cost int64, d *Decision, per []Decision) int {
	n := len(keys)
	var hs [MaxLevels]uint64
	var order [MaxLevels]uint64 // the distinct shard indexes, ascending
	k := 0
	for i := 0; i < n; i++ {
		hs[i] = st.keys.hash(keys[i])
		si := hs[i] & st.mask
		j := 0
		for j < k && order[j] < si {
			j++
		}
		if j < k && order[j] == si {
			continue
		}
		copy(order[j+1:k+1], order[j:k])
		order[j] = si
		k++
	}
	for _, si := range order[:k] {
		sh := &st.shards[si]
		sh.mu.Lock()
		if now >= sh.nextSweep {
			st.sweepLocked(sh, now)
		}
	}
	var shs [MaxLevels]*shard[fixedWindow]
	for i := 0; i < n; i++ {
		shs[i] = &st.shards[hs[i]&st.mask]
	}
	r := levelsLocked(st, p, keys, &hs, &shs, now, cost, d, per)
	for j := k - 1; j >= 0; j-- {
		st.shards[order[j]].mu.Unlock()
	}
	return r
}

// levelsLocked is takeLevels once the levels' shards are locked.
func levelsLocked(st *store[fixedWindow], p *params, keys []string, hs *[MaxLevels]uint64, shs *[MaxLevels]*shard[fixedWindow], now, cost int64, d *Decision, per []Decision) int {
	n := len(keys)
	var es [MaxLevels]*entry[fixedWindow]
	inserted := false
	for i := 0; i < n; i++ {
		sh := shs[i]
		e := sh.hot // each level's shard keeps its entry hot, as a one-level key's does
		if e == nil || e.hash != hs[i] || !sameKey(e.key, keys[i]) {
			var head *entry[fixedWindow]
			e, head = sh.lookup(hs[i], keys[i])
			if e == nil {
				if ValidateKey(keys[i]) != nil {
					return takeInvalid
				}
				if e = st.insert(sh, hs[i], head, keys[i], now); e == nil {
					st.refused.Add(1)
					return takeFull
				}
				inserted = true
			}
		}
		es[i] = e
	}
	if inserted {
		// Making room for one level's new key may have dropped another level's idle entry
		// found before it: look them up again.
		for i := 0; i < n; i++ {
			if e, _ := shs[i].lookup(hs[i], keys[i]); e != es[i] {
				st.refused.Add(1)
				return takeFull
			}
		}
	}
	var tmp [MaxLevels]fixedWindow
	var exp [MaxLevels]int64
	// Each level is decided into cur; the request's decision so far is in best. Swapping
	// the two pointers keeps the better one without copying a Decision per level.
	var spare Decision
	best, cur := d, &spare
	denied := -1
	idx, start, end := p.windowAt(now) // every level's window: one division or period lookup
	for i := 0; i < n; i++ {
		tmp[i] = es[i].s
		if i == 0 {
			exp[0] = tmp[0].takeIn(&p.levels[0], now, idx, start, end, cost, best)
			cur = best
		} else {
			exp[i] = tmp[i].takeIn(&p.levels[i], now, idx, start, end, cost, cur)
		}
		if per != nil {
			per[i] = *cur
		}
		if denied < 0 && (!cur.Allowed || cur.Remaining < best.Remaining) {
			best, cur = cur, best
		}
		if i == 0 {
			cur = &spare
		}
		if !best.Allowed && denied < 0 {
			denied = i
			best.Level = keys[i]
			if cost > 0 {
				break
			}
		}
	}
	if best != d {
		*d = *best
	}
	for i := 0; i < n; i++ {
		sh := shs[i]
		sh.hot = es[i]
		sh.toFront(es[i])
		if denied < 0 && cost > 0 {
			es[i].s = tmp[i]
			es[i].expires = max(es[i].expires, exp[i])
		}
	}
	return takeOK
}

// decideLevels decides key under a policy with levels into d (see takeLevels); per and
// keys, when not nil, receive each level's decision and key.
func (m *Memory) decideLevels(pr *params, key string, now, cost int64, d *Decision, per []Decision, keys []string) int {
	var keyBuf [MaxLevels]string
	n := levelKeys(key, m.p.Levels.Separator, len(pr.levels), &keyBuf)
	copy(keys, keyBuf[:n])
	return takeLevels(m.fw, pr, keyBuf[:n], now, cost, d, per)
}

// Variant returns a limiter that decides with p's numbers (a plan's limit, capacity, rates
// or level limits) on m's keys and state: p must be m's policy but for those numbers. The
// backtest replays plans with it.
func (m *Memory) Variant(p Policy) (*Memory, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	same := p
	same.Limit, same.Capacity, same.RefillPerSecond, same.LeakPerSecond = m.p.Limit, m.p.Capacity, m.p.RefillPerSecond, m.p.LeakPerSecond
	same.Levels.Limits, same.Source, same.Backend, same.OnBackendError, same.Timeout = m.p.Levels.Limits, m.p.Source, m.p.Backend, m.p.OnBackendError, m.p.Timeout
	if same != m.p {
		return nil, &PolicyError{Policy: p.Name, Msg: "a variant may change only the limit, capacity, rates and level limits"}
	}
	v := &Memory{p: p, pr: newParams(&p), clock: m.clock, fw: m.fw, sl: m.sl, sc: m.sc, tb: m.tb, lb: m.lb}
	return v, nil
}

// PeekLevels is each level's decision and key for key at now, org first, charging nothing
// (a decision of cost 0): what Service.Quota reports of a policy with levels. The cluster
// backend's owner answers a peek with it. An error is ErrInvalidKey, ErrStoreFull, or a
// PolicyError for a policy without levels.
func (m *Memory) PeekLevels(key string, now time.Time) ([]Decision, []string, error) {
	if m.p.Levels.N == 0 {
		return nil, nil, &PolicyError{Policy: m.p.Name, Msg: "the policy has no levels"}
	}
	if err := ValidateKey(key); err != nil {
		return nil, nil, ErrInvalidKey
	}
	keys := make([]string, MaxLevels)
	n := levelKeys(key, m.p.Levels.Separator, len(m.pr.levels), (*[MaxLevels]string)(keys))
	keys = keys[:n]
	per := make([]Decision, n)
	var agg Decision
	if takeLevels(m.fw, &m.pr, keys, now.UnixNano(), 0, &agg, per) != takeOK {
		return nil, nil, ErrStoreFull
	}
	return per, keys, nil
}
