package limiter

import (
	"math"
	"math/bits"
	"time"
	"unsafe"

	"github.com/slide-metrics/slide/window"
)

// The algorithms are pure state transitions: take(p, now, cost) reads and
// updates a small struct and returns the decision. now is in nanoseconds
// since the Unix epoch (windows align to the epoch); cost 0 peeks (reports
// what cost 1 would get, changes nothing). The caller has checked
// 0 ≤ cost ≤ p.quota and holds whatever lock guards the struct. The Redis
// scripts in limiter/redislimit/scripts mirror these functions in microseconds.
//
// Each take writes the decision's numbers into *d (not Policy, Shadowed,
// Degraded) and returns expires: the instant (ns) at which the state is back
// to its initial value, so the memory backend can drop the key (Redis gets
// the same as PEXPIRE). Writing through d, rather than returning an 80-byte
// Decision, keeps the hot path free of copies; all calls are static, so d
// stays on the caller's stack.

// set writes a decision's numbers into d, clamping negatives.
func set(d *Decision, p *params, allowed bool, remaining, retry, reset int64) {
	d.Allowed = allowed
	d.Limit = p.quota
	d.Remaining = max(remaining, 0)
	d.RetryAfter = time.Duration(max(retry, 0))
	d.ResetAfter = time.Duration(max(reset, 0))
	d.Delay = 0
	d.Window = p.quotaWin
}

// fixedWindow counts units in window number index.
type fixedWindow struct {
	index int64
	count int64
}

func (s *fixedWindow) take(p *params, now, cost int64, d *Decision) int64 {
	if p.cal != nil {
		return s.takeCalendar(p, now, cost, d)
	}
	idx := window.FloorDiv(now, p.window)
	if s.count == 0 || idx > s.index {
		s.index, s.count = idx, 0
	} // idx < s.index: the clock went back; stay in the newer window.
	return s.decide(p, now, (s.index+1)*p.window, cost, d)
}

// takeCalendar is take for a calendar window: index is the period's start (ns).
func (s *fixedWindow) takeCalendar(p *params, now, cost int64, d *Decision) int64 {
	start, end := p.cal.at(now)
	if s.count == 0 || start > s.index {
		s.index, s.count = start, 0
	} else if start < s.index { // the clock went back: stay in the newer period
		start, end = p.cal.c.Bounds(p.cal.loc, s.index)
	}
	exp := s.decide(p, now, end, cost, d)
	d.Window = time.Duration(end - start)
	return exp
}

// window returns the window of p holding now: its index (a calendar period's start) and
// [start, end) in ns.
func (p *params) windowAt(now int64) (idx, start, end int64) {
	if p.cal != nil {
		start, end = p.cal.at(now)
		return start, start, end
	}
	idx = window.FloorDiv(now, p.window)
	return idx, idx * p.window, (idx + 1) * p.window
}

// takeIn is take with the window of now already found (p.windowAt): the levels of one
// key share it, so it is found once per decision.
func (s *fixedWindow) takeIn(p *params, now, idx, start, end, cost int64, d *Decision) int64 {
	if s.count == 0 || idx > s.index {
		s.index, s.count = idx, 0
	} else if idx < s.index { // the clock went back: stay in the newer window
		if p.cal != nil {
			start, end = p.cal.c.Bounds(p.cal.loc, s.index)
		} else {
			start, end = s.index*p.window, (s.index+1)*p.window
		}
	}
	exp := s.decide(p, now, end, cost, d)
	if p.cal != nil {
		d.Window = time.Duration(end - start)
	}
	return exp
}

// decide is take once the window [.., end) is known.
func (s *fixedWindow) decide(p *params, now, end, cost int64, d *Decision) int64 {
	reset := int64(0)
	if s.count > 0 {
		reset = end - now
	}
	if cost == 0 {
		ok := s.count+1 <= p.quota
		retry := int64(0)
		if !ok {
			retry = end - now
		}
		set(d, p, ok, p.quota-s.count, retry, reset)
		return now + reset
	}
	if s.count+cost > p.quota {
		set(d, p, false, p.quota-s.count, end-now, reset)
		return now + reset
	}
	s.count += cost
	set(d, p, true, p.quota-s.count, 0, end-now)
	return end
}

// slidingLog is a ring of admitted requests, oldest at head: each entry is a timestamp and
// the running total of units admitted up to and including it, so a request of any cost is
// one entry (16 bytes) and the memory of a key is bounded by the requests in its window,
// never by their cost. Requests at the same instant share an entry. The ring grows up to
// p.quota entries (each holds at least one unit), so a steady key allocates nothing.
type slidingLog struct {
	e    []logEntry
	head int
	n    int
	base int64 // units admitted before the oldest entry (the running total of the last one dropped)
}

type logEntry struct{ t, end int64 }

