package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/internal/redistest"
)

// Redis killed under a running `slide serve`: POST /v1/allow load on three Redis policies,
// one per on_backend_error mode, while redis-server is SIGKILLed and started again. Each
// policy answers per its mode within its timeout, decisions come back from Redis within a
// second of it answering, and neither goroutines nor Redis connections pile up in slide.
// (limiter/redislimit's TestOutageUnderLoad checks the same at the package level, decision by
// decision.)
func TestRedisOutageThroughServe(t *testing.T) {
	const timeout = 50 * time.Millisecond
	srv := redistest.Start(t)
	policies := filepath.Join(t.TempDir(), "policies.yaml")
	var yaml strings.Builder
	yaml.WriteString("policies:\n")
	for _, mode := range []string{"open", "closed", "local"} {
		fmt.Fprintf(&yaml, "  - {name: %s, algorithm: sliding_log, limit: 100000, window: 1m, backend: redis, on_backend_error: %s, timeout: %s}\n", mode, mode, timeout)
	}
	if err := os.WriteFile(policies, []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, brokers := brokerProc(t)
	s := startSlide(t, "slide", brokers, "redis", "--policies", policies, "--redis", srv.Addr)

	type answer struct {
		policy   string
		start    time.Time
		took     time.Duration
		status   int
		degraded bool
	}
	var (
		mu      sync.Mutex
		answers []answer
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				policy := []string{"open", "closed", "local"}[(w+i)%3]
				body := fmt.Sprintf(`{"policy":%q,"key":"tenant-%d","cost":1}`, policy, (w*31+i)%50)
				start := time.Now()
				resp, err := client.Post(s.base+"/v1/allow", "application/json", strings.NewReader(body))
				if err != nil {
					t.Errorf("POST /v1/allow: %v", err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				a := answer{policy: policy, start: start, took: time.Since(start), status: resp.StatusCode}
				var d struct{ Degraded bool }
				if resp.StatusCode == 200 && json.Unmarshal(b, &d) == nil {
					a.degraded = d.Degraded
				}
				if resp.StatusCode == 503 && !bytes.Contains(b, []byte(`"code":"unavailable"`)) {
					t.Errorf("503 without unavailable: %s", b)
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(time.Second)
	goroutinesUp := s.metric(t, "go_goroutines")
	killing := time.Now()
	srv.Stop() // SIGKILL; returns once the port refuses
	down := time.Now()
	time.Sleep(1500 * time.Millisecond)
	restarting := time.Now() // Redis may answer before Start has seen its PING
	srv.Start()              // returns once it answers PING
	back := time.Now()
	time.Sleep(1500 * time.Millisecond)
	cancel()
	wg.Wait()

	var upN, downN, afterN int
	var slowest time.Duration
	var lat []time.Duration
	recovered := map[string]time.Duration{}
	for _, a := range answers {
		// Answers that straddle the kill or the restart are judged by neither phase.
		switch {
		case a.start.Add(a.took).Before(killing):
			upN++
			if a.status != 200 || a.degraded {
				t.Errorf("%s with Redis up: %d degraded=%v", a.policy, a.status, a.degraded)
			}
		case !a.start.Before(down) && a.start.Add(a.took).Before(restarting):
			downN++
			lat = append(lat, a.took)
			slowest = max(slowest, a.took)
			ok := false
			switch a.policy {
			case "open":
				ok = a.status == 200 && a.degraded
			case "closed":
				ok = a.status == 503
			case "local":
				ok = (a.status == 200 && a.degraded) || a.status == 429
			}
			if !ok {
				t.Errorf("%s with Redis down: %d degraded=%v", a.policy, a.status, a.degraded)
			}
		case !a.start.Before(back):
			afterN++
			if _, seen := recovered[a.policy]; !seen && a.status == 200 && !a.degraded {
				recovered[a.policy] = a.start.Add(a.took).Sub(back)
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if downN < 100 || afterN < 100 {
		t.Fatalf("too few answers to judge: %d while down, %d after", downN, afterN)
	}
	// Each decision is bounded by the policy timeout; the rest is HTTP on a shared machine.
	if bound := timeout + 250*time.Millisecond; slowest > bound {
		t.Errorf("slowest answer while Redis was down took %v, want ≤ %v", slowest, bound)
	}
	for _, p := range []string{"open", "closed", "local"} {
		if d, ok := recovered[p]; !ok || d > time.Second {
			t.Errorf("%s: first decision from Redis %v after it answered (seen %v), want within 1 s", p, d, ok)
		}
	}
	if e := s.metric(t, "slide_limiter_backend_errors_total"); e < float64(downN)/3 {
		t.Errorf("slide_limiter_backend_errors_total %v for %d answers while down", e, downN)
	}

	// No leak: slide's goroutines return to what they were under load with Redis up, and
	// Redis sees no more connections than the pool holds (go-redis's default 10 per CPU).
	var goroutines float64
	eventually(t, 3*time.Second, "slide's goroutines did not return to their level before the outage", func() bool {
		goroutines = s.metric(t, "go_goroutines")
		return goroutines <= goroutinesUp+5
	})
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer admin.Close()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	conns := strings.Count(list, "\n")
	if conns > 20+1 {
		t.Errorf("redis-server lists %d clients after the outage, more than slide's pool of 20 and the admin", conns)
	}
	t.Logf("redis through slide serve: %d answers up, %d while down (p99 %v, slowest %v), %d after; first decision from Redis %v / %v / %v after it answered (open/closed/local); goroutines %.0f under load before, %.0f after; %d Redis clients after (pool ≤ 20, plus this check)",
		upN, downN, lat[len(lat)*99/100].Round(100*time.Microsecond), slowest.Round(100*time.Microsecond), afterN,
		recovered["open"].Round(time.Millisecond), recovered["closed"].Round(time.Millisecond), recovered["local"].Round(time.Millisecond),
		goroutinesUp, goroutines, conns)
}
