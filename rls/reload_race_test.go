package rls_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/status"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// A reload swaps the config and the limiter's numbers as one, to a request: while
// requests_per_unit goes 10 → 5 → 10 …, a fresh key asking for 7 (valid under 10 alone)
// is OK by a status saying 10 or OVER_LIMIT by one saying 5, never InvalidArgument nor an
// answer of one config with the other's numbers, and a fresh key asking for 3 (valid
// under both) is always OK. Before, Reload set the limiter's numbers and then the config,
// so a request holding the old config (10) whose cost the new numbers (5) could not hold
// got InvalidArgument ("cost 7, policy … allows at most 5").
func TestReloadIsAtomicToRequests(t *testing.T) {
	opt := rls.LoadOptions{DefaultBackend: limiter.BackendMemory}
	cfgs := [2]*rls.Config{}
	for i, limit := range []string{"10", "5"} {
		file := filepath.Join(t.TempDir(), "shop.yaml")
		writeReload(t, file, reloadConfig(limit))
		cfg, err := rls.Load(file, opt)
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = cfg
	}
	h := start(t, setup{cfg: cfgs[0]})
	stop, tick := make(chan struct{}), make(chan struct{}, 1)
	var reloads atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select { // one reload per answer, as fast as they come, leaving the CPU to requests
			case <-stop:
				return
			case <-tick:
			}
			if _, err := h.server.Reload(cfgs[i%2]); err != nil {
				t.Error(err)
				return
			}
			reloads.Add(1)
		}
	}()
	var okBy10, overBy5 atomic.Int64 // answers to cost 7
	var next atomic.Int64
	const workers, each = 4, 400
	var rwg sync.WaitGroup
	for w := 0; w < workers; w++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for range each {
				n := next.Add(1)
				for _, cost := range []uint32{7, 3} {
					r := req("shop", cost, desc("client_id", fmt.Sprintf("c%d-%d", n, cost)))
					resp, err := h.client.ShouldRateLimit(context.Background(), r)
					if err != nil {
						t.Errorf("cost %d during reloads: %v (%v)", cost, err, status.Code(err))
						return
					}
					st := resp.GetStatuses()[0]
					limit, code := st.GetCurrentLimit().GetRequestsPerUnit(), resp.GetOverallCode()
					switch {
					case cost == 3 && code != pb.RateLimitResponse_OK,
						cost == 7 && limit == 10 && code != pb.RateLimitResponse_OK,
						cost == 7 && limit == 5 && code != pb.RateLimitResponse_OVER_LIMIT,
						limit != 10 && limit != 5:
						t.Errorf("cost %d of a fresh key during reloads: %v", cost, resp)
						return
					}
					select {
					case tick <- struct{}{}:
					default:
					}
					if cost == 7 && limit == 10 {
						okBy10.Add(1)
					} else if cost == 7 {
						overBy5.Add(1)
					}
				}
			}
		}()
	}
	rwg.Wait()
	close(stop)
	wg.Wait()
	t.Logf("%d reloads; cost 7: %d OK by 10, %d over by 5", reloads.Load(), okBy10.Load(), overBy5.Load())
}
