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
