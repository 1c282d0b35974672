package limiter

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/slide-metrics/slide/window"
)

// Calendar makes a fixed_window policy count per calendar period of a time zone instead
// of per window aligned to the Unix epoch: the counter resets at local midnight
// (CalendarDay), on Monday at 00:00 (CalendarWeek) or on the 1st at 00:00 (CalendarMonth).
// It is window.Calendar, the one definition of a calendar period (its Bounds, its Longest
// span), which usage rules read too: a policy and a rule of one zone reset at the same
// instant, a DST change and a zone that skips midnight included. The zero value is none.
type Calendar = window.Calendar

// The calendar periods, named as in the policy file's window field.
const (
	CalendarDay   = window.CalendarDay
	CalendarWeek  = window.CalendarWeek
	CalendarMonth = window.CalendarMonth
)

// ParseCalendar maps a policy-file window name ("calendar_day", "calendar_week",
// "calendar_month") to its Calendar; ok is false for any other.
func ParseCalendar(s string) (Calendar, bool) { return window.ParseCalendar(s) }

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
