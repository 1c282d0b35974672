package rls_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

const reloadBase = `domain: shop
descriptors:
  - key: client_id
    rate_limit: {unit: minute, requests_per_unit: LIMIT}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 1}
`

func writeReload(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func reloadConfig(limit string) string { return strings.Replace(reloadBase, "LIMIT", limit, 1) }

// TestReloadFile: a limit lowered, then raised, in the file applies to the next requests
// over gRPC, keeping the count of the current window (envoyproxy/ratelimit's counters are
// keyed by descriptor and window); a file that does not load, or that needs a new policy,
// keeps the config in use and is counted.
func TestReloadFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shop.yaml")
	writeReload(t, file, reloadConfig("5"))
	opt := rls.LoadOptions{DefaultBackend: limiter.BackendMemory}
	cfg, err := rls.Load(file, opt)
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg})
	over, ok := pb.RateLimitResponse_OVER_LIMIT, pb.RateLimitResponse_OK
	client := req("shop", 0, desc("client_id", "c1"))
	for range 3 {
		if got := h.call(t, client).GetOverallCode(); got != ok {
			t.Fatalf("under 5: %v", got)
		}
	}
	reload := func() (rls.Change, error) { return h.server.ReloadFile(file, opt) }

	writeReload(t, file, reloadConfig("3"))
	c, err := reload()
	if err != nil {
		t.Fatal(err)
	}
	if want := "domains 1 → 1, descriptors 2 → 2; changed: shop.client_id"; c.String() != want {
		t.Errorf("change %q, want %q", c, want)
	}
	resp := h.call(t, client)
	if resp.GetOverallCode() != over || resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() != 3 {
		t.Fatalf("after 5 → 3 with 3 used: %v", resp)
	}

	writeReload(t, file, reloadConfig("10"))
	if _, err := reload(); err != nil {
		t.Fatal(err)
	}
	resp = h.call(t, client)
	if resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetLimitRemaining() != 6 {
		t.Fatalf("after 3 → 10 with 3 used (the denied one not counted): %v, want OK with 6 left", resp)
	}

	applied := map[string]string{"result": "applied"}
	refused := map[string]string{"result": "refused"}
	for _, bad := range []struct{ name, body, want string }{
		{"broken", "domain: shop\ndescriptors:\n  - key: client_id\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "shop.yaml:4"},
		{"new descriptor", reloadConfig("10") + "  - key: ip\n    rate_limit: {unit: second, requests_per_unit: 1}\n", `policy "rls.shop.ip" is new`},
		{"new window", strings.Replace(reloadConfig("10"), "unit: minute, requests_per_unit: 10", "unit: hour, requests_per_unit: 10", 1), "shop.yaml:4"},
	} {
		writeReload(t, file, bad.body)
		_, err := reload()
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%s: reload error %v, want one naming %q", bad.name, err, bad.want)
		}
		if bad.name != "broken" && !errors.Is(err, rls.ErrNeedsRestart) {
			t.Errorf("%s: %v is not ErrNeedsRestart", bad.name, err)
		}
		if resp := h.call(t, client); resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() != 10 {
			t.Fatalf("%s: the config in use changed: %v", bad.name, resp)
		}
	}
	if got := h.call(t, req("shop", 0, desc("ip", "1.2.3.4"))).GetStatuses()[0].GetCurrentLimit(); got != nil {
		t.Fatalf("a refused reload half-applied: ip has limit %v", got)
	}
	if a, r := counter(t, h.reg, rls.MetricReloads, applied), counter(t, h.reg, rls.MetricReloads, refused); a != 2 || r != 3 {
		t.Errorf("reloads applied %v refused %v, want 2 and 3", a, r)
	}

	// Removed, then added back: its policy still runs, its count kept.
	writeReload(t, file, "domain: shop\ndescriptors:\n  - key: path\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	if c, err := reload(); err != nil || c.String() != "domains 1 → 1, descriptors 2 → 1; removed: shop.client_id" {
		t.Fatalf("removing: %v, %v", c, err)
	}
	if got := h.call(t, client).GetStatuses()[0].GetCurrentLimit(); got != nil {
		t.Fatalf("a removed descriptor still limited: %v", got)
	}
	writeReload(t, file, reloadConfig("10"))
	if _, err := reload(); err != nil {
		t.Fatal(err)
	}
	if got := h.call(t, client).GetStatuses()[0].GetLimitRemaining(); got != 2 {
		t.Fatalf("added back: %d left, want 2 (7 counted before)", got)
	}
}

