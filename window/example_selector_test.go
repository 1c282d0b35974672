package window_test

import (
	"fmt"
	"time"

	"github.com/slide-metrics/slide/window"
)

// Requests of two tenants, labelled by route and status code (one without a code): the
// /pay requests of every tenant, one answer per code, as /v1/window?match=route="/pay"&by=code
// reads them.
func ExampleStore_ReadGroups() {
	store, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		panic(err)
	}
	now := time.Date(2025, 11, 30, 8, 0, 0, 0, time.UTC).UnixMilli()
	for _, r := range []struct {
		key, route, code string
		ms               float64
	}{
		{"tenant-1", "/pay", "200", 20}, {"tenant-1", "/pay", "200", 40}, {"tenant-2", "/pay", "200", 30},
		{"tenant-1", "/pay", "503", 900}, {"tenant-2", "/pay", "", 15}, {"tenant-2", "/login", "200", 5},
	} {
		series, err := window.AppendSeries(nil, r.key, []window.Label{{Name: "code", Value: r.code}, {Name: "route", Value: r.route}})
		if err != nil {
			panic(err)
		}
		_ = store.ObserveAt(now, window.Event{TS: now, Metric: "latency_ms", Key: string(series), Value: r.ms})
	}
	sel, err := window.CompileSelector("", []window.Matcher{{Name: "route", Op: window.MatchEqual, Value: "/pay"}})
	if err != nil {
		panic(err)
	}
	groups, err := store.ReadGroups(now, "latency_ms", sel, []string{"code"}, time.Minute, nil, nil)
	if err != nil {
		panic(err)
	}
	for _, g := range groups {
		fmt.Printf("code=%q: %d requests of %d series, max %.0f ms\n", g.Labels[0].Value, g.Agg.Count, g.Agg.Series, g.Agg.Max)
	}

	_, err = window.CompileSelector("", []window.Matcher{{Name: "code", Op: window.MatchRegexp, Value: "5.("}})
	fmt.Println(err)
	// Output:
	// code="": 1 requests of 1 series, max 15 ms
	// code="200": 3 requests of 2 series, max 40 ms
	// code="503": 1 requests of 1 series, max 900 ms
	// window: invalid matcher code=~"5.(": error parsing regexp: missing closing ): `5.(`
}
