package query

import (
	"math"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// TestPointStatsEqualsAppendStats: a /v1/range point writes its members exactly as
// /v1/window does.
func TestPointStatsEqualsAppendStats(t *testing.T) {
	qs := []float64{0, 0.5, 0.95, 0.999, 1}
	for _, a := range []window.Agg{{}, {From: 0, To: 10_000, Count: 3, Sum: 1.5, Min: 0.1, Max: 1, Quantiles: []float64{0.1, 0.4, 0.9, 1, 1}}, {Count: 1, Sum: math.Pi, Min: math.Pi, Max: math.Pi, Quantiles: []float64{1, 2, 3, 4, 5}}} {
		var keys [][]byte
		for _, q := range qs {
			keys = append(keys, append(append([]byte{'"'}, formatQuantile(nil, q)...), `":`...))
		}
		if x, y := string(appendPointStats(nil, a, 5000, qs, keys)), string(appendStats(nil, a, 5000, qs)); x != y {
			t.Errorf("%s\n%s", x, y)
		}
	}
}
