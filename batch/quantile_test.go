package batch

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/slide-metrics/slide/sketch"
)

// rankBins answers what sketch.Bins.Quantile answers, for every sketch family, over a sliding
// window of values of both signs, zeros, tiny and huge magnitudes and repeated values, for
// every quantile a job reads and the edges.
func TestRankBinsMatchesBins(t *testing.T) {
	kinds := []sketch.Kind{{}, {RelativeAccuracy: 0.05}, {Name: sketch.NameHDR}, {Name: sketch.NameNative, Schema: 3}}
	draws := []func(r *rand.Rand) float64{
		func(r *rand.Rand) float64 { return float64(r.IntN(100_000)+1) / 100 }, // cents
		func(r *rand.Rand) float64 { return r.NormFloat64() * 1e3 },            // both signs
		func(r *rand.Rand) float64 { // zeros, tiny, huge, negative
			switch r.IntN(6) {
			case 0:
				return 0
			case 1:
				return 1e-30 * r.Float64()
			case 2:
				return -math.Exp(r.Float64() * 60)
			case 3:
				return math.Exp(r.Float64() * 60)
			}
			return float64(r.IntN(5))
		},
	}
	for _, kind := range kinds {
		ix, err := kind.Indexer()
		if err != nil {
			t.Fatal(err)
		}
		for d, draw := range draws {
			r := rand.New(rand.NewPCG(uint64(d), 9))
			rb := newRankBins(ix)
			var bins sketch.Bins
			var window []float64
			for step := 0; step < 1500; step++ {
				v := draw(r)
				window = append(window, v)
				bins.Add(ix, v, 1)
				rb.add(rb.key(v), 1)
				// Windows grow and shrink: leave 0–2 values per step, about as many as come.
				for n := r.IntN(3); n > 0 && len(window) > 1; n-- {
					old := window[0]
					window = window[1:]
					bins.Remove(ix, old, 1)
					rb.add(rb.key(old), -1)
				}
				for _, q := range []float64{0, 0.01, 0.5, 0.95, 0.99, 1} {
					want, got := bins.Quantile(ix, q), rb.quantile(q)
					if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
						t.Fatalf("%+v draw %d step %d q %v (%d values): rankBins %v, Bins %v", kind, d, step, q, len(window), got, want)
					}
				}
			}
		}
	}
}
