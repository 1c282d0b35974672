package limiter

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// A Memory's state leaves and enters it key by key, for a backend that hands keys from one
// process to another (limiter/clusterlimit's checkpoints): Export writes each live key's
// state in a compact binary form, Import puts it back in another Memory of the same policy.

// ErrBadState is a state Import cannot read (truncated, or of another algorithm).
var ErrBadState = errors.New("limiter: bad key state")

// Export calls fn with every key that keep accepts and whose state is not back to initial
// at now, its expiry (unix ns: from then on the state is initial again) and its state,
// which fn must copy to keep. fn is called for a key right after keep accepted it, with
// no other call between. Shards are visited one at a time, each locked while its keys are
// exported.
func (m *Memory) Export(now time.Time, keep func(key string) bool, fn func(key string, expires int64, state []byte)) {
	var buf []byte
	switch {
	case m.fw != nil:
		exportStore(m.fw, now.UnixNano(), keep, fn, buf)
	case m.sl != nil:
		exportStore(m.sl, now.UnixNano(), keep, fn, buf)
	case m.sc != nil:
		exportStore(m.sc, now.UnixNano(), keep, fn, buf)
	case m.tb != nil:
		exportStore(m.tb, now.UnixNano(), keep, fn, buf)
	case m.lb != nil:
		exportStore(m.lb, now.UnixNano(), keep, fn, buf)
	}
}

// Import sets key's state (replacing what it held) from Export's form, expiring at
// expires (unix ns). The state is checked against m's numbers (with levels, those of the
// level key is at): import a planned key through the Variant of its plan. ErrBadState: the
// state does not read as this policy's algorithm's, or passes its limit or capacity;
// ErrStoreFull: no room; ErrInvalidKey.
func (m *Memory) Import(key string, expires int64, state []byte) error {
	if ValidateKey(key) != nil {
		return ErrInvalidKey
	}
	switch {
	case m.fw != nil:
		return importStore(m.fw, m.importParams(key), key, expires, state)
	case m.sl != nil:
		return importStore(m.sl, &m.pr, key, expires, state)
	case m.sc != nil:
		return importStore(m.sc, &m.pr, key, expires, state)
	case m.tb != nil:
		return importStore(m.tb, &m.pr, key, expires, state)
	default:
		return importStore(m.lb, &m.pr, key, expires, state)
	}
}

// importParams is what key's state is checked against: with levels, the params of the
// level key is the key of (org-1 the first, org-1/team-a the second), since an org's or a
// team's counter holds up to its own level's limit, not the smallest level's.
func (m *Memory) importParams(key string) *params {
	if len(m.pr.levels) == 0 {
		return &m.pr
	}
	var keys [MaxLevels]string
	n := levelKeys(key, m.p.Levels.Separator, len(m.pr.levels), &keys)
	return &m.pr.levels[n-1]
}

// Forget drops every key drop accepts (keys handed to another process).
func (m *Memory) Forget(drop func(key string) bool) {
	switch {
	case m.fw != nil:
		forgetStore(m.fw, drop)
	case m.sl != nil:
		forgetStore(m.sl, drop)
	case m.sc != nil:
		forgetStore(m.sc, drop)
	case m.tb != nil:
		forgetStore(m.tb, drop)
	case m.lb != nil:
		forgetStore(m.lb, drop)
	}
}

func exportStore[S any](st *store[S], now int64, keep func(string) bool, fn func(string, int64, []byte), buf []byte) {
	st.locked(func(sh *shard[S]) {
		for e := sh.front; e != nil; e = e.next {
			if e.expires > now && keep(e.key) {
				buf = appendState(buf[:0], &e.s)
				fn(e.key, e.expires, buf)
			}
		}
	})
}

