package window

import (
	"fmt"
	"time"
)

// Calendar is a window that starts at a boundary of a time zone's calendar (issue #29): the
// local midnight, Monday 00:00 or the 1st at 00:00, and runs to now. The zero value is none.
// Boundaries are computed with the zone's rules, so a day is 23 or 25 hours across a DST
// change. A read of a calendar window reads whole slots: its start rounds down to the slot
// (of the ring, or of the tier that holds it) containing it, as a read of any window does.
type Calendar uint8

// Calendars.
const (
	CalendarNone Calendar = iota
	CalendarDay
	CalendarWeek
	CalendarMonth
)

var calendarNames = [...]string{"", "calendar_day", "calendar_week", "calendar_month"}

// ParseCalendar reads calendar_day, calendar_week or calendar_month.
func ParseCalendar(s string) (Calendar, bool) {
	for i, n := range calendarNames {
		if i > 0 && n == s {
			return Calendar(i), true
		}
	}
	return CalendarNone, false
}

func (c Calendar) String() string {
	if int(c) < len(calendarNames) {
		return calendarNames[c]
	}
	return fmt.Sprintf("Calendar(%d)", c)
}

// Longest is the longest span a period of c can have: 25 h, 7 d + 1 h, 31 d + 1 h (a DST
// change adds an hour). A ring serves c when it reads this plus one slot.
func (c Calendar) Longest() time.Duration {
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

// Start is the boundary at or before t in loc: local midnight, the Monday, the 1st.
func (c Calendar) Start(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	y, m, d := l.Date()
	switch c {
	case CalendarWeek:
		d -= (int(l.Weekday()) + 6) % 7 // days since Monday
	case CalendarMonth:
		d = 1
	}
	return midnight(y, m, d, loc)
}

// Next is the first boundary after t in loc: the start of the next period.
func (c Calendar) Next(t time.Time, loc *time.Location) time.Time {
	s := c.Start(t, loc).In(loc)
	y, m, d := s.Date()
	switch c {
	case CalendarDay:
		d++
	case CalendarWeek:
		d += 7
	case CalendarMonth:
		m++
	}
	return midnight(y, m, d, loc)
}

// Bounds is the period of c holding now (unix ns) in loc (nil: UTC) as [start, end) in unix
// ns: Start and Next of the instant. The limiter's calendar policies count by it, so a policy
// and a usage rule of one zone reset at the same instant.
func (c Calendar) Bounds(loc *time.Location, now int64) (start, end int64) {
	if loc == nil {
		loc = time.UTC
	}
	t := time.Unix(0, now)
	return c.Start(t, loc).UnixNano(), c.Next(t, loc).UnixNano()
}

// midnight is 00:00 of the date in loc (d and m may overflow, as time.Date takes them), or
// the first instant of that date when a DST change skips midnight: time.Date may then answer
// an instant of the day before, so it steps forward to the date.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	wy, wm, wd := time.Date(y, m, d, 12, 0, 0, 0, loc).Date()
	t := time.Date(wy, wm, wd, 0, 0, 0, 0, loc)
	for i := 0; i < 4; i++ {
		if _, _, ld := t.In(loc).Date(); ld == wd {
			break
		}
		t = t.Add(30 * time.Minute)
	}
	return t
}
