package usage_test

import (
	"context"
	"fmt"
	"time"

	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

// A tenant's hourly cost quota: denied once its cost over the last hour exceeds 1000, until
// enough old minutes leave the window.
func ExampleChecker() {
	store, _ := window.NewStore(window.StoreConfig{
		Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60}},
	})
	rules, _ := usage.ParseRules([]byte("rules: [{name: tenant-quota, metric: cost, agg: sum, window: 1h, max: 1000}]"), "policies.yaml")
	quota, _ := usage.NewChecker(store, rules[0])

	t0 := time.Date(2025, 11, 30, 8, 0, 0, 0, time.UTC)
	for i, cost := range []float64{400, 400, 300} {
		at := t0.Add(time.Duration(i*10) * time.Minute)
		store.ObserveAt(at.UnixMilli(), window.Event{TS: at.UnixMilli(), Metric: "cost", Key: "tenant-42", Value: cost})
		d, _ := quota.Check(context.Background(), "tenant-42", at, 1)
		fmt.Printf("%s used %4.0f: allowed=%v remaining=%d retry_after=%v\n", at.Format("15:04"), 400*float64(min(i+1, 2))+300*float64(i/2), d.Allowed, d.Remaining, d.RetryAfter)
	}
	d, _ := quota.Check(context.Background(), "tenant-42", t0.Add(time.Hour), 1)
	fmt.Printf("09:00 allowed=%v (the 08:00 minute left the hour)\n", d.Allowed)
	// Output:
	// 08:00 used  400: allowed=true remaining=600 retry_after=0s
	// 08:10 used  800: allowed=true remaining=200 retry_after=0s
	// 08:20 used 1100: allowed=false remaining=0 retry_after=40m0s
	// 09:00 allowed=true (the 08:00 minute left the hour)
}
