package redislimit_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// A Decide of several requests (one go-redis pipeline of EVALSHAs) fails as
// fast as a single one when Redis dies: a refused dial answers the call, it
// does not wait out its timeout (it did while go-redis ran pipelines on a pool
// of their own, whose failed dials the Backend's dialer does not count); and
// it answers from Redis again soon after Redis is back.
func TestPipelinedOutageFailsFast(t *testing.T) {
	srv := redistest.Start(t)
	c := goredis.NewClient(redislimit.Options(srv.Addr))
	t.Cleanup(func() { c.Close() })
	b, err := redislimit.New(c, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	log := limiter.Policy{Name: "down-log", Algorithm: limiter.SlidingLog, Limit: 1000, Window: time.Minute}
	bucket := limiter.Policy{Name: "down-tb", Algorithm: limiter.TokenBucket, Capacity: 1000, RefillPerSecond: 10}
	decide := func(k int) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		key := "k" + strconv.Itoa(k)
		err := b.Decide(ctx, []limiter.BackendRequest{{Policy: &log, Key: key, Cost: 1}, {Policy: &bucket, Key: key, Cost: 1}}, make([]limiter.Decision, 2))
		return time.Since(start), err
	}
	if _, err := decide(0); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	lat := decideDuringOutage(t, decide)
	t.Logf("failed decisions: median %v, p90 %v, slowest %v", lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])
	srv.Start()
	back := time.Now()
	for {
		if _, err := decide(1000); err == nil {
			break
		}
		if time.Since(back) > 5*time.Second {
			t.Fatal("no pipelined decision from Redis within 5 s of its return")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("first pipelined decision from Redis %v after it was back", time.Since(back))
}

// decideDuringOutage runs 320 decisions from 16 goroutines with Redis down,
// holds each to an error and their median to well under decide's 200 ms
// timeout, and returns their latencies, sorted.
func decideDuringOutage(t *testing.T, decide func(k int) (time.Duration, error)) []time.Duration {
	t.Helper()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				d, err := decide(g*20 + i)
				if err == nil {
					t.Error("a decision succeeded with Redis down")
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	if med := lat[len(lat)/2]; med > 50*time.Millisecond {
		t.Errorf("median failed decision took %v with Redis down, want well under the 200 ms timeout", med)
	}
	return lat
}
