package window

import (
	"errors"
	"time"
)

// ErrCounterSpan is returned by NewCounter for a span that is not a positive whole number of
// milliseconds.
var ErrCounterSpan = errors.New("window: counter span must be a positive whole number of milliseconds")

// Counter counts hits in the time window (now − span, now]: a hit at t is counted until
// now ≥ t + span, so at exactly t + span it has left. It is the article's WindowCounter, the
// exact sliding log behind a sliding-window-log rate limiter.
//
// Times are unix milliseconds (any epoch works as long as it is the same for every call), passed
// by the caller so tests and replays are exact. Time never goes back: a now earlier than the
// latest one seen is treated as the latest one, the same rule as a replay's "now is the largest
// event time seen".
//
// Hits at the same millisecond share one entry, so memory is O(distinct milliseconds in the
// window), not O(hits): a ring that grows by doubling and never shrinks, so Hit allocates nothing
// once it has reached the window's size. Hit and Count cost O(1) amortized (each entry is
// dropped once). The zero value is not usable: call NewCounter. A Counter is not safe for
// concurrent use.
type Counter struct {
	span  int64 // ms
	ts    []int64
	cnt   []int64
	head  int   // ring index of the oldest entry
	n     int   // entries held
	total int64 // sum of cnt over held entries
	last  int64 // latest now seen
	seen  bool
}

// NewCounter returns a counter over the window (now − span, now].
func NewCounter(span time.Duration) (*Counter, error) {
	if span < time.Millisecond || span%time.Millisecond != 0 {
		return nil, ErrCounterSpan
	}
	return &Counter{span: span.Milliseconds()}, nil
}

// Span returns the window length.
func (c *Counter) Span() time.Duration { return time.Duration(c.span) * time.Millisecond }

// Hit records one hit at now and returns the count of the window ending at now, this hit
// included.
func (c *Counter) Hit(now int64) int { return c.HitN(now, 1) }

// HitN records n hits at now (n ≤ 0 records nothing) and returns the count of the window ending
// at now.
func (c *Counter) HitN(now int64, n int) int {
	now = c.advance(now)
	if n <= 0 {
		return int(c.total)
	}
	mask := len(c.ts) - 1
	if c.n > 0 && c.ts[(c.head+c.n-1)&mask] == now {
		c.cnt[(c.head+c.n-1)&mask] += int64(n)
	} else {
		if c.n == len(c.ts) {
			c.grow()
			mask = len(c.ts) - 1
		}
		i := (c.head + c.n) & mask
		c.ts[i], c.cnt[i] = now, int64(n)
		c.n++
	}
	c.total += int64(n)
	return int(c.total)
}

// Count returns the number of hits in (now − span, now].
func (c *Counter) Count(now int64) int {
	c.advance(now)
	return int(c.total)
}

// advance moves now forward (never back) and drops the entries at or before now − span.
func (c *Counter) advance(now int64) int64 {
	if c.seen && now < c.last {
		now = c.last
	}
	c.last, c.seen = now, true
	mask := len(c.ts) - 1
	for c.n > 0 && c.ts[c.head] <= now-c.span {
		c.total -= c.cnt[c.head]
		c.head = (c.head + 1) & mask
		c.n--
	}
	return now
}

func (c *Counter) grow() {
	c.ts, c.cnt, c.head = regrow(c.ts, c.head, c.n), regrow(c.cnt, c.head, c.n), 0
}

// Reset forgets every hit and the latest time seen.
func (c *Counter) Reset() { c.head, c.n, c.total, c.last, c.seen = 0, 0, 0, 0, false }
