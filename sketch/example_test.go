package sketch_test

import (
	"fmt"

	"github.com/slide-metrics/slide/sketch"
)

// A window ring keeps one Bins per slot and one aggregate: when the window
// slides, the slot that enters is added and the one that leaves subtracted,
// so the window p95 is one read, not a merge of every slot.
func ExampleBins() {
	ix, err := sketch.Kind{}.Indexer() // DDSketch mapping, 1% relative accuracy
	if err != nil {
		panic(err)
	}
	const slots = 3
	ring := make([]*sketch.Bins, slots)
	var window sketch.Bins
	for step, latencies := range [][]float64{
		{10, 12, 11},
		{250, 11, 13},
		{12, 14, 900},
		{30, 31, 32}, // the first slot (10, 12, 11) leaves
	} {
		i := step % slots
		if ring[i] != nil {
			window.SubBins(ring[i])
		}
		ring[i] = new(sketch.Bins)
		for _, ms := range latencies {
			ring[i].Add(ix, ms, 1)
		}
		window.AddBins(ring[i])
		fmt.Printf("step %d: n=%d p50=%.1f p95=%.1f\n", step, window.Count(),
			window.Quantile(ix, 0.5), window.Quantile(ix, 0.95))
	}
	// Quantiles use DDSketch's rank q*(n-1): the p95 of 9 values is the 8th
	// smallest, reported within 1% (250 ms -> 248.8).
	// Output:
	// step 0: n=3 p50=11.1 p95=11.1
	// step 1: n=6 p50=11.1 p95=13.0
	// step 2: n=9 p50=12.0 p95=248.8
	// step 3: n=9 p50=29.9 p95=248.8
}

func ExampleParseKind() {
	for _, s := range []string{"ddsketch", "ddsketch:0.02", "hdr", "hdr:3:1:60000", "tdigest"} {
		k, err := sketch.ParseKind(s)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(k)
	}
	// Output:
	// ddsketch:0.01
	// ddsketch:0.02
	// hdr:2:1:3600000
	// hdr:3:1:60000
	// error: sketch: invalid kind: parsing "tdigest": unknown sketch family "tdigest"
}

func ExampleBins_MarshalBinary() {
	ix, _ := sketch.Kind{}.Indexer()
	var b sketch.Bins
	for _, v := range []float64{0, 5, 5, 7, -3} {
		b.Add(ix, v, 1)
	}
	p, _ := b.MarshalBinary()
	var back sketch.Bins
	if err := back.UnmarshalBinary(p); err != nil {
		panic(err)
	}
	fmt.Println(len(p), "bytes;", back.Count(), "values; median", back.Quantile(ix, 0.5))
	// Output:
	// 26 bytes; 5 values; median 5.022376194977832
}

func ExampleQuantile() {
	ix, _ := sketch.Kind{}.Indexer()
	// A one-minute window over the last 6 slots of a ring that keeps 30:
	// scan their union instead of keeping a second aggregate.
	slots := make([]*sketch.Bins, 6)
	for i := range slots {
		slots[i] = new(sketch.Bins)
		for v := 1; v <= 100; v++ {
			slots[i].Add(ix, float64(v), 1)
		}
	}
	fmt.Printf("p95 of 600 values: %.1f (exact: 95)\n", sketch.Quantile(ix, 0.95, slots...))
	// Output:
	// p95 of 600 values: 94.1 (exact: 95)
}
