package usage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

// tieredStore has cost in the default rings of slide serve: an hour by the minute, two days
// by the hour, 36 days by the day.
func tieredStore(t testing.TB) *window.Store {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{Metrics: map[string]window.RingConfig{"cost": {
		Slot: time.Minute, Slots: 60, Tiers: []window.Tier{{Slot: time.Hour, Slots: 48}, {Slot: 24 * time.Hour, Slots: 36}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// feedEvery observes cost 1 for key every step from from to to, inclusive, as ingest would
// (each at its own time).
func feedEvery(t testing.TB, st *window.Store, key string, from, to time.Time, step time.Duration) {
	for at := from; !at.After(to); at = at.Add(step) {
		observe(t, st, at, "cost", key, 1, 1)
	}
}

func calendarRule(cal window.Calendar, zone string, max float64) usage.Rule {
	return usage.Rule{Name: "daily", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Calendar: cal, Timezone: zone, Max: max}
}

// TestCalendarDayAcrossDST: calendar_day in America/New_York on 2026-03-08, the day clocks
// go from 02:00 EST to 03:00 EDT, a day of 23 hours. An event every 10 minutes. At 20:00 EDT
// (00:00Z) the day began at 05:00Z: 19 hours, 114 events, and the one at now. The window
// resets at the next local midnight, 04:00Z, 4 hours on: ResetAfter, and a denial's
// RetryAfter, say exactly that. The next day starts at 04:00Z, an hour earlier in UTC.
func TestCalendarDayAcrossDST(t *testing.T) {
	st := tieredStore(t)
	from := time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)
	now := time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)
	feedEvery(t, st, "tenant-1", from, now, 10*time.Minute)

	d := check(t, mustChecker(t, st, calendarRule(window.CalendarDay, "America/New_York", 1000)), "tenant-1", now)
	if !d.Allowed || d.Remaining != 1000-115 || d.Window != 23*time.Hour || d.ResetAfter != 4*time.Hour {
		t.Fatalf("20:00 EDT on the DST day: %+v, want remaining 885, window 23h, reset in 4h", d)
	}
	d = check(t, mustChecker(t, st, calendarRule(window.CalendarDay, "America/New_York", 100)), "tenant-1", now)
	if d.Allowed || d.RetryAfter != 4*time.Hour || d.ResetAfter != 4*time.Hour {
		t.Fatalf("over 100: %+v, want denied until the local midnight, 4h", d)
	}
	// The day before (EST, UTC-5): at 12:00 EST = 17:00Z on the 7th, 12 hours, 72 events and now's.
	st2 := tieredStore(t)
	noon := time.Date(2026, 3, 7, 17, 0, 0, 0, time.UTC)
	feedEvery(t, st2, "tenant-1", from, noon, 10*time.Minute)
	d = check(t, mustChecker(t, st2, calendarRule(window.CalendarDay, "America/New_York", 1000)), "tenant-1", noon)
	if d.Remaining != 1000-73 || d.Window != 24*time.Hour || d.ResetAfter != 12*time.Hour {
		t.Fatalf("noon EST: %+v", d)
	}
}

// TestCalendarHalfHourZone: Asia/Kolkata is UTC+05:30, so its midnight, 18:30Z, falls inside
// an hour. While the boundary is in the ring's own minute slots the read starts there
// exactly; once it is older than the ring's hour, in the tier of hours, the read takes that
// hour slot whole and starts at 18:00Z: the half hour before local midnight counts too.
func TestCalendarHalfHourZone(t *testing.T) {
	st := tieredStore(t)
	midnight := time.Date(2026, 5, 10, 18, 30, 0, 0, time.UTC) // 2026-05-11 00:00 IST
	from := midnight.Add(-3 * time.Hour)
	late := midnight.Add(10 * time.Hour)
	feedEvery(t, st, "tenant-1", from, late, 10*time.Minute)

	// 20 minutes after midnight, read from a store fed up to then: exact, 3 events.
	early := midnight.Add(20 * time.Minute)
	st2 := tieredStore(t)
	feedEvery(t, st2, "tenant-1", from, early, 10*time.Minute)
	c := mustChecker(t, st2, calendarRule(window.CalendarDay, "Asia/Kolkata", 1000))
	if d := check(t, c, "tenant-1", early); d.Remaining != 1000-3 {
		t.Fatalf("20 min after midnight: %+v, want 3 used", d)
	}
	// 10 hours after: [18:00Z, 04:30Z], 63 events and now's, 3 of them before midnight.
	c = mustChecker(t, st, calendarRule(window.CalendarDay, "Asia/Kolkata", 1000))
	if d := check(t, c, "tenant-1", late); d.Remaining != 1000-64 || d.ResetAfter != 14*time.Hour {
		t.Fatalf("10 h after midnight: %+v, want 64 used (from 18:00Z), reset in 14h", d)
	}
}

// TestSevenDayRule: window: 7d on cost reads past the ring's hour into its tiers; its sum
// equals the store's read of 7 days (whose span rounds out to the day slot it starts in,
// Agg.From), and a denial's RetryAfter is a time when the newest slots are within the bound.
func TestSevenDayRule(t *testing.T) {
	st := tieredStore(t)
	from := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	now := from.Add(10*24*time.Hour + 30*time.Minute)
	feedEvery(t, st, "tenant-1", from, now, 15*time.Minute)
	a, err := st.ReadAt(now.UnixMilli(), "cost", "tenant-1", 7*24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for at := from; !at.After(now); at = at.Add(15 * time.Minute) {
		if ms := at.UnixMilli(); ms >= a.From && ms < a.To {
			want++
		}
	}
	if a.Sum != float64(want) || a.From%(24*3600_000) != 0 || a.From > a.To-7*24*3600_000 {
		t.Fatalf("7 days read %+v, the oracle %d over its span", a, want)
	}
	r := usage.Rule{Name: "weekly", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: 7 * 24 * time.Hour, Max: 100_000}
	if d := check(t, mustChecker(t, st, r), "tenant-1", now); !d.Allowed || d.Remaining != int64(100_000-want) {
		t.Fatalf("7d rule: %+v, want %d used", d, want)
	}
	r.Max = float64(want - 200)
	d := check(t, mustChecker(t, st, r), "tenant-1", now)
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 7*24*time.Hour {
		t.Fatalf("7d rule over: %+v", d)
	}
	// At RetryAfter the rule allows again (no new events).
	if d2 := check(t, mustChecker(t, st, r), "tenant-1", now.Add(d.RetryAfter)); !d2.Allowed {
		t.Fatalf("still denied at RetryAfter %v: %+v", d.RetryAfter, d2)
	}
}

// TestCalendarRuleParsing: the policy file's spelling, and what is refused with its line.
func TestCalendarRuleParsing(t *testing.T) {
	rules, err := usage.ParseRules([]byte(`rules:
  - {name: daily, metric: cost, agg: sum, window: calendar_day, timezone: America/New_York, max: 1000}
  - {name: monthly, metric: cost, agg: sum, window: calendar_month, max: 1000000}
  - {name: weekly, metric: cost, agg: sum, window: 7d, max: 50000}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if rules[0].Calendar != window.CalendarDay || rules[0].Timezone != "America/New_York" || rules[1].Calendar != window.CalendarMonth ||
		rules[2].Window != 7*24*time.Hour {
		t.Fatalf("%+v", rules)
	}
	for _, c := range []struct{ yaml, msg string }{
		{`{name: d, metric: cost, agg: sum, window: calendar_day, timezone: Mars/Olympus, max: 1}`, `p.yaml:2: rule "d": timezone: "Mars/Olympus" is not a known IANA time zone`},
		{`{name: d, metric: cost, agg: sum, window: 1h, timezone: UTC, max: 1}`, `timezone: only a calendar window`},
		{`{name: d, metric: cost, agg: sum, window: calendar_year, max: 1}`, `(or calendar_day, calendar_week, calendar_month)`},
		{`{name: d, metric: cost, agg: sum, window: calendar_day, timezone: Local, max: 1}`, `not the server's local time`},
	} {
		_, err := usage.ParseRules([]byte("rules:\n  - "+c.yaml+"\n"), "p.yaml")
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.msg)
		}
	}
	// A calendar month on a ring of an hour is refused with rings that serve it.
	_, err = usage.NewChecker(newStore(t), calendarRule(window.CalendarMonth, "", 1))
	if err == nil || !strings.Contains(err.Error(), "--rings cost=1m:60+1h:48+1d:") {
		t.Errorf("calendar_month on cost=1m:60: %v", err)
	}
}
