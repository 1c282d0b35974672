package backtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// A log of unix microseconds read as milliseconds put requests a second apart 1,000 s apart
// (55,000 years ahead), so a limit of 2 a minute allowed every one of them. Times outside the
// years 0000-9999 are refused naming the line, whatever the log's format.
func TestReplayRefusesTimesOutsideRFC3339Years(t *testing.T) {
	p := limiter.Policy{Name: "p", Algorithm: limiter.SlidingLog, Limit: 2, Window: time.Minute}
	r, err := New(Config{Policies: []limiter.Policy{p}})
	if err != nil {
		t.Fatal(err)
	}
	ok := Request{Time: time.UnixMilli(253_402_300_799_999), Key: "a", Cost: 1, Line: 1} // 9999-12-31
	if err := r.Replay(context.Background(), ok); err != nil {
		t.Fatalf("year 9999: %v", err)
	}
	us := Request{Time: time.UnixMilli(1_764_489_600_040_000), Key: "a", Cost: 1, Line: 2}
	err = r.Replay(context.Background(), us)
	if !errors.Is(err, ErrLog) || !strings.Contains(err.Error(), "line 2: ts 1764489600040000 ms is outside the years 0000-9999") {
		t.Fatalf("err %v", err)
	}
}
