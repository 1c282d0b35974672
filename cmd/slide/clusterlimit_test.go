package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/proctest"
)

// clusterPolicies are the five algorithms at 100 a minute (the buckets refill too slowly to
// matter within a test), every one with backend cluster and on_backend_error closed: a
// decision the cluster could not take is a 503, never an admission.
const clusterPolicies = `policies:
  - {name: fw, algorithm: fixed_window, limit: 100, window: 1m, backend: cluster, on_backend_error: closed, timeout: 2s}
  - {name: sl, algorithm: sliding_log, limit: 100, window: 1m, backend: cluster, on_backend_error: closed, timeout: 2s}
  - {name: sc, algorithm: sliding_counter, limit: 100, window: 1m, backend: cluster, on_backend_error: closed, timeout: 2s}
  - {name: tb, algorithm: token_bucket, capacity: 100, refill_per_second: 0.001, backend: cluster, on_backend_error: closed, timeout: 2s}
  - {name: lb, algorithm: leaky_bucket, capacity: 100, leak_per_second: 0.001, backend: cluster, on_backend_error: closed, timeout: 2s}
`

// startGroup runs n `slide serve` instances in this process, one consumer group on one
// broker, and waits until every one is ready and sees n members. No member leaves before the
// test ends, so the session timeout only has to outlast a busy machine: at 2 s, a clone's CI
// run beside other work (load 15 on 2 cores, -race) missed a heartbeat, the group
// rebalanced mid-test and the owner answered 21 decisions "owner not ready".
func startGroup(t *testing.T, n int, policies string) []string {
	t.Helper()
	broker := kafkatest.Start(t, "events", 6)
	file := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(file, []byte(policies), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	bases := make([]string, n)
	for i := range bases {
		addr := freeAddr(t)
		bases[i] = "http://" + addr
		var errb proctest.Buffer
		wg.Go(func() {
			if code := run(ctx, []string{"serve", "--addr", addr, "--brokers", broker.Addr, "--policies", file,
				"--session-timeout", "10s", "--snapshot-interval", "0"}, stdio{strings.NewReader(""), io.Discard, &errb}); code != 0 && ctx.Err() == nil {
				t.Errorf("instance %d exited %d: %s", i, code, proctest.Tail(errb.String(), 20))
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, base := range bases {
		for {
			code, body, _ := proctest.Get(base + "/readyz") // once ready, it stays 200 while limiter state restores
			text, _ := proctest.Scrape(base)
			if members, _ := proctest.Metric(text, "slide_cluster_members"); code == 200 && !bytes.Contains(body, []byte("restoring_limits")) && members == float64(n) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not ready with %d members in 60s (readyz %d)", base, n, code)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return bases
}

// allow asks base's POST /v1/allow for policy and key and returns the status code, and the
// body of an answer other than 200 and 429.
func allow(client *http.Client, base, policy, key string) (int, string, error) {
	resp, err := client.Post(base+"/v1/allow", "application/json", strings.NewReader(fmt.Sprintf(`{"policy":%q,"key":%q}`, policy, key)))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 || resp.StatusCode == 429 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, "", nil
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// clearOfMinuteBoundary returns once the next wall-clock minute boundary is at least room
// away. A fixed window and a sliding counter of one minute start a new window there: a burst
// across it is allowed up to 200 by the fixed window, and 101 by the sliding counter (the
// previous window's 100 decay to floor(99.5) = 99 at once), as a single memory limiter would.
func clearOfMinuteBoundary(room time.Duration) {
	now := time.Now()
	next := now.Truncate(time.Minute).Add(time.Minute)
	if next.Sub(now) < room {
		time.Sleep(next.Sub(now) + 100*time.Millisecond)
	}
}

// TestClusterLimitIsExact is issue #30's "done when": three instances, ten clients spread
// over them, a hundred requests each on one key of a 100/minute policy: exactly 100 are
// allowed, for every algorithm, and the rest denied (429), none failed; decisions did
// cross between instances (the key's owner is one of the three).
func TestClusterLimitIsExact(t *testing.T) {
	bases := startGroup(t, 3, clusterPolicies)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for _, policy := range []string{"fw", "sl", "sc", "tb", "lb"} {
		t.Run(policy, func(t *testing.T) {
			if policy == "fw" || policy == "sc" {
				clearOfMinuteBoundary(10 * time.Second)
			}
			var allowed, denied, other atomic.Int64
			var wg sync.WaitGroup
			for c := range 10 {
				wg.Go(func() {
					for range 100 {
						code, body, err := allow(client, bases[c%3], policy, "tenant-"+policy)
						switch {
						case err != nil:
							t.Error(err)
							return
						case code == 200:
							allowed.Add(1)
						case code == 429:
							denied.Add(1)
						default:
							if other.Add(1) == 1 {
								t.Logf("first failure: %d %s", code, body)
							}
						}
					}
				})
			}
			wg.Wait()
			if allowed.Load() != 100 || denied.Load() != 900 || other.Load() != 0 {
				t.Errorf("1000 requests over 3 instances on a 100/minute key: %d allowed, %d denied, %d failed; want exactly 100, 900, 0",
					allowed.Load(), denied.Load(), other.Load())
			}
		})
	}
	var forwarded float64
	for _, base := range bases {
		text, err := proctest.Scrape(base)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := proctest.Metric(text, "slide_cluster_peer_requests_total", `op="limit"`, `result="ok"`)
		forwarded += n
	}
	if forwarded == 0 {
		t.Error("no decision was forwarded to an owner: every instance decided alone")
	}
	t.Logf("round trips to owners: %.0f for 5,000 decisions (about two thirds forwarded)", forwarded)
}
