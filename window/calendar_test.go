package window

import (
	"testing"
	"time"
)

// TestCalendarBoundaries: Start and Next at fixed instants, across New York's DST changes
// (a 23-hour and a 25-hour day), a week from Monday, a month's end, and a zone whose DST
// change skips midnight (America/Santiago, 2026-09-06: 00:00 becomes 01:00).
func TestCalendarBoundaries(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	scl, err := time.LoadLocation("America/Santiago")
	if err != nil {
		t.Fatal(err)
	}
	kol, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		cal         Calendar
		loc         *time.Location
		at          string
		start, next string
	}{
		{CalendarDay, ny, "2026-03-08T20:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}, // 23 h
		{CalendarDay, ny, "2026-11-01T12:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"}, // 25 h
		{CalendarDay, ny, "2026-03-09T03:59:59Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},
		{CalendarDay, time.UTC, "2026-05-31T23:59:59Z", "2026-05-31T00:00:00Z", "2026-06-01T00:00:00Z"},
		{CalendarDay, kol, "2026-05-10T18:30:00Z", "2026-05-10T18:30:00Z", "2026-05-11T18:30:00Z"},
		{CalendarWeek, time.UTC, "2026-05-13T10:00:00Z", "2026-05-11T00:00:00Z", "2026-05-18T00:00:00Z"}, // a Wednesday
		{CalendarWeek, time.UTC, "2026-05-17T23:00:00Z", "2026-05-11T00:00:00Z", "2026-05-18T00:00:00Z"}, // a Sunday
		{CalendarWeek, ny, "2026-03-10T12:00:00Z", "2026-03-09T04:00:00Z", "2026-03-16T04:00:00Z"},
		{CalendarMonth, ny, "2026-03-31T12:00:00Z", "2026-03-01T05:00:00Z", "2026-04-01T04:00:00Z"},
		{CalendarMonth, time.UTC, "2026-12-31T23:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{CalendarMonth, kol, "2026-02-28T18:29:00Z", "2026-01-31T18:30:00Z", "2026-02-28T18:30:00Z"},
		{CalendarDay, scl, "2026-09-06T12:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"}, // midnight skipped: the day starts at 01:00 -03
	} {
		at := utc(c.at)
		if got := c.cal.Start(at, c.loc); !got.Equal(utc(c.start)) {
			t.Errorf("%v %v at %s: start %s, want %s", c.cal, c.loc, c.at, got.UTC().Format(time.RFC3339), c.start)
		}
		if got := c.cal.Next(at, c.loc); !got.Equal(utc(c.next)) {
			t.Errorf("%v %v at %s: next %s, want %s", c.cal, c.loc, c.at, got.UTC().Format(time.RFC3339), c.next)
		}
	}
	for _, s := range []string{"calendar_day", "calendar_week", "calendar_month"} {
		if c, ok := ParseCalendar(s); !ok || c.String() != s {
			t.Errorf("%s: %v %v", s, c, ok)
		}
	}
	if _, ok := ParseCalendar("calendar_year"); ok {
		t.Error("calendar_year parsed")
	}
}
