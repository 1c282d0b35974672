package rls_test

import (
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// unit: day and month count as envoyproxy/ratelimit counts them (windows of 86,400 s and
// 30 days from the epoch), and the answer's reset reaches that window's end; slide's
// window: calendar_month with a timezone resets on the zone's 1st.
func TestUnitsAndCalendarWindows(t *testing.T) {
	cfg, err := rls.Parse([]byte(`domain: quota
descriptors:
  - key: daily
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: monthly
    rate_limit: {unit: month, requests_per_unit: 2}
  - key: billing
    rate_limit: {window: calendar_month, timezone: Asia/Kolkata, requests_per_unit: 2}
`), "quota.yaml", rls.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg})
	// t0 is 2026-12-01T10:00:00.25Z.
	for _, c := range []struct {
		key   string
		reset time.Duration
	}{
		{"daily", 14*time.Hour - 250*time.Millisecond}, // to the UTC midnight
		// 30-day windows from the epoch, not the calendar month.
		{"monthly", time.Unix((t0.Unix()/(30*86400)+1)*30*86400, 0).Sub(t0)},
		// Kolkata's January starts at 2026-12-31T18:30Z.
		{"billing", time.Date(2026, 12, 31, 18, 30, 0, 0, time.UTC).Sub(t0)},
	} {
		resp := h.call(t, req("quota", 1, desc(c.key, "x")))
		st := resp.Statuses[0]
		if got := st.DurationUntilReset.AsDuration(); got != c.reset.Truncate(time.Second)+time.Second && got != c.reset {
			t.Errorf("%s: duration_until_reset %s, want %s (up to the second)", c.key, got, c.reset)
		}
	}
	var billing limiter.Policy
	for _, p := range cfg.Policies() {
		if strings.HasSuffix(p.Name, "billing") {
			billing = p
		}
	}
	if billing.Calendar != limiter.CalendarMonth || billing.Location.String() != "Asia/Kolkata" {
		t.Errorf("billing policy %+v, want calendar_month in Asia/Kolkata", billing)
	}
	for _, c := range []struct{ yaml, want string }{
		{"    rate_limit: {window: calendar_day, timezone: Nowhere/Land, requests_per_unit: 1}\n", `unknown time zone "Nowhere/Land"`},
		{"    rate_limit: {window: calendar_day, algorithm: token_bucket, requests_per_unit: 1}\n", "calendar_day applies only to fixed_window"},
	} {
		_, err := rls.Parse([]byte("domain: d\ndescriptors:\n  - key: k\n"+c.yaml), "bad.yaml", rls.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.yaml, err, c.want)
		}
	}
}
