package limithttp

import (
	"net/http"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// A calendar day in New York on its 23-hour DST day: the denial's Retry-After, RateLimit
// and X-RateLimit-Reset reach the local midnight exactly (00:00 EDT, 04:00 UTC), and the
// RateLimit-Policy window is the day's 23 hours.
func TestCalendarHeaders(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatalf("time zone missing (install tzdata): %v", err)
	}
	now := time.Date(2026, 3, 8, 5, 30, 0, 0, time.UTC) // 00:30 EST
	s := newTestService(t, limiter.Config{Clock: func() time.Time { return now }, Policies: []limiter.Policy{
		{Name: "daily", Algorithm: limiter.FixedWindow, Limit: 1, Calendar: limiter.CalendarDay, Location: ny},
	}})
	h := AllowHandler(s)
	if w := post(h, `{"policy":"daily","key":"t1"}`); w.Code != http.StatusOK {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	w := post(h, `{"policy":"daily","key":"t1"}`)
	left := int64(22*3600 + 1800) // to 2026-03-09T04:00:00Z
	for name, want := range map[string]string{
		"Retry-After":       "81000",
		"RateLimit":         `"daily";r=0;t=81000`,
		"RateLimit-Policy":  `"daily";q=1;w=82800`,
		"X-RateLimit-Reset": "1773028800",
	} {
		if got := w.Header().Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if w.Code != http.StatusTooManyRequests || now.Unix()+left != 1773028800 {
		t.Errorf("status %d", w.Code)
	}
}
