package rls

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slide-metrics/slide/limiter"
)

// calendarUnits are the lengths that name a calendar window's unit in current_limit
// (DAY, WEEK, MONTH): the period itself is the zone's, not these.
var calendarUnits = map[limiter.Calendar]time.Duration{
	limiter.CalendarDay:   24 * time.Hour,
	limiter.CalendarWeek:  7 * 24 * time.Hour,
	limiter.CalendarMonth: 30 * 24 * time.Hour,
}

// timezone reads a rate_limit's timezone (nil node: none, UTC); ok is false after a
// failure it has reported.
func (b *builder) timezone(n *yaml.Node) (*time.Location, bool) {
	if n == nil {
		return nil, true
	}
	s, _ := b.str(n, "timezone")
	loc, err := limiter.LoadTimezone(s)
	if err != nil {
		b.fail(n, "timezone: %v", err)
		return nil, false
	}
	return loc, true
}

// period says where a limit's current window ends, for the answers decided without the
// limiter (requests_per_unit 0, hits above the quota): envoyproxy/ratelimit resets them
// with the window. The zero value is a window aligned to the Unix epoch.
type period struct {
	cal       limiter.Calendar // a calendar window: the zone's periods
	loc       *time.Location
	unaligned bool // not a fixed window: no window ends, so a full window is the answer
}

// at returns the time from now to the end of the window holding now, and that
// window's length (a calendar period's own: 23 to 25 hours for a day across DST).
func (p period) at(now time.Time, w time.Duration) (reset, length time.Duration) {
	switch {
	case p.cal != 0:
		start, end := p.cal.Bounds(p.loc, now.UnixNano())
		return time.Duration(end - now.UnixNano()), time.Duration(end - start)
	case p.unaligned:
		return w, w
	}
	return untilReset(now, w), w
}
