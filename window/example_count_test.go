package window_test

import (
	"fmt"
	"time"

	"github.com/slide-metrics/slide/window"
)

// The article's "largest revenue in 1,000 consecutive orders", shrunk to windows of 3.
func ExampleSumWindow() {
	w, err := window.NewSumWindow(3)
	if err != nil {
		panic(err)
	}
	for _, amount := range []float64{120, 80, 300, 90, 95} {
		sum, full := w.Push(amount)
		fmt.Println(sum, full)
	}
	// Output:
	// 120 false
	// 200 false
	// 500 true
	// 470 true
	// 485 true
}

func ExampleMaxWindow() {
	w, err := window.NewMaxWindow(3)
	if err != nil {
		panic(err)
	}
	var maxima []float64
	for _, ms := range []float64{120, 80, 300, 90, 95, 40, 500, 60} {
		if m, full := w.Push(ms); full {
			maxima = append(maxima, m)
		}
	}
	fmt.Println(maxima)
	// Output: [300 300 300 95 500 500]
}

func ExampleSlidingMax() {
	latency := []float64{120, 80, 300, 90, 95, 40, 500, 60}
	fmt.Println(window.SlidingMax(nil, latency, 3))
	fmt.Println(window.SlidingMin(nil, latency, 3))
	// Output:
	// [300 300 300 95 500 500]
	// [80 80 90 40 40 40]
}

// A time-window maximum: the deque is keyed by timestamp and expires by time.
func ExampleDeque() {
	dq := window.NewMaxDeque()
	const span = 60_000 // ms
	for _, e := range []struct {
		ts int64
		ms float64
	}{{0, 120}, {10_000, 300}, {30_000, 90}, {70_000, 95}, {75_000, 40}} {
		dq.Push(e.ts, e.ms)
		dq.Expire(e.ts - span)
		v, at, _ := dq.Front()
		fmt.Printf("t=%ds max=%v (at %ds)\n", e.ts/1000, v, at/1000)
	}
	// Output:
	// t=0s max=120 (at 0s)
	// t=10s max=300 (at 10s)
	// t=30s max=300 (at 10s)
	// t=70s max=95 (at 70s)
	// t=75s max=95 (at 70s)
}

// The article's WindowCounter: requests in (now − 60 s, now].
func ExampleCounter() {
	c, err := window.NewCounter(60 * time.Second)
	if err != nil {
		panic(err)
	}
	for _, ts := range []int64{0, 10_000, 30_000, 59_999, 60_000, 90_001} {
		fmt.Printf("%gs:%d ", float64(ts)/1000, c.Hit(ts))
	}
	fmt.Println()
	// Output: 0s:1 10s:2 30s:3 59.999s:4 60s:4 90.001s:3
}
