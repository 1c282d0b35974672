package limiter

import (
	"strings"
	"testing"
	"time"
)

// Bounds at fixed instants around DST changes and in a +05:30 zone: each period starts and
// ends on the local boundary, whatever the day's length.
func TestCalendarBounds(t *testing.T) {
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatalf("time zone %s missing (install tzdata): %v", name, err)
		}
		return loc
	}
	ny, london, kolkata := zone("America/New_York"), zone("Europe/London"), zone("Asia/Kolkata")
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		cal             Calendar
		loc             *time.Location
		now, start, end string
	}{
		{CalendarDay, nil, "2026-03-08T23:59:59Z", "2026-03-08T00:00:00Z", "2026-03-09T00:00:00Z"},
		{CalendarDay, ny, "2026-03-08T05:30:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}, // 23 h
		{CalendarDay, ny, "2026-03-09T03:59:59Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},
		{CalendarDay, ny, "2026-11-01T12:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"}, // 25 h
		{CalendarDay, london, "2026-03-29T00:30:00Z", "2026-03-29T00:00:00Z", "2026-03-29T23:00:00Z"},
		{CalendarDay, london, "2026-10-25T00:30:00Z", "2026-10-24T23:00:00Z", "2026-10-26T00:00:00Z"},
		{CalendarDay, kolkata, "2026-06-01T18:29:59Z", "2026-05-31T18:30:00Z", "2026-06-01T18:30:00Z"},
		{CalendarDay, kolkata, "2026-06-01T18:30:00Z", "2026-06-01T18:30:00Z", "2026-06-02T18:30:00Z"},
		{CalendarWeek, nil, "2026-03-01T12:00:00Z", "2026-02-23T00:00:00Z", "2026-03-02T00:00:00Z"}, // a Sunday
		{CalendarWeek, nil, "2026-03-02T00:00:00Z", "2026-03-02T00:00:00Z", "2026-03-09T00:00:00Z"}, // a Monday
		{CalendarWeek, london, "2026-03-29T22:59:59Z", "2026-03-23T00:00:00Z", "2026-03-29T23:00:00Z"},
		{CalendarMonth, nil, "2028-02-29T23:59:59Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
		{CalendarMonth, ny, "2026-11-15T00:00:00Z", "2026-11-01T04:00:00Z", "2026-12-01T05:00:00Z"},
		{CalendarMonth, kolkata, "2026-12-31T18:30:00Z", "2026-12-31T18:30:00Z", "2027-01-31T18:30:00Z"},
	} {
		start, end := c.cal.Bounds(c.loc, utc(c.now).UnixNano())
		if start != utc(c.start).UnixNano() || end != utc(c.end).UnixNano() {
			t.Errorf("%s %v at %s: got [%s, %s), want [%s, %s)", c.cal, c.loc, c.now,
				time.Unix(0, start).UTC().Format(time.RFC3339), time.Unix(0, end).UTC().Format(time.RFC3339), c.start, c.end)
		}
	}
}

func TestParseCalendarPolicies(t *testing.T) {
	ps, err := ParsePolicies([]byte(`policies:
  - {name: daily, algorithm: fixed_window, limit: 100, window: calendar_day, timezone: America/New_York}
  - {name: monthly, algorithm: fixed_window, limit: 5, window: calendar_month}
  - {name: week, algorithm: sliding_log, limit: 5, window: 7d}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Calendar != CalendarDay || ps[0].Location.String() != "America/New_York" || ps[1].Calendar != CalendarMonth ||
		ps[1].Location != nil || ps[2].Window != 7*24*time.Hour {
		t.Fatalf("got %+v", ps)
	}
	out, err := MarshalPolicies(ps)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePolicies(out, "back")
	if err != nil || back[0].Calendar != CalendarDay || back[0].Location.String() != "America/New_York" {
		t.Fatalf("round trip: %v %+v\n%s", err, back, out)
	}
	for _, c := range []struct{ yaml, want string }{
		{"  - {name: a, algorithm: fixed_window, limit: 1, window: calendar_day, timezone: Mars/Olympus}\n",
			`p.yaml:2: policy "a": timezone: unknown time zone "Mars/Olympus"`},
		{"  - {name: a, algorithm: sliding_log, limit: 1, window: calendar_day}\n",
			`p.yaml:2: policy "a": window: calendar_day applies only to fixed_window`},
		{"  - {name: a, algorithm: fixed_window, limit: 1, window: 1m, timezone: Europe/London}\n",
			`p.yaml:2: policy "a": timezone: applies only to a calendar window`},
		{"  - {name: a, algorithm: fixed_window, limit: 1, window: calendar_year}\n",
			`or calendar_day, calendar_week or calendar_month`},
	} {
		_, err := ParsePolicies([]byte("policies:\n"+c.yaml), "p.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.yaml, err, c.want)
		}
	}
}

func TestParseLevelsPolicies(t *testing.T) {
	ps, err := ParsePolicies([]byte(`policies:
  - {name: org-budget, algorithm: fixed_window, window: calendar_day, levels: {separator: "/", limits: [50, 30, 20]}}
  - {name: by-colon, algorithm: fixed_window, window: 1h, levels: {separator: "::", limits: [7, 3]}}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := ps[0].Levels; l.N != 3 || l.Separator != "/" || l.Limits != [MaxLevels]int64{50, 30, 20} || ps[0].Quota() != 20 {
		t.Errorf("levels %+v quota %d", l, ps[0].Quota())
	}
	if got := ps[1].Levels.LevelKeys("a::b::c"); len(got) != 2 || got[0] != "a" || got[1] != "a::b::c" {
		t.Errorf("level keys of a::b::c under two levels: %q, want [a a::b::c]", got)
	}
	out, err := MarshalPolicies(ps)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ParsePolicies(out, "back"); err != nil || back[0].Levels != ps[0].Levels || back[1].Levels != ps[1].Levels {
		t.Fatalf("round trip: %v %+v\n%s", err, back, out)
	}
	for _, c := range []struct{ yaml, want string }{
		{"  - {name: a, algorithm: sliding_log, window: 1m, levels: {limits: [3, 2]}}\n", `policy "a": levels: apply only to fixed_window`},
		{"  - {name: a, algorithm: fixed_window, window: 1m, limit: 5, levels: {limits: [3, 2]}}\n", "takes no limit"},
		{"  - {name: a, algorithm: fixed_window, window: 1m, levels: {limits: [1, 2, 3, 4, 5]}}\n", "a list of 1 to 4 limits"},
		{"  - {name: a, algorithm: fixed_window, window: 1m, levels: {limits: [3, 0]}}\n", "limit 0 of level 2"},
		{"  - {name: a, algorithm: fixed_window, window: 1m, levels: {separator: \" \", limits: [3]}}\n", "separator must be"},
	} {
		_, err := ParsePolicies([]byte("policies:\n"+c.yaml), "p.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.yaml, err, c.want)
		}
	}
}
