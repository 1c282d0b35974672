package batch

import (
	"bufio"
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
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

// A count window's rings grow from countRing0 rows to K as a group's rows come; every window
// value must be the one a ring allocated at K from the start gives, across every doubling and
// the full boundary: the quantile's key ring, the fixed-point sum (row by row, with the switch
// to the float sum, and consume's filling and hot loops with and without a series).
func TestCountRingsGrowSameAsFull(t *testing.T) {
	same := func(a, b float64) bool { return a == b || a != a && b != b }
	for _, k := range []int{1, 2, 7, 8, 9, 16, 17, 100, 1000} {
		r := rand.New(rand.NewPCG(uint64(k), 3))
		n := 3*k + 50
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64(r.IntN(100_000)-20_000) / 100
			if r.IntN(10) == 0 {
				vals[i] = float64(r.IntN(4)) // ties and zeros
			}
		}
		// The quantile: its MaxWindow and MinWindow grow alike in both (window's tests).
		grow, _ := Job{Size: k, Agg: "p95"}.aggregator()
		full, _ := Job{Size: k, Agg: "p95"}.aggregator()
		full.(*countQuantile).keys = make([]int32, k)
		got, want := make([]float64, n), make([]float64, n)
		grow.feed(vals, nil, got, nil, nil)
		full.feed(vals, nil, want, nil, nil)
		for i := range want {
			if !same(got[i], want[i]) {
				t.Fatalf("k %d: p95 of the window ending at %d: growing ring %v, full-size %v", k, i, got[i], want[i])
			}
		}
		// The row-by-row fixed-point sum, which goes on in float64 from a value with more decimals.
		fx := newFixedSpec([]byte("1.00"), k)
		mixed := slices.Clone(vals)
		mixed[2*k+7] = 0.125
		for _, avg := range []bool{false, true} {
			g, f := newGenFixedSum(&fx, k, avg), newGenFixedSum(&fx, k, avg)
			f.fs.ring = make([]int64, k)
			for i, v := range mixed {
				g.feed(mixed[i:i+1], nil, got[i:i+1], nil, nil)
				f.feed(mixed[i:i+1], nil, want[i:i+1], nil, nil)
				if !same(got[i], want[i]) {
					t.Fatalf("k %d avg %v: sum of the window ending at %d (%v): growing ring %v, full-size %v", k, avg, i, v, got[i], want[i])
				}
			}
		}
		// Run's fixed-point sum, fed in chunks of random length, with and without a series.
		ivals := make([]int64, n)
		for i, v := range vals {
			ivals[i], _ = fx.toFixed(v)
		}
		for _, withSeries := range []bool{false, true} {
			var gout, fout bytes.Buffer
			var gs, fs *bufio.Writer
			if withSeries {
				gs, fs = bufio.NewWriter(&gout), bufio.NewWriter(&fout)
			}
			g, f := newFixedSum(&fx, k, true, false), newFixedSum(&fx, k, true, false)
			f.ring = make([]int64, k)
			var num []byte
			for row := 0; row < n; {
				m := min(n-row, 1+r.IntN(k+3))
				if err := g.consume(ivals[row:row+m], int64(row), gs, &num); err != nil {
					t.Fatal(err)
				}
				if err := f.consume(ivals[row:row+m], int64(row), fs, &num); err != nil {
					t.Fatal(err)
				}
				row += m
				if g.s != f.s || g.best != f.best || g.end != f.end || g.n != f.n {
					t.Fatalf("k %d series %v after %d rows: growing sum %d best %d end %d, full-size %d %d %d", k, withSeries, row, g.s, g.best, g.end, f.s, f.best, f.end)
				}
			}
			if withSeries {
				gs.Flush()
				fs.Flush()
				if !bytes.Equal(gout.Bytes(), fout.Bytes()) {
					t.Fatalf("k %d: the series of a growing ring differs from a full-size one's", k)
				}
			}
			gw, _ := g.sumWindow()
			fw, _ := f.sumWindow()
			if gw.Sum() != fw.Sum() || gw.Len() != fw.Len() || gw.Size() != k {
				t.Fatalf("k %d: sumWindow growing %v (%d), full-size %v (%d)", k, gw.Sum(), gw.Len(), fw.Sum(), fw.Len())
			}
		}
	}
}
