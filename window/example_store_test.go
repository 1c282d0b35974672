package window_test

import (
	"fmt"
	"time"

	"github.com/slide-metrics/slide/window"
)

// A p95 over the last 5 minutes without storing a sample: events land in 10-second slots,
// and the read states the span it covered.
func ExampleStore() {
	store, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		panic(err)
	}
	start := time.Date(2025, 11, 30, 8, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 300 { // one request a second for 5 minutes, latencies 1..100 ms
		ts := start + int64(i)*1000
		_ = store.ObserveAt(ts, window.Event{TS: ts, Metric: "latency_ms", Key: "tenant-42", Value: float64(i%100 + 1)})
	}
	now := start + 299_000
	a, err := store.ReadAt(now, "latency_ms", "tenant-42", 5*time.Minute, []float64{0.5, 0.95})
	if err != nil {
		panic(err)
	}
	fmt.Printf("span %s – %s\n", time.UnixMilli(a.From).UTC().Format(time.TimeOnly), time.UnixMilli(a.To).UTC().Format(time.TimeOnly))
	fmt.Printf("count %d, avg %.1f, max %.0f, rate %.2f/s\n", a.Count, a.Avg(), a.Max, a.RatePerSec(now))
	// Exact p50 and p95 of these latencies are 50 and 95; the sketch is within 1%.
	fmt.Printf("p50 %.1f, p95 %.1f\n", a.Quantiles[0], a.Quantiles[1])

	_, err = store.ReadAt(now, "latency_ms", "tenant-42", 15*time.Second, nil)
	fmt.Println(err)
	// Output:
	// span 08:00:00 – 08:05:00
	// count 300, avg 50.5, max 100, rate 1.00/s
	// p50 50.0, p95 94.1
	// window: window must be a positive multiple of the slot width, at most the retention: 15s with 10s slots × 30
}
