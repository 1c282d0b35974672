package rls_test

import (
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

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

// A request the limiter never sees (requests_per_unit 0, or hits above the quota) is
// over limit until the window it is in ends, as envoyproxy/ratelimit answers it: a
// calendar window's until the zone's next period, not 30 days from the epoch or from
// now, and its RateLimit-Policy names the period's own length.
func TestOverLimitWithoutLimiterResetsWithWindow(t *testing.T) {
	cfg, err := rls.Parse([]byte(`domain: quota
descriptors:
  - key: closed
    rate_limit: {window: calendar_month, timezone: Asia/Kolkata, requests_per_unit: 0}
  - key: billing
    rate_limit: {window: calendar_month, timezone: Asia/Kolkata, requests_per_unit: 2}
  - key: hourly
    rate_limit: {unit: hour, requests_per_unit: 2}
`), "quota.yaml", rls.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg})
	// t0 is 2026-12-01T10:00:00.25Z; Kolkata's December runs from 2026-11-30T18:30Z
	// to 2026-12-31T18:30Z, 31 days.
	month := time.Date(2026, 12, 31, 18, 30, 0, 0, time.UTC).Sub(t0)
	for _, c := range []struct {
		key         string
		hits        uint32
		reset       time.Duration
		retry, rlim string
	}{
		{"closed", 1, month, "2622600", `"rls.quota.closed";q=0;w=2678400`},
		{"billing", 3, month, "2622600", `"rls.quota.billing";q=2;w=2678400`},
		{"hourly", 3, time.Hour - 250*time.Millisecond, "3600", `"rls.quota.hourly";q=2;w=3600`},
	} {
		resp := h.call(t, req("quota", c.hits, desc(c.key, "x")))
		st := resp.Statuses[0]
		if st.Code != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("%s: %s, want OVER_LIMIT", c.key, st.Code)
		}
		if got := st.DurationUntilReset.AsDuration(); got != c.reset {
			t.Errorf("%s: duration_until_reset %s, want %s", c.key, got, c.reset)
		}
		hdr := map[string]string{}
		for _, kv := range resp.ResponseHeadersToAdd {
			hdr[kv.Key] = kv.Value
		}
		if hdr["retry-after"] != c.retry || hdr["ratelimit-policy"] != c.rlim {
			t.Errorf("%s: retry-after %q, ratelimit-policy %q; want %q, %q", c.key, hdr["retry-after"], hdr["ratelimit-policy"], c.retry, c.rlim)
		}
	}
}
