package limiter

// takeLevels decides key under every level of p (p.levels, a fixed_window's) as one
// decision, atomically: the shards of the levels' keys are locked in ascending order (so
// two decisions never wait on each other in a cycle), each level's count is decided on a
// copy, and the copies are written back only when every level admits. per[i] receives
// level i's decision (up to the first that denies; with cost 0, every level's), keys[i]
// its key; denied is the first level that denied, or -1.
func takeLevels(st *store[fixedWindow], p *params, keys []string, now, cost int64, per []Decision) (denied, outcome int) {
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
	defer func() {
		for j := k - 1; j >= 0; j-- {
			st.shards[order[j]].mu.Unlock()
		}
	}()
	var es [MaxLevels]*entry[fixedWindow]
	inserted := false
	for i := 0; i < n; i++ {
		sh := &st.shards[hs[i]&st.mask]
		e, head := sh.lookup(hs[i], keys[i])
		if e == nil {
			if ValidateKey(keys[i]) != nil {
				return -1, takeInvalid
			}
			if e = st.insert(sh, hs[i], head, keys[i], now); e == nil {
				st.refused.Add(1)
				return -1, takeFull
			}
			inserted = true
		}
		es[i] = e
	}
	if inserted {
		// Making room for one level's new key may have dropped another level's idle entry
		// found before it: look them up again.
		for i := 0; i < n; i++ {
			if e, _ := st.shards[hs[i]&st.mask].lookup(hs[i], keys[i]); e != es[i] {
				st.refused.Add(1)
				return -1, takeFull
			}
		}
	}
	var tmp [MaxLevels]fixedWindow
	var exp [MaxLevels]int64
	denied = -1
	for i := 0; i < n; i++ {
		tmp[i] = es[i].s
		exp[i] = tmp[i].take(&p.levels[i], now, cost, &per[i])
		if !per[i].Allowed && denied < 0 {
			denied = i
			if cost > 0 {
				break
			}
		}
	}
	for i := 0; i < n; i++ {
		sh := &st.shards[hs[i]&st.mask]
		sh.toFront(es[i])
		if denied < 0 && cost > 0 {
			es[i].s = tmp[i]
			es[i].expires = max(es[i].expires, exp[i])
		}
	}
	return denied, takeOK
}

// decideLevels decides key under a policy with levels into d: the denial of the first
// level with no room (d.Level its key), else the admission nearest its limit. per, when
// not nil, receives each level's decision and keys each level's key (cost 0: all levels).
func (m *Memory) decideLevels(pr *params, key string, now, cost int64, d *Decision, per []Decision, keys []string) int {
	var keyBuf [MaxLevels]string
	var perBuf [MaxLevels]Decision
	n := levelKeys(key, m.p.Levels.Separator, len(pr.levels), &keyBuf)
	if per == nil {
		per = perBuf[:]
	}
	denied, r := takeLevels(m.fw, pr, keyBuf[:n], now, cost, per)
	copy(keys, keyBuf[:n])
	if r != takeOK {
		return r
	}
	best := denied
	if best < 0 {
		best = 0
		for i := 1; i < n; i++ {
			if per[i].Remaining < per[best].Remaining {
				best = i
			}
		}
	}
	*d = per[best]
	if denied >= 0 {
		d.Level = keyBuf[denied]
	}
	return takeOK
}
