package limiter_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// The article's token bucket: capacity 10, refilled at 5 per second.
func ExampleMemory_AllowN() {
	m, err := limiter.NewMemory(limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket,
		Capacity: 10, RefillPerSecond: 5}, limiter.MemoryConfig{})
	if err != nil {
		panic(err)
	}
	ctx, t0 := context.Background(), time.Unix(0, 0)
	allowed, last := 0, limiter.Decision{}
	for i := 0; i < 12; i++ {
		last, _ = m.AllowN(ctx, "tenant-42", t0, 1)
		if last.Allowed {
			allowed++
		}
	}
	fmt.Printf("t=0 burst of 12: %d allowed, retryAfterMs = %d\n", allowed, last.RetryAfter.Milliseconds())
	var at1 []string
	for i := 0; i < 6; i++ {
		d, _ := m.AllowN(ctx, "tenant-42", t0.Add(time.Second), 1)
		at1 = append(at1, fmt.Sprint(d.Allowed))
	}
	fmt.Println("t=1s:", strings.Join(at1, ","))
	// Output:
	// t=0 burst of 12: 10 allowed, retryAfterMs = 200
	// t=1s: true,true,true,true,true,false
}