func (s *slidingLog) at(i int) *logEntry { return &s.e[(s.head+i)%len(s.e)] }

// units is how many units the log holds.
func (s *slidingLog) units() int64 {
	if s.n == 0 {
		return 0
	}
	return s.at(s.n-1).end - s.base
}

// prune drops the entries that have left the window (now−window, now] and returns now,
// moved up to the newest entry if the clock went back (the log stays ordered).
func (s *slidingLog) prune(p *params, now int64) int64 {
	if s.n > 0 {
		if newest := s.at(s.n - 1).t; now < newest {
			now = newest
		}
	}
	cutoff := now - p.window // an entry exactly window old has left
	for s.n > 0 && s.e[s.head].t <= cutoff {
		s.base = s.e[s.head].end
		s.head = (s.head + 1) % len(s.e)
		s.n--
	}
	return now
}

// growth is how many bytes admitting cost at now would allocate (0 when it fits the
// ring, merges into the newest entry, or is denied).
func (s *slidingLog) growth(p *params, now, cost int64) int64 {
	now = s.prune(p, now)
	if cost == 0 || s.n < len(s.e) || s.units()+cost > p.quota || (s.n > 0 && s.at(s.n-1).t == now) {
		return 0
	}
	return int64(s.grownCap(p.quota)-len(s.e)) * int64(unsafe.Sizeof(logEntry{}))
}

func (s *slidingLog) grownCap(quota int64) int {
	return int(min(int64(max(4, 2*len(s.e))), quota))
}

// bytes is the log's heap footprint.
func (s *slidingLog) bytes() int64 { return int64(cap(s.e)) * int64(unsafe.Sizeof(logEntry{})) }

func (s *slidingLog) push(t, cost, quota int64) {
	if s.n > 0 {
		if last := s.at(s.n - 1); last.t == t {
			last.end += cost
			return
		}
	}
	total := s.base + s.units()
	if s.n == len(s.e) {
		e := make([]logEntry, s.grownCap(quota))
		for i := 0; i < s.n; i++ {
			e[i] = *s.at(i)
		}
		s.e, s.head = e, 0
	}
	*s.at(s.n) = logEntry{t: t, end: total + cost}
	s.n++
}

