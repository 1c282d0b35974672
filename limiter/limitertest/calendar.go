package limitertest

import (
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// zone loads an IANA zone for a table; the tables need the zone database (Go's
// time/tzdata or the system's), and a missing zone is a broken test machine.
func zone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic("limitertest: time zone " + name + " missing (install tzdata): " + err.Error())
	}
	return loc
}

// CalendarCases are the calendar windows' tables: each starts at a fixed instant next to a
// DST change (or a +05:30 zone's month end) and checks that the period ends on the local
// boundary, that RetryAfter and ResetAfter reach it exactly, and the period's length.
func CalendarCases() []Case {
	const h = time.Hour
	ny, london, kolkata := zone("America/New_York"), zone("Europe/London"), zone("Asia/Kolkata")
	cal := func(name string, c limiter.Calendar, loc *time.Location, limit int64) limiter.Policy {
		return limiter.Policy{Name: name, Algorithm: limiter.FixedWindow, Limit: limit, Calendar: c, Location: loc}
	}
	return []Case{
		{
			// 2026-03-08 in New York is 23 hours: EST until 02:00, then EDT.
			Name:   "calendar_day_new_york_spring_forward",
			Policy: cal("cd", limiter.CalendarDay, ny, 2),
			Start:  time.Date(2026, 3, 8, 5, 30, 0, 0, time.UTC), // 00:30 EST
			Steps: []Step{
				{At: 0, Cost: 1, Allowed: true, Remaining: 1, Reset: 22*h + 30*time.Minute, Window: 23 * h},
				{At: h, Cost: 1, Allowed: true, Remaining: 0, Reset: 21*h + 30*time.Minute, Window: 23 * h},
				{At: 2 * h, Cost: 1, Remaining: 0, Retry: 20*h + 30*time.Minute, Reset: 20*h + 30*time.Minute, Window: 23 * h},
				{At: 22*h + 30*time.Minute - time.Microsecond, Cost: 1, Remaining: 0, Retry: time.Microsecond, Reset: time.Microsecond, Window: 23 * h},
				// 00:00 EDT on the 9th: a new day of 24 hours.
				{At: 22*h + 30*time.Minute, Cost: 1, Allowed: true, Remaining: 1, Reset: 24 * h, Window: 24 * h},
			},
		},
		{
			// 2026-11-01 in New York is 25 hours: 01:00-02:00 happens twice.
			Name:   "calendar_day_new_york_fall_back",
			Policy: cal("cd", limiter.CalendarDay, ny, 2),
			Start:  time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), // 00:00 EDT
			Steps: []Step{
				{At: 0, Cost: 2, Allowed: true, Remaining: 0, Reset: 25 * h, Window: 25 * h},
				{At: 24*h + 30*time.Minute, Cost: 1, Remaining: 0, Retry: 30 * time.Minute, Reset: 30 * time.Minute, Window: 25 * h},
				{At: 25 * h, Cost: 1, Allowed: true, Remaining: 1, Reset: 24 * h, Window: 24 * h},
			},
		},
		{
			// 2026-10-25 in London is 25 hours (BST ends at 02:00 BST, 01:00 UTC).
			Name:   "calendar_day_london_fall_back",
			Policy: cal("cd", limiter.CalendarDay, london, 1),
			Start:  time.Date(2026, 10, 24, 23, 0, 0, 0, time.UTC), // 00:00 BST on the 25th
			Steps: []Step{
				{At: 0, Cost: 1, Allowed: true, Remaining: 0, Reset: 25 * h, Window: 25 * h},
				{At: 24 * h, Cost: 1, Remaining: 0, Retry: h, Reset: h, Window: 25 * h},
				{At: 25 * h, Cost: 1, Allowed: true, Remaining: 0, Reset: 24 * h, Window: 24 * h},
			},
		},
		{
			// The London week of Monday 2026-03-23 ends at Monday 00:00 BST: 167 hours.
			Name:   "calendar_week_london_spring_forward",
			Policy: cal("cw", limiter.CalendarWeek, london, 2),
			Start:  time.Date(2026, 3, 29, 22, 0, 0, 0, time.UTC), // Sunday 23:00 BST
			Steps: []Step{
				{At: 0, Cost: 2, Allowed: true, Remaining: 0, Reset: h, Window: 167 * h},
				{At: h - time.Microsecond, Cost: 1, Remaining: 0, Retry: time.Microsecond, Reset: time.Microsecond, Window: 167 * h},
				{At: h, Cost: 1, Allowed: true, Remaining: 1, Reset: 168 * h, Window: 168 * h},
			},
		},
		{
			// A +05:30 zone: February 2026 in Kolkata ends at 2026-02-28 18:30 UTC.
			Name:   "calendar_month_kolkata",
			Policy: cal("cm", limiter.CalendarMonth, kolkata, 2),
			Start:  time.Date(2026, 2, 28, 18, 29, 59, 0, time.UTC),
			Steps: []Step{
				{At: 0, Cost: 2, Allowed: true, Remaining: 0, Reset: time.Second, Window: 28 * 24 * h},
				{At: 500 * ms, Cost: 1, Remaining: 0, Retry: 500 * ms, Reset: 500 * ms, Window: 28 * 24 * h},
				{At: sec, Cost: 0, Allowed: true, Remaining: 2, Window: 31 * 24 * h},
				{At: sec, Cost: 1, Allowed: true, Remaining: 1, Reset: 31 * 24 * h, Window: 31 * 24 * h},
			},
		},
		{
			// No zone: UTC. T0 is Sunday 2025-11-30 08:00 UTC; the week ends 16 hours on.
			Name:   "calendar_week_utc",
			Policy: cal("cw", limiter.CalendarWeek, nil, 1),
			Steps: []Step{
				{At: 0, Cost: 1, Allowed: true, Remaining: 0, Reset: 16 * h, Window: 168 * h},
				{At: 16 * h, Cost: 1, Allowed: true, Remaining: 0, Reset: 168 * h, Window: 168 * h},
			},
		},
	}
}
