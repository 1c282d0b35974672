package limitertest

import (
	"context"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// testTokenBucketExact replays requests of cost 1 and 2 at 0, 10 or 20 ms steps through
// token buckets whose refill per step is no exact binary fraction (3/s: 0.03 a step), beside
// the bucket in exact rational arithmetic: every decision and Remaining must be the exact
// bucket's. A request arriving just as its tokens are due is admitted: float sums of the
// refills put the bucket a few ulps short of a whole token there, and denied it (cap 10 at
// 3/s: the first at 1.01 s).
func testTokenBucketExact(t *testing.T, f Factory) {
	ctx := context.Background()
	for _, c := range []struct {
		capacity int64
		rate     float64
	}{{10, 3}, {100, 7}, {5, 0.3}, {2, 1.5}, {30, 25}} {
		l := f(t, limiter.Policy{Name: "tb", Algorithm: limiter.TokenBucket, Capacity: c.capacity, RefillPerSecond: c.rate})
		rng := rand.New(rand.NewPCG(uint64(c.capacity), 3))
		capR := new(big.Rat).SetInt64(c.capacity)
		rate := new(big.Rat).SetFloat64(c.rate)
		tokens, last := new(big.Rat).Set(capR), time.Duration(0)
		at := time.Duration(0)
		for i := range 1500 {
			at += time.Duration(rng.IntN(3)) * 10 * ms
			cost := int64(1 + rng.IntN(2))
			// The exact bucket: tokens + elapsed·rate, at most the capacity.
			exact := new(big.Rat).Mul(new(big.Rat).SetFrac64(int64(at-last), int64(sec)), rate)
			exact.Add(exact, tokens)
			if exact.Cmp(capR) > 0 {
				exact.Set(capR)
			}
			ok := exact.Cmp(new(big.Rat).SetInt64(cost)) >= 0
			if ok {
				tokens, last = exact.Sub(exact, new(big.Rat).SetInt64(cost)), at
			}
			remaining := new(big.Int).Quo(tokens.Num(), tokens.Denom()).Int64() // after an admission; before a denial below
			if !ok {
				remaining = new(big.Int).Quo(exact.Num(), exact.Denom()).Int64()
			}
			d, err := l.AllowN(ctx, "tb", T0.Add(at), cost)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != ok || d.Remaining != remaining {
				t.Fatalf("capacity %d at %g/s, request %d of cost %d at %v: allowed %v remaining %d, want %v %d (the exact bucket holds %s)",
					c.capacity, c.rate, i, cost, at, d.Allowed, d.Remaining, ok, remaining, exact.FloatString(12))
			}
		}
	}
}
