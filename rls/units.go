package rls

import (
	"math"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slide-metrics/slide/limiter"
)

// units are envoyproxy/ratelimit's units and its dividers (a month is 30 days,
// a year 365).
var units = map[string]struct {
	unit pb.RateLimitResponse_RateLimit_Unit
	d    time.Duration
}{
	"second": {pb.RateLimitResponse_RateLimit_SECOND, time.Second},
	"minute": {pb.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	"hour":   {pb.RateLimitResponse_RateLimit_HOUR, time.Hour},
	"day":    {pb.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
	"week":   {pb.RateLimitResponse_RateLimit_WEEK, 7 * 24 * time.Hour},
	"month":  {pb.RateLimitResponse_RateLimit_MONTH, 30 * 24 * time.Hour},
	"year":   {pb.RateLimitResponse_RateLimit_YEAR, 365 * 24 * time.Hour},
}

// unitProblem says what is wrong with a rate_limit's unit and what to write:
// envoyproxy/ratelimit's "invalid rate limit unit" alone, for a unit left out
// too, does not say which units exist.
func unitProblem(unit string) string {
	const units = "second, minute, hour, day, week, month or year"
	if unit == "" {
		return "rate_limit needs a unit (" + units + ") or a window (e.g. 90s or calendar_month)"
	}
	return "invalid rate limit unit '" + limiter.ClipName(unit) + "': want " + units + " (or window:, e.g. 90s or calendar_month)"
}

// currentLimit describes a limit as Envoy's DescriptorStatus.current_limit: the
// largest unit that divides the window, times unit_multiplier when it is not 1.
func currentLimit(name string, rpu uint32, window time.Duration) *pb.RateLimitResponse_RateLimit {
	cl := &pb.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: rpu, Unit: pb.RateLimitResponse_RateLimit_SECOND}
	best := time.Second
	for _, u := range units {
		if window%u.d == 0 && u.d > best {
			best, cl.Unit = u.d, u.unit
		}
	}
	if mult := (window + best - 1) / best; mult > 1 && mult <= math.MaxUint32 {
		cl.UnitMultiplier = wrapUint32(uint32(mult))
	}
	return cl
}