func importStore[S any](st *store[S], p *params, key string, expires int64, state []byte) error {
	var s S
	if !readState(&s, state, p) {
		return ErrBadState
	}
	h := st.keys.hash(key)
	sh := &st.shards[h&st.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, head := sh.lookup(h, key)
	if e == nil {
		if e = st.insert(sh, h, head, key, 0); e == nil {
			st.refused.Add(1)
			return ErrStoreFull
		}
	}
	e.s, e.expires = s, expires
	sh.hot = nil
	if st.grows.bytes != nil {
		size := entryOverhead[S]() + int64(len(e.key)) + st.grows.bytes(&e.s)
		sh.bytes += size - e.size
		e.size = size
	}
	return nil
}

func forgetStore[S any](st *store[S], drop func(string) bool) {
	st.locked(func(sh *shard[S]) {
		for e := sh.front; e != nil; {
			next := e.next
			if drop(e.key) {
				st.removeLocked(sh, e)
			}
			e = next
		}
	})
}

// appendState writes one algorithm's state: varints, the token bucket's tokens as float64
// bits, a sliding log's entries oldest first (past logCompactFrom entries, as differences).
func appendState(b []byte, s any) []byte {
	switch s := s.(type) {
	case *fixedWindow:
		b = binary.AppendVarint(b, s.index)
		b = binary.AppendVarint(b, s.count)
	case *slidingCounter:
		b = binary.AppendVarint(b, s.index)
		b = binary.AppendVarint(b, s.cur)
		b = binary.AppendVarint(b, s.prev)
	case *tokenBucket:
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.tokens))
		for _, v := range [...]int64{s.last, s.fullAt, s.allowAt, s.denyCost} {
			b = binary.AppendVarint(b, v)
		}
		init := byte(0)
		if s.init {
			init = 1
		}
		b = append(b, init)
	case *gcra:
		b = binary.AppendVarint(b, s.tat)
	case *slidingLog:
		if s.n > logCompactFrom {
			return appendLogCompact(b, s)
		}
		b = binary.AppendVarint(b, s.base)
		b = binary.AppendUvarint(b, uint64(s.n))
		for i := range s.n {
			e := s.at(i)
			b = binary.AppendVarint(b, e.t)
			b = binary.AppendVarint(b, e.end)
		}
	}
	return b
}

// A sliding log's entries written absolute take ~12 bytes each (t, unix ns, 9; end, a
// running total of units, 3): a log of MaxLogLimit entries took 1.2 MB, more than a
// broker's record (message.max.bytes, 1 MB by default), so its partition's checkpoint
// failed and a new owner admitted the key's whole limit again. Past logCompactFrom entries
// a log is written compact instead: the marker logCompact, base, n, then each entry as
// its differences from the one before (t from the previous t, the first from 0; end from
// the previous end, the first from base) as uvarints: ~5 bytes an entry for a limit of
// 100,000 an hour, at most ~8 for any log of MaxLogLimit entries within maxInstant. A
// smaller log keeps the absolute form, which a slide from before the compact form reads
// too, so a rolling upgrade hands it over either way.
const (
	logCompactFrom = 1024
	// logCompact opens the compact form: a byte the absolute form never begins with,
	// since its first varint, base, is never negative (and 1 is the varint of −1).
	logCompact = 1
)

func appendLogCompact(b []byte, s *slidingLog) []byte {
	b = append(b, logCompact)
	b = binary.AppendUvarint(b, uint64(s.base))
	b = binary.AppendUvarint(b, uint64(s.n))
	prev := logEntry{end: s.base}
	for i := range s.n {
		e := s.at(i)
		b = binary.AppendUvarint(b, uint64(e.t-prev.t))
		b = binary.AppendUvarint(b, uint64(e.end-prev.end))
		prev = *e
	}
	return b
}

// readLogCompact reads appendLogCompact's form (after its marker) into s, as readState
// reads the absolute one: false when it does not read exactly, or an entry is out of order
// or past maxInstant.
func readLogCompact(s *slidingLog, b []byte) bool {
	uvarint := func() (uint64, bool) {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return v, true
	}
	base, ok := uvarint()
	if !ok || base > maxInstant {
		return false
	}
	n, ok := uvarint()
	if !ok || n > MaxLogLimit || n > uint64(len(b))/2 { // every entry takes 2 bytes or more
		return false
	}
	e := make([]logEntry, n)
	prev := logEntry{end: int64(base)}
	for i := range e {
		dt, ok1 := uvarint()
		de, ok2 := uvarint()
		if !ok1 || !ok2 || dt > uint64(maxInstant-prev.t) || de == 0 || de > uint64(maxInstant-prev.end) {
			return false
		}
		e[i] = logEntry{t: prev.t + int64(dt), end: prev.end + int64(de)}
		prev = e[i]
	}
	s.base, s.e, s.head, s.n = int64(base), e, 0, len(e)
	return len(b) == 0
}

