package rls_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// startPlanned serves client_id at 5 a minute, c-small on a plan of 2 and c-big on one
// of 10 (slide serve --rls-config with --plans).
func startPlanned(t *testing.T, limitHdr *rls.LimitHeaderNames) *harness {
	t.Helper()
	file := filepath.Join(t.TempDir(), "shop.yaml")
	writeReload(t, file, "domain: shop\ndescriptors:\n  - key: client_id\n    rate_limit: {unit: minute, requests_per_unit: 5}\n")
	cfg, err := rls.Load(file, rls.LoadOptions{DefaultBackend: limiter.BackendMemory})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg, limitHdr: limitHdr})
	ps, err := limiter.ParsePlans([]byte(`plans:
  small: {rls.shop.client_id: {limit: 2}}
  big: {rls.shop.client_id: {limit: 10}}
keys:
  c-small: small
  c-big: big
`), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.SetPlans(ps); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestPlanCostOverLimit: a hits_addend above the limit a key's plan gives it is
// OVER_LIMIT charging nothing, as one above requests_per_unit is (and as
// envoyproxy/ratelimit answers), and one the plan holds is decided by the plan even
// above requests_per_unit. Before, the Server compared the cost with requests_per_unit
// alone: a plan of 2 answered hits_addend 3 with InvalidArgument ("cost 3, policy …
// allows at most 2"), and a plan of 10 answered hits_addend 7 OVER_LIMIT.
func TestPlanCostOverLimit(t *testing.T) {
	h := startPlanned(t, nil)
	for _, tc := range []struct {
		key   string
		hits  uint32
		want  pb.RateLimitResponse_Code
		limit uint32 // current_limit and RateLimit-Policy's q
	}{
		{"c-small", 3, pb.RateLimitResponse_OVER_LIMIT, 2}, // under requests_per_unit, over the plan
		{"c-small", 6, pb.RateLimitResponse_OVER_LIMIT, 2}, // over both
		{"c-small", 2, pb.RateLimitResponse_OK, 2},         // nothing charged before: the plan's 2 fit
		{"c-big", 7, pb.RateLimitResponse_OK, 10},          // over requests_per_unit, under the plan
		{"c-big", 4, pb.RateLimitResponse_OVER_LIMIT, 10},  // 7 + 4 > 10
		{"c-big", 3, pb.RateLimitResponse_OK, 10},
		{"c-big", 11, pb.RateLimitResponse_OVER_LIMIT, 10},
		{"c-other", 6, pb.RateLimitResponse_OVER_LIMIT, 5}, // no plan: requests_per_unit
	} {
		resp, err := h.client.ShouldRateLimit(context.Background(), req("shop", tc.hits, desc("client_id", tc.key)))
		if err != nil {
			t.Errorf("%s hits_addend %d: %v, want %v", tc.key, tc.hits, err, tc.want)
			continue
		}
		if got := resp.GetOverallCode(); got != tc.want {
			t.Errorf("%s hits_addend %d: %v, want %v", tc.key, tc.hits, got, tc.want)
		}
		q := fmt.Sprintf(`"rls.shop.client_id";q=%d;w=60`, tc.limit)
		if got := resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(); got != tc.limit || header(resp, "ratelimit-policy") != q {
			t.Errorf("%s hits_addend %d: current_limit %d, RateLimit-Policy %q; want %d, %q", tc.key, tc.hits, got, header(resp, "ratelimit-policy"), tc.limit, q)
		}
	}
}

// TestPlanCurrentLimit: a key on a plan is told the limit it is held to, in current_limit
// as in limit_remaining, RateLimit-Policy and the LimitHeaders, so a client pacing itself
// by them meets no contradiction. Before, current_limit and RateLimit-Limit said the
// file's requests_per_unit (5) while limit_remaining and RateLimit-Policy followed the
// plan: "limit 5, remaining 1" after one request of a plan of 2.
func TestPlanCurrentLimit(t *testing.T) {
	names := rls.DefaultLimitHeaderNames
	h := startPlanned(t, &names)
	for _, tc := range []struct {
		key             string
		limit, remain   uint32
		policy, headers string
	}{
		{"c-small", 2, 1, `"rls.shop.client_id";q=2;w=60`, `["2" "1" "60"]`},
		{"c-small", 2, 0, `"rls.shop.client_id";q=2;w=60`, `["2" "0" "60"]`},
		{"c-small", 2, 0, `"rls.shop.client_id";q=2;w=60`, `["2" "0" "60"]`}, // over the plan's limit
		{"c-big", 10, 9, `"rls.shop.client_id";q=10;w=60`, `["10" "9" "60"]`},
		{"c-other", 5, 4, `"rls.shop.client_id";q=5;w=60`, `["5" "4" "60"]`},
		{"c-big", 10, 8, `"rls.shop.client_id";q=10;w=60`, `["10" "8" "60"]`}, // the limit's last planned current_limit is not another key's
	} {
		resp := h.call(t, req("shop", 1, desc("client_id", tc.key)))
		st := resp.GetStatuses()[0]
		cl := st.GetCurrentLimit()
		if cl.GetRequestsPerUnit() != tc.limit || cl.GetUnit().String() != "MINUTE" || st.GetLimitRemaining() != tc.remain {
			t.Errorf("%s: current_limit %v, limit_remaining %d; want %d a MINUTE, %d remaining", tc.key, cl, st.GetLimitRemaining(), tc.limit, tc.remain)
		}
		if got := header(resp, "ratelimit-policy"); got != tc.policy {
			t.Errorf("%s: RateLimit-Policy %q, want %q", tc.key, got, tc.policy)
		}
		if got, _ := limitHeaders(resp.GetResponseHeadersToAdd(), names); fmtQ(got) != tc.headers {
			t.Errorf("%s: RateLimit-Limit, -Remaining, -Reset %s, want %s", tc.key, fmtQ(got), tc.headers)
		}
	}
}

func fmtQ(v [3]string) string { return `["` + v[0] + `" "` + v[1] + `" "` + v[2] + `"]` }
