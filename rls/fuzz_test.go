package rls_test

import (
	"os"
	"testing"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// FuzzParse: no input makes the config loader panic, and whatever it accepts
// builds a limiter service (valid, uniquely named policies).
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/config/shop.yaml", "testdata/config/edge.yaml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(redisConfig))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: 'a*b*c'\n    share_threshold: true\n    rate_limit: {unit: day, requests_per_unit: 0}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true}, descriptors: [{key: x, rules: [{metric: m, agg: p99, window: 10s, max: 1}]}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := rls.Parse(data, "fuzz.yaml", rls.LoadOptions{})
		if err != nil {
			return
		}
		ps := cfg.Policies()
		if len(ps) == 0 {
			return
		}
		if _, err := limiter.NewService(limiter.Config{Policies: ps}); err != nil {
			t.Fatalf("accepted a config the limiter refuses: %v\n%s", err, data)
		}
	})
}