// oldestUnit returns the timestamp of the k-th oldest unit (1-based), by binary search
// over the running totals.
func (s *slidingLog) oldestUnit(k int64) int64 {
	lo, hi := 0, s.n-1
	for lo < hi {
		mid := (lo + hi) / 2
		if s.at(mid).end-s.base >= k {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return s.at(lo).t
}

func (s *slidingLog) take(p *params, now, cost int64, d *Decision) int64 {
	now = s.prune(p, now)
	n := s.units()
	reset := int64(0)
	if s.n > 0 {
		reset = s.at(s.n-1).t + p.window - now
	}
	want := cost
	if cost == 0 {
		want = 1
	}
	if n+want > p.quota {
		// The (n+want-quota)-th oldest unit must leave the window first.
		e := s.oldestUnit(n + want - p.quota)
		set(d, p, false, p.quota-n, e+p.window-now, reset)
		return now + reset
	}
	if cost == 0 {
		set(d, p, true, p.quota-n, 0, reset)
		return now + reset
	}
	s.push(now, cost, p.quota)
	set(d, p, true, p.quota-n-cost, 0, p.window)
	return now + p.window
}

// slidingCounter keeps the counts of window index (cur) and index-1 (prev).
type slidingCounter struct {
	index int64
	cur   int64
	prev  int64
}

// mulDiv returns floor(a*b/c) for non-negative a, b and positive c, and
// whether it fits in int64; exact where a float64 product would round.
func mulDiv(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}

// decayedBelow returns the smallest elapsed e in [0, w] at which
// floor(n*(w-e)/w) <= k, for n ≥ 0, k ≥ 0.
func decayedBelow(n, k, w int64) int64 {
	if n == 0 {
		return 0
	}
	// floor(n(w-e)/w) <= k  ⟺  n(w-e) <= (k+1)w-1  ⟺  w-e <= floor(((k+1)w-1)/n)
	hi, lo := bits.Mul64(uint64(k+1), uint64(w))
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	if hi >= uint64(n) {
		return 0 // quotient ≥ 2^64 > w
	}
	q, _ := bits.Div64(hi, lo, uint64(n))
	if q >= uint64(w) {
		return 0
	}
	return w - int64(q)
}

func (s *slidingCounter) take(p *params, now, cost int64, d *Decision) int64 {
	w := p.window
	idx := window.FloorDiv(now, w)
	switch {
	case s.cur == 0 && s.prev == 0:
		s.index = idx
	case idx == s.index+1:
		s.index, s.prev, s.cur = idx, s.cur, 0
	case idx > s.index+1:
		s.index, s.prev, s.cur = idx, 0, 0
	case idx < s.index:
		now, idx = s.index*w, s.index // the clock went back
	}
	e := now - idx*w
	decayed, _ := mulDiv(s.prev, w-e, w) // < prev, always fits
	est := decayed + s.cur
	want := max(cost, 1)
	ok := est+want <= p.quota
	if ok && cost > 0 {
		s.cur += cost
		est += cost
	}
	// Idle once cur has decayed through the next window, or prev through this one.
	var expires int64
	switch {
	case s.cur > 0:
		expires = (idx + 2) * w
	case s.prev > 0:
		expires = (idx + 1) * w
	default:
		expires = now
	}
	if ok {
		set(d, p, true, p.quota-est, 0, expires-now)
		return expires
	}
	var retry int64
	if k := p.quota - want - s.cur; k >= 0 && s.prev > 0 {
		if at := decayedBelow(s.prev, k, w); at < w {
			retry = at - e
		}
	}
	if retry <= 0 {
		// Not within this window: at the next one, cur becomes prev and decays.
		retry = w - e + decayedBelow(s.cur, p.quota-want, w)
	}
	set(d, p, false, p.quota-est, retry, expires-now)
	return expires
}

// tokenBucket holds tokens as of last (ns); refilled lazily on each take.
//
// A denial leaves tokens and last as they are (nothing was spent) and keeps what it
// solved for: a request of cost denyCost is next admitted at allowAt. Later denials of
// that cost (a key held past its limit, the hot path of a flood) read it instead of
// solving waitFor again, and read the instant the bucket is full again (fullAt, set
// whenever tokens are spent) instead of solving untilFull: that was most of a denial's
// arithmetic. Both are read only under the numbers they were solved under (numbersTag): a
// plan or SetLimits changes p under a key's state. The Redis script rebases tokens at a denial; both answer the same up to
// float rounding (it counts in µs anyway).
type tokenBucket struct {
	tokens   float64
	last     int64
	fullAt   int64 // ns: last + untilFull(tokens)
	allowAt  int64 // ns: refill(tokens, allowAt-last) reaches denyCost, and 1 ns less does not
	denyCost int64 // 0: allowAt is not set
	init     bool
	tag      uint32 // numbersTag of the params fullAt and allowAt were solved under
}

// numbersTag fingerprints the numbers a token bucket's kept instants depend on, its
// capacity and rate: a plan or SetLimits changes them under a key's state, and an instant
// solved under the old ones must not be read (kept at 0.1/s after 1/s, a denial's
// RetryAfter was 0). A multiply and two xors, where checking the instants against the new
// numbers (two refills and a solve) made the flood's denial 30% dearer; two different
// numbers share a tag once in 2^32, and then answer as before the check.
func numbersTag(p *params) uint32 {
	h := uint64(p.quota)*0x9E3779B97F4A7C15 ^ math.Float64bits(p.rate)
	return uint32(h ^ h>>32)
}

// refill is the one formula used both to advance the bucket and to check a
// computed RetryAfter, so waiting exactly RetryAfter is always enough.
// (elapsed·rate)·1e-9 is exact whenever elapsed·rate is a whole number of
// seconds' worth (fl(1e-9) is within half an ulp), so 1 s at 5/s is 5 tokens.
func refill(p *params, tokens float64, elapsed int64) float64 {
	t := tokens + float64(elapsed)*p.rate*1e-9
	if c := float64(p.quota); t > c {
		t = c
	}
	return t
}

// tokenSlack is how far below a whole number of tokens a token bucket may be and still hold
// it: a billionth of a token, and a few ulps of the capacity. The refills are float sums of
// elapsed·rate, which a rate like 3/s (0.03 a 10 ms step) cannot state exactly, so a bucket
// whose tokens are due at an instant (exactly 1 in rational arithmetic) held 0.99999999999999989
// there and denied the request; the slack is far below a nanosecond's refill at any rate
// above 1/s, so it admits nothing early that a clock could tell. The Redis script uses the
// same slack (token_bucket.lua).
func tokenSlack(capacity int64) float64 { return 1e-9 + float64(capacity)*0x1p-50 }

// holds reports that a bucket of tokens holds want (tokenSlack).
func holds(p *params, tokens, want float64) bool { return tokens >= want-p.slack }

// whole is the tokens a bucket holds as a whole number (Remaining), by the slack of holds.
func whole(p *params, tokens float64) int64 { return int64(tokens + p.slack) }

// ceilNs rounds a non-negative duration in ns up; inline, unlike math.Ceil.
func ceilNs(x float64) int64 {
	d := int64(x)
	if float64(d) < x {
		d++
	}
	return d
}

// waitFor returns the smallest wait in ns after which refill reaches want.
func waitFor(p *params, tokens, want float64) int64 {
	if holds(p, tokens, want) {
		return 0
	}
	d := ceilNs((want - tokens) * p.nsPerUnit)
	// Float rounding can put the estimate a few ns off either way: settle on
	// the smallest d the refill formula itself accepts.
	for step := int64(1); !holds(p, refill(p, tokens, d), want); step *= 2 {
		d += step
	}
	for i := 0; i < 64 && d > 1 && holds(p, refill(p, tokens, d-1), want); i++ {
		d--
	}
	return d
}

// untilFull is how long the bucket takes to refill to capacity. Unlike a
// RetryAfter it is a hint (headers, key expiry), so it skips waitFor's
// exactness steps.
func untilFull(p *params, tokens float64) int64 {
	if tokens >= float64(p.quota) {
		return 0
	}
	return ceilNs((float64(p.quota) - tokens) * p.nsPerUnit)
}

func (s *tokenBucket) take(p *params, now, cost int64, d *Decision) int64 {
	tag := numbersTag(p)
	if !s.init {
		s.tokens, s.last, s.fullAt, s.init, s.tag = float64(p.quota), now, now, true, tag
	}
	if now < s.last {
		now = s.last
	}
	if cost == 1 && s.denyCost == 1 && now < s.allowAt && s.tag == tag {
		// Denied again before the next unit is due: refill is monotonic in the elapsed
		// time and allowAt the first instant it reaches 1, so the bucket holds less than a
		// token (Remaining 0) and no wait needs solving.
		reset := max(s.fullAt-now, 0)
		set(d, p, false, 0, s.allowAt-now, reset)
		return now + reset
	}
	if s.tag != tag {
		// Numbers changed since the instants were solved: solved again under p, once.
		s.fullAt, s.denyCost, s.tag = s.last+untilFull(p, s.tokens), 0, tag
	}
	tokens := refill(p, s.tokens, now-s.last)
	// From the tokens, as the Redis script does.
	reset := untilFull(p, tokens)
	if cost == 0 {
		ok := holds(p, tokens, 1)
		retry := int64(0)
		if !ok {
			retry = s.admitsAt(p, 1) - now
		}
		set(d, p, ok, whole(p, tokens), retry, reset)
		return now + reset
	}
	c := float64(cost)
	if holds(p, tokens, c) {
		tokens = max(tokens-c, 0) // within the slack below c: none left
		reset = untilFull(p, tokens)
		s.tokens, s.last, s.fullAt, s.denyCost = tokens, now, now+reset, 0
		set(d, p, true, whole(p, tokens), 0, reset)
		return now + reset
	}
	at := s.admitsAt(p, cost)
	if (s.denyCost != cost || at != s.allowAt) && s.exactAt(p, at, cost) {
		s.allowAt, s.denyCost = at, cost
	}
	set(d, p, false, whole(p, tokens), at-now, reset)
	return now + reset
}

// admitsAt is the first instant (ns) at which a request of cost is admitted if nothing
// else is spent before: the kept allowAt when it was solved for cost, else solved now.
// Its caller has solved the kept instants under p's numbers (tag) first.
func (s *tokenBucket) admitsAt(p *params, cost int64) int64 {
	if s.denyCost == cost {
		return s.allowAt
	}
	return s.last + waitFor(p, s.tokens, float64(cost))
}

// exactAt reports that at is the first instant refill reaches cost, not only one at which
// it has (waitFor settles within 64 ns of its estimate): only then is at kept, since the
// denial fast path relies on every instant before it being short.
func (s *tokenBucket) exactAt(p *params, at, cost int64) bool {
	e := at - s.last
	return e <= 1 || !holds(p, refill(p, s.tokens, e-1), float64(cost))
}

// gcra is the leaky bucket as a meter: tat is the theoretical arrival time
// (ns) of the next unit if the bucket drained at exactly p.rate.
type gcra struct {
	tat int64
}

func (s *gcra) take(p *params, now, cost int64, d *Decision) int64 {
	tat := max(s.tat, now)
	want := max(cost, 1)
	newTat := tat + int64(math.Round(float64(want)*p.interval))
	allowAt := newTat - p.burstOff
	remaining := func(t int64) int64 {
		return int64(math.Floor(float64(now-t+p.burstOff) / p.interval))
	}
	if now >= allowAt || allowAt-now <= p.maxDelay {
		delay := max(allowAt-now, 0)
		if cost == 0 {
			set(d, p, true, remaining(tat), 0, tat-now)
			d.Delay = time.Duration(delay)
			return tat
		}
		s.tat = newTat
		set(d, p, true, remaining(newTat), 0, newTat-now)
		d.Delay = time.Duration(delay)
		return newTat
	}
	set(d, p, false, remaining(tat), allowAt-now-p.maxDelay, tat-now)
	return tat
}
