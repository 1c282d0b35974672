package query_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/query"
)

const allowPolicies = `policies:
  - name: per-tenant
    algorithm: fixed_window
    limit: 1000
    window: 1m
rules:
  - {name: tenant-quota, metric: cost, agg: sum, window: 1h, max: 1000}
  - {name: shed-slow, metric: latency_ms, agg: p95, window: 1m, max: 800, key: "*"}
`

// allowEnv serves the query API with the limiter's allow handler over the same store and
// clock, built from allowPolicies the way slide serve builds it; mods adjust the config
// after that.
func allowEnv(t testing.TB, mods ...func(*query.Config)) *env {
	t.Helper()
	var e *env
	e = newEnv(t, func(c *query.Config) {
		policies, rules, err := usage.ParseFile([]byte(allowPolicies), "policies.yaml")
		if err != nil {
			t.Fatal(err)
		}
		checkers, err := usage.NewCheckers(c.Store, rules)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := limiter.NewService(limiter.Config{Policies: policies, Checkers: checkers, Clock: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		c.Allow = limithttp.AllowHandler(svc)
		for _, mod := range mods {
			mod(c)
		}
	})
	return e
}

type allowAnswer struct {
	Allowed      bool   `json:"allowed"`
	Policy       string `json:"policy"`
	RetryAfterMs int64  `json:"retry_after_ms"`
}

func (e *env) allow(body string) (int, allowAnswer, http.Header) {
	e.t.Helper()
	code, b, h := e.do("POST", "/v1/allow", []byte(body))
	var a allowAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		e.t.Fatalf("POST /v1/allow %s = %d %s", body, code, b)
	}
	return code, a, h
}

// TestUsageQuotaThroughHTTP: cost events arrive through POST /v1/events, one of 100 a
// minute; POST /v1/allow checks the rate policy and the hourly quota together. The request
// after the 11th event (sum 1100 > 1000) is the first denied, by tenant-quota, with a
// Retry-After until the first minute leaves the hour; it is allowed again exactly then.
func TestUsageQuotaThroughHTTP(t *testing.T) {
	e := allowEnv(t)
	req := `{"policies":["per-tenant","tenant-quota"],"key":"tenant-42"}`
	for i := range 11 {
		e.clock.set(t0 + int64(i)*60_000 + 5_000)
		e.post([]byte(fmt.Sprintf(`{"key":"tenant-42","metric":"cost","value":100}` + "\n")))
		code, a, h := e.allow(req)
		if i < 10 {
			if code != 200 || !a.Allowed {
				t.Fatalf("after event %d (sum %d): %d %+v", i+1, 100*(i+1), code, a)
			}
			continue
		}
		// 10 min 5 s after t0; the minute of t0 leaves the hour at t0 + 1h.
		wantRetry := int64(60*60_000 - (10*60_000 + 5_000))
		if code != 429 || a.Allowed || a.Policy != "tenant-quota" || a.RetryAfterMs != wantRetry || h.Get("Retry-After") != fmt.Sprint(wantRetry/1000) {
			t.Fatalf("after event 11: %d %+v Retry-After %q; want 429 by tenant-quota, retry %d ms", code, a, h.Get("Retry-After"), wantRetry)
		}
	}
	e.clock.set(t0 + 60*60_000 - 1)
	if code, a, _ := e.allow(req); code != 429 || a.RetryAfterMs != 1 {
		t.Fatalf("1 ms before the slot leaves: %d %+v", code, a)
	}
	e.clock.set(t0 + 60*60_000)
	if code, a, _ := e.allow(req); code != 200 || !a.Allowed {
		t.Fatalf("once the first minute left the hour: %d %+v", code, a)
	}
	// Another tenant was never over its quota.
	if code, _, _ := e.allow(`{"policies":["per-tenant","tenant-quota"],"key":"tenant-7"}`); code != 200 {
		t.Fatalf("tenant-7: %d", code)
	}
}

// TestShedRuleThroughHTTP: a global p95 rule sheds every key while slow traffic is in the
// window, and lets requests through when the slow slot leaves.
func TestShedRuleThroughHTTP(t *testing.T) {
	e := allowEnv(t)
	req := `{"policy":"shed-slow","key":"tenant-1"}`
	e.clock.set(t0 + 5_000)
	e.post([]byte(`{"key":"tenant-1","metric":"latency_ms","value":120,"count":50}` + "\n"))
	if code, _, _ := e.allow(req); code != 200 {
		t.Fatalf("fast traffic: %d", code)
	}
	e.clock.set(t0 + 25_000)
	e.post([]byte(`{"key":"tenant-2","metric":"latency_ms","value":950,"count":10}` + "\n"))
	// p95 of {120 × 50, 950 × 10}: rank 56 is 950 > 800. The oldest slot with data (t0's)
	// leaves the 1-minute window at t0 + 60 s.
	code, a, _ := e.allow(req)
	if code != 429 || a.Policy != "shed-slow" || a.RetryAfterMs != 35_000 {
		t.Fatalf("slow burst: %d %+v, want 429 by shed-slow retrying in 35 s", code, a)
	}
	e.clock.set(t0 + 60_000) // t0's slot left; the slow one (t0+20 s) is alone: still shedding
	if code, a, _ := e.allow(req); code != 429 || a.RetryAfterMs != 20_000 {
		t.Fatalf("at t0+60s: %d %+v, want 429 retrying when the slow slot leaves at t0+80s", code, a)
	}
	e.clock.set(t0 + 80_000)
	if code, _, _ := e.allow(req); code != 200 {
		t.Fatalf("after the slow slot left: %d", code)
	}
}
