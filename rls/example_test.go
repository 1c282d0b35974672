package rls_test

import (
	"fmt"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// ExampleParse shows how descriptors of envoyproxy/ratelimit's format map to
// slide's policies: one per rate_limit, named after the domain and the
// descriptor's full key, fixed_window over the unit unless the file says
// otherwise.
func ExampleParse() {
	cfg, err := rls.Parse([]byte(`
domain: shop
descriptors:
  - key: client_id
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: tenant
    value: acme
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 5, algorithm: sliding_log}
  - key: path
    value: /api/*
    rate_limit: {window: 90s, requests_per_unit: 10, algorithm: token_bucket}
  - key: health
    rate_limit: {unlimited: true}
`), "shop.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range cfg.Policies() {
		fmt.Printf("%-31s %-13s quota %d per %v on %s\n", p.Name, p.Algorithm, p.Quota(), p.QuotaWindow(), p.Backend)
	}
	// Output:
	// rls.shop.client_id              fixed_window  quota 20 per 1m0s on redis
	// rls.shop.tenant_acme.path       sliding_log   quota 5 per 1s on redis
	// rls.shop.path_-api---d3ea3f53   token_bucket  quota 10 per 1m30s on redis
}