// maxInstant bounds an imported instant (unix ns, year 2116): differences of two stay in
// int64.
const maxInstant = 1 << 62

// within reports 0 ≤ v ≤ most.
func within(v, most int64) bool { return v >= 0 && v <= most }

// readState reads appendState's form into s; false when it does not read exactly, or holds
// what the algorithm's arithmetic does not expect (negative counts or tokens, a sliding
// log's entries out of order). A state past p's quota (a plan's limit or capacity cut
// since it was written) is brought down to it, as a key over its limit in memory stays
// denied: refused, the key would start afresh and admit its whole limit again.
func readState(s any, b []byte, p *params) bool {
	bad := false
	varint := func() int64 {
		v, n := binary.Varint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	switch s := s.(type) {
	case *fixedWindow:
		s.index, s.count = varint(), varint()
		bad = bad || s.count < 0
		s.count = min(s.count, p.quota)
	case *slidingCounter:
		s.index, s.cur, s.prev = varint(), varint(), varint()
		bad = bad || s.cur < 0 || s.prev < 0
		s.cur, s.prev = min(s.cur, p.quota), min(s.prev, p.quota)
	case *tokenBucket:
		if len(b) < 9 {
			return false
		}
		s.tokens = math.Float64frombits(binary.BigEndian.Uint64(b))
		b = b[8:]
		s.last, s.fullAt, s.allowAt, s.denyCost = varint(), varint(), varint(), varint()
		// The refill arithmetic expects tokens in [0, capacity]: a wait solved from
		// −1e300 tokens would not end.
		if bad || len(b) != 1 || b[0] > 1 || !(s.tokens >= 0 && s.tokens <= math.MaxInt64) || s.denyCost < 0 ||
			!within(s.last, maxInstant) || !within(s.fullAt, maxInstant) || !within(s.allowAt, maxInstant) {
			return false
		}
		// A bucket over capacity (its plan's capacity was cut) is full, as the next
		// refill would make it; a denial solved for a cost it can no longer hold is
		// forgotten (such a cost is refused before it is decided).
		s.tokens = min(s.tokens, float64(p.quota))
		if s.denyCost > p.quota {
			s.denyCost, s.allowAt = 0, 0
		}
		s.init = b[0] == 1
		b = b[1:]
	case *gcra:
		s.tat = varint()
		bad = bad || !within(s.tat, maxInstant)
	case *slidingLog:
		if len(b) > 0 && b[0] == logCompact {
			if !readLogCompact(s, b[1:]) {
				return false
			}
			b = nil
		} else if !readLogAbsolute(s, &b) {
			return false
		}
		e := s.e[:s.n]
		prev := logEntry{end: s.base}
		if s.n > 0 {
			prev = e[s.n-1]
		}
		// A log over the quota (its plan's limit was cut) keeps its newest entries up to
		// the quota: the key is denied until they leave, as it would be with all of them
		// for a log of single units, since the older ones leave first.
		i := 0
		for prev.end-s.base > p.quota {
			s.base = e[i].end
			i++
		}
		e = e[i:]
		s.e, s.head, s.n = e, 0, len(e)
	default:
		return false
	}
	return !bad && len(b) == 0
}

// readLogAbsolute reads a sliding log's absolute form into s, taking it from *b.
func readLogAbsolute(s *slidingLog, b *[]byte) bool {
	bad := false
	varint := func() int64 {
		v, n := binary.Varint(*b)
		if n <= 0 {
			bad = true
			return 0
		}
		*b = (*b)[n:]
		return v
	}
	s.base = varint()
	n, k := binary.Uvarint(*b)
	if bad || k <= 0 || n > MaxLogLimit || n > uint64(len(*b))/2 {
		return false
	}
	*b = (*b)[k:]
	if !within(s.base, maxInstant) {
		return false
	}
	e := make([]logEntry, n)
	prev := logEntry{t: math.MinInt64, end: s.base}
	for i := range e {
		e[i] = logEntry{t: varint(), end: varint()}
		if bad || e[i].t < prev.t || e[i].end <= prev.end || !within(e[i].t, maxInstant) || !within(e[i].end, maxInstant) {
			return false
		}
		prev = e[i]
	}
	s.e, s.head, s.n = e, 0, len(e)
	return true
}