// TestReloadRace: requests keep being answered, each by one config, while reloads swap it
// (run with -race).
func TestReloadRace(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shop.yaml")
	writeReload(t, file, reloadConfig("1000"))
	opt := rls.LoadOptions{DefaultBackend: limiter.BackendMemory}
	cfg, err := rls.Load(file, opt)
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp := h.call(t, req("shop", 0, desc("client_id", "c1"), desc("path", "/")))
				if n := resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(); n != 1000 && n != 2000 {
					t.Errorf("limit %d: neither config's", n)
					return
				}
			}
		})
	}
	for i := range 20 {
		writeReload(t, file, reloadConfig([]string{"2000", "1000"}[i%2]))
		if _, err := h.server.ReloadFile(file, opt); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

// TestReloadLimitHeaders: after a reload that changes a limit's number, and one that moves
// the limits (a block added before it, then removed again), LimitHeaders and slide's own
// RateLimit-Policy show the new config's limit, and a block added by the reload counts in
// slide_limiter_decisions_total: what hangs off a config's limits (header cache, decision
// metrics) is built for each config the Server swaps in, not kept from the first.
func TestReloadLimitHeaders(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shop.yaml")
	writeReload(t, file, reloadConfig("5"))
	opt := rls.LoadOptions{DefaultBackend: limiter.BackendMemory}
	cfg, err := rls.Load(file, opt)
	if err != nil {
		t.Fatal(err)
	}
	names := rls.DefaultLimitHeaderNames
	h := start(t, setup{cfg: cfg, limitHdr: &names})
	check := func(what string, r *pb.RateLimitRequest, want [3]string, policy string) {
		t.Helper()
		resp := h.call(t, r)
		if got, n := limitHeaders(resp.GetResponseHeadersToAdd(), names); got != want || n != 3 {
			t.Errorf("%s: limit, remaining, reset %q (%d headers), want %q", what, got, n, want)
		}
		if got := header(resp, "ratelimit-policy"); got != policy {
			t.Errorf("%s: RateLimit-Policy %q, want %q", what, got, policy)
		}
	}
	reload := func(body string) {
		t.Helper()
		writeReload(t, file, body)
		if _, err := h.server.ReloadFile(file, opt); err != nil {
			t.Fatal(err)
		}
	}
	client := req("shop", 0, desc("client_id", "c1"))
	// t0 is a quarter second into the hour: the minute resets in 60 s, rounded up.
	check("at 5", client, [3]string{"5", "4", "60"}, `"rls.shop.client_id";q=5;w=60`)
	check("at 5", client, [3]string{"5", "3", "60"}, `"rls.shop.client_id";q=5;w=60`)

	// 5 → 3, with a block added first: client_id moves from limit 0 to limit 1.
	reload("domain: shop\ndescriptors:\n  - key: ip\n    rate_limit: {unit: minute, requests_per_unit: 0}\n" +
		strings.TrimPrefix(reloadConfig("3"), "domain: shop\ndescriptors:\n"))
	check("5 → 3", client, [3]string{"3", "0", "60"}, `"rls.shop.client_id";q=3;w=60`)
	check("block added", req("shop", 0, desc("ip", "1.2.3.4")), [3]string{"0", "0", "60"}, `"rls.shop.ip";q=0;w=60`)
	if got := decisions(t, h.reg, "rls.shop.ip", limiter.ResultDenied); got != 1 {
		t.Errorf("the block added by the reload: %v denials counted, want 1", got)
	}

	// 3 → 10, the block removed: client_id is limit 0 again, path limit 1.
	reload(reloadConfig("10"))
	check("3 → 10", client, [3]string{"10", "6", "60"}, `"rls.shop.client_id";q=10;w=60`)
	check("path", req("shop", 0, desc("path", "/")), [3]string{"1", "0", "60"}, `"rls.shop.path";q=1;w=60`)
}
