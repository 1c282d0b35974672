package limiter

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Calendar makes a fixed_window policy count per calendar period of a time zone instead
// of per window aligned to the Unix epoch: the counter resets at local midnight
// (CalendarDay), on Monday at 00:00 (CalendarWeek) or on the 1st at 00:00 (CalendarMonth).
// The zero value is no calendar.
type Calendar uint8

// The calendar periods, named as in the policy file's window field.
const (
	CalendarDay Calendar = iota + 1
	CalendarWeek
	CalendarMonth
)

var calendarNames = [...]string{CalendarDay: "calendar_day", CalendarWeek: "calendar_week", CalendarMonth: "calendar_month"}

// String returns the policy-file name, e.g. "calendar_month".
func (c Calendar) String() string { return nameOf(calendarNames[:], c, "Calendar") }

// ParseCalendar maps a policy-file window name ("calendar_day", "calendar_week",
// "calendar_month") to its Calendar; ok is false for any other.
func ParseCalendar(s string) (Calendar, bool) { return parseName[Calendar](calendarNames[:], s) }

// Nominal is the period's longest length (a day of 25 hours, a week of 169, a month of
// 31 days plus an hour): what a failure-mode decision reports as its window, since it
// is taken without the clock.
func (c Calendar) Nominal() time.Duration {
	switch c {
	case CalendarDay:
		return 25 * time.Hour
	case CalendarWeek:
		return 7*24*time.Hour + time.Hour
	case CalendarMonth:
		return 31*24*time.Hour + time.Hour
	}
	return 0
}

// Bounds returns the period of c holding now in loc (nil: UTC): [start, end) in ns since
// the Unix epoch. The period starts at the local wall-clock midnight, so a day is 23 or
// 25 hours long across a DST change (where a zone skips midnight itself, time.Date's
// normalisation picks the instant, the same for both periods that meet there).
func (c Calendar) Bounds(loc *time.Location, now int64) (start, end int64) {
	if loc == nil {
		loc = time.UTC
	}
	t := time.Unix(0, now).In(loc)
	y, m, d := t.Date()
	var s, e time.Time
	switch c {
	case CalendarWeek:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		s, e = time.Date(y, m, d-back, 0, 0, 0, 0, loc), time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case CalendarMonth:
		s, e = time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		s, e = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
	return s.UnixNano(), e.UnixNano()
}

// LoadTimezone resolves an IANA zone name ("Europe/London"); "" and "UTC" are UTC, returned
// as nil (Policy.Location's UTC), so a policy reads back from its file as it was.
func LoadTimezone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return nil, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, fmt.Errorf("unknown time zone %q (want an IANA name such as Europe/London)", ClipName(name))
	}
	return loc, nil
}

// calendar is a calendar policy's periods, with the current one cached: a decision inside
// it costs two loads and two compares, not a time zone conversion.
type calendar struct {
	c   Calendar
	loc *time.Location
	cur atomic.Pointer[period]
}

type period struct{ start, end int64 }

// at returns the period holding now.
func (k *calendar) at(now int64) (start, end int64) {
	if p := k.cur.Load(); p != nil && now >= p.start && now < p.end {
		return p.start, p.end
	}
	start, end = k.c.Bounds(k.loc, now)
	if p := k.cur.Load(); p == nil || start >= p.start {
		k.cur.Store(&period{start, end})
	}
	return start, end
}
