package rls_test

import (
	"context"
	"testing"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/rls"
)

// decisions is slide_limiter_decisions_total{policy,result}.
func decisions(t *testing.T, reg *prometheus.Registry, policy, result string) float64 {
	t.Helper()
	return counter(t, reg, "slide_limiter_decisions_total", map[string]string{"policy": policy, "result": result})
}

// TestDecisionsCountEveryAnswer: the answers the Server decides without the
// limiter Service (a requests_per_unit 0 block, an unlimited descriptor, a cost
// above the quota, a limit override) count in slide_limiter_decisions_total
// under their policy names, as the Service's own decisions do: an alert on
// denials sees them.
func TestDecisionsCountEveryAnswer(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	for range 2 {
		h.call(t, req("shop", 0, desc("banned", "yes")))
	}
	h.call(t, req("shop", 0, desc("health", "x")))
	h.call(t, req("shop", 21, desc("client_id", "big"))) // 21 of 20 a minute: over without charging
	h.call(t, req("shop", 0, desc("client_id", "small")))
	for range 2 {
		h.call(t, overridden("shop", 1, typev3.RateLimitUnit_MINUTE, 0, "client_id", "o"))
	}
	for _, c := range []struct {
		policy, result string
		want           float64
	}{
		{"rls.shop.banned_yes", "denied", 2},
		{"rls.shop.health", "allowed", 1},
		{"rls.shop.client_id", "denied", 1},
		{"rls.shop.client_id", "allowed", 1}, // the Service's, in the same series
		{"rls-override.minute", "allowed", 1},
		{"rls-override.minute", "denied", 1},
	} {
		if got := decisions(t, h.reg, c.policy, c.result); got != c.want {
			t.Errorf("slide_limiter_decisions_total{policy=%q,result=%q} = %v, want %v", c.policy, c.result, got, c.want)
		}
	}
}

// TestDecisionsWithoutService: a config of blocks and exemptions alone has no
// limiter Service (slide serve builds none); its answers still count.
func TestDecisionsWithoutService(t *testing.T) {
	cfg, err := rls.Parse([]byte(`domain: d
descriptors:
  - key: bot
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: bot
    value: friendly
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: health
    rate_limit: {unlimited: true}
`), "blocks.yaml", rls.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := rls.NewServer(rls.ServerConfig{Config: cfg, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][]string{{"bot", "b1"}, {"bot", "friendly"}, {"health", "h"}} {
		if _, err := srv.ShouldRateLimit(context.Background(), req("d", 0, r)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ policy, result string }{
		{"rls.d.bot", "denied"}, {"rls.d.bot_friendly", "shadow_denied"}, {"rls.d.health", "allowed"},
	} {
		if got := decisions(t, reg, c.policy, c.result); got != 1 {
			t.Errorf("slide_limiter_decisions_total{policy=%q,result=%q} = %v, want 1", c.policy, c.result, got)
		}
	}
}

// TestFailureCountersStartAtZero: the reloads and errors an alert watches are exported at 0
// for every result and reason from the start, so increase() sees the first refused reload
// (a SIGHUP with a bad file) or the first failed call: a series that appears at 1 has no
// earlier sample to rise from.
func TestFailureCountersStartAtZero(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				have[mf.GetName()+","+l.GetName()+"="+l.GetValue()] = true
			}
		}
	}
	for _, id := range []string{
		rls.MetricReloads + ",result=applied", rls.MetricReloads + ",result=refused",
		rls.MetricErrors + ",reason=unauthenticated", rls.MetricErrors + ",reason=invalid_request",
		rls.MetricErrors + ",reason=unavailable", rls.MetricErrors + ",reason=canceled", rls.MetricErrors + ",reason=internal",
	} {
		if !have[id] {
			t.Errorf("%s is not exported at start", id)
		}
	}
}
