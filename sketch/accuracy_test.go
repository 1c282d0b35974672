package sketch

import (
	"math"
	"slices"
	"testing"
)

// TestWindowAccuracy simulates the window ring: 30 slots of varying size, an
// aggregate kept by adding the slot that enters and subtracting the one that
// leaves, over many slides. At every slide the aggregate's p50/p95/p99 must
// be within the kind's relative accuracy of the exact quantiles of the raw
// samples in the window, and the aggregate must equal one rebuilt from
// scratch (no drift from the subtractions).
func TestWindowAccuracy(t *testing.T) {
	const (
		slots  = 30
		slides = 90
	)
	kinds := []struct {
		kind  Kind
		scale float64 // ms -> unit of the kind
		floor bool    // HDR records integers
	}{
		{Kind{}, 1, false},
		{Kind{Name: NameHDR, SigFigs: 2, Lowest: 1, Highest: 3_600_000_000}, 1000, true}, // microseconds
		{Kind{Name: NameHDR, SigFigs: 3}, 1, true},                                       // milliseconds
	}
	qs := []float64{0.5, 0.95, 0.99}
	for _, kc := range kinds {
		for _, d := range dists {
			t.Run(kc.kind.String()+"/"+d.name, func(t *testing.T) {
				ix := mustIndexer(t, kc.kind)
				acc := ix.RelativeAccuracy()
				if kc.kind.normalized().Name == NameDDSketch && acc > 0.01+1e-12 {
					t.Fatalf("default DDSketch accuracy %v > 1%%", acc)
				}
				r := newRand(uint64(len(d.name)) * 31)
				ring := make([]*Bins, slots)
				raw := make([][]float64, slots)
				var agg Bins
				worst := map[float64]float64{}
				for step := 0; step < slots+slides; step++ {
					pos := step % slots
					if ring[pos] != nil {
						if !agg.SubBins(ring[pos]) {
							t.Fatalf("step %d: leaving slot was not contained in the aggregate", step)
						}
					}
					// The slot that enters: 50..400 samples, sometimes empty.
					n := 50 + r.IntN(350)
					if r.IntN(15) == 0 {
						n = 0
					}
					b := new(Bins)
					raw[pos] = raw[pos][:0]
					for i := 0; i < n; i++ {
						v := d.gen(r) * kc.scale
						if kc.floor {
							v = math.Floor(v)
						}
						b.Add(ix, v, 1)
						raw[pos] = append(raw[pos], v)
					}
					ring[pos] = b
					agg.AddBins(b)
					if step < slots-1 {
						continue
					}

					var window []float64
					var rebuilt Bins
					for i := range raw {
						window = append(window, raw[i]...)
						rebuilt.AddBins(ring[i])
					}
					slices.Sort(window)
					if agg.Count() != uint64(len(window)) {
						t.Fatalf("step %d: aggregate count %d, window has %d samples", step, agg.Count(), len(window))
					}
					got := agg.Quantiles(ix, qs, nil)
					for i, q := range qs {
						if rq := rebuilt.Quantile(ix, q); rq != got[i] {
							t.Fatalf("step %d: aggregate p%v = %v, rebuilt %v", step, q*100, got[i], rq)
						}
						if u := Quantile(ix, q, ring...); u != got[i] {
							t.Fatalf("step %d: aggregate p%v = %v, union scan %v", step, q*100, got[i], u)
						}
						want := exactAtRank(window, q)
						e := relErr(got[i], want)
						worst[q] = max(worst[q], e)
						if e > acc*(1+1e-9) {
							t.Fatalf("step %d: p%v = %v, exact %v, relative error %.4f%% > %.4f%%",
								step, q*100, got[i], want, 100*e, 100*acc)
						}
					}
				}
				t.Logf("worst relative error: p50 %.3f%% p95 %.3f%% p99 %.3f%% (bound %.3f%%)",
					100*worst[0.5], 100*worst[0.95], 100*worst[0.99], 100*acc)
			})
		}
	}
}

// TestRemoveMatchesRebuild slides a count window of raw values with Add and
// Remove (the batch path) and checks it against a fresh Bins per window.
func TestRemoveMatchesRebuild(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	r := newRand(12)
	xs := make([]float64, 3000)
	for i := range xs {
		xs[i] = dists[i%len(dists)].gen(r)
	}
	const k = 500
	var w Bins
	for i, x := range xs {
		w.Add(ix, x, 1)
		if i >= k {
			if !w.Remove(ix, xs[i-k], 1) {
				t.Fatalf("step %d: Remove of a value in the window clamped", i)
			}
		}
		if i >= k-1 && i%97 == 0 {
			var fresh Bins
			for _, y := range xs[i-k+1 : i+1] {
				fresh.Add(ix, y, 1)
			}
			for _, q := range []float64{0, 0.5, 0.95, 0.99, 1} {
				if a, b := w.Quantile(ix, q), fresh.Quantile(ix, q); a != b {
					t.Fatalf("step %d: sliding p%v = %v, fresh %v", i, q*100, a, b)
				}
			}
		}
	}
}
