package sketch

import (
	"runtime"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch"
)

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryBudget checks the memory goal with the runtime's own accounting:
// for series with 30 full slots of 1,000 lognormal latencies, the ring's
// Bins (one per slot, filled by Add as ingest does, plus the window
// aggregate) take at most a quarter of the bytes of 30 default sketches-go
// sketches holding the same data. It also checks that Bytes() accounts for
// what the heap holds.
func TestMemoryBudget(t *testing.T) {
	const series = 2000
	ix := mustIndexer(t, Kind{})
	data := lognormalSlots(99, benchSlots, benchPerSlot)

	// Containers are allocated before each baseline so that only the
	// sketches themselves are measured.
	ours := make([][]*Bins, series)
	aggs := make([]*Bins, series)
	for i := range ours {
		ours[i] = make([]*Bins, benchSlots)
	}
	before := liveHeap()
	var accounted int
	for i := range ours {
		agg := new(Bins)
		for s, vals := range data {
			b := new(Bins)
			for _, v := range vals {
				b.Add(ix, v, 1)
			}
			ours[i][s] = b
			agg.AddBins(b)
			accounted += BinsSize + b.Bytes()
		}
		aggs[i] = agg
		accounted += BinsSize + agg.Bytes()
	}
	oursBytes := float64(liveHeap() - before)
	runtime.KeepAlive(ours)
	runtime.KeepAlive(aggs)

	anchor := make([][]*ddsketch.DDSketch, series)
	for i := range anchor {
		anchor[i] = make([]*ddsketch.DDSketch, benchSlots)
	}
	before = liveHeap()
	for i := range anchor {
		for s, vals := range data {
			dd, err := ddsketch.NewDefaultDDSketch(0.01)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				if err := dd.Add(v); err != nil {
					t.Fatal(err)
				}
			}
			anchor[i][s] = dd
		}
	}
	anchorBytes := float64(liveHeap() - before)
	runtime.KeepAlive(anchor)

	// The alternative design: Two-Stacks over the same slot sketches, just
	// after a flip (29 suffix merges in the front stack). Only its own
	// structures are counted; the slot sketches are shared with the anchor.
	before = liveHeap()
	stacks := make([]*twoStacks, series)
	for i := range stacks {
		stacks[i] = newTwoStacks(anchor[i])
		stacks[i].pop()
	}
	stacksBytes := float64(liveHeap() - before)
	runtime.KeepAlive(stacks)
	t.Logf("Two-Stacks over the sketches-go slots adds %.0f B per series on top of the slots (%.1fx ours in total)",
		stacksBytes/series, (stacksBytes+anchorBytes)/oursBytes)
	if stacksBytes+anchorBytes < 4*oursBytes {
		t.Errorf("Two-Stacks total %.0f B is less than 4x ours %.0f B: revisit the package doc's choice", stacksBytes+anchorBytes, oursBytes)
	}

	ratio := oursBytes / anchorBytes
	t.Logf("per series (30 slots x %d values): ours %.0f B (30 slot Bins + aggregate), sketches-go %.0f B (30 default sketches); ratio %.3f",
		benchPerSlot, oursBytes/series, anchorBytes/series, ratio)
	t.Logf("per slot: ours %.0f B, sketches-go %.0f B; Bytes()+BinsSize accounts %.0f B per series",
		(oursBytes/series-float64(BinsSize+aggs[0].Bytes()))/benchSlots, anchorBytes/series/benchSlots, float64(accounted)/series)
	if ratio > 0.25 {
		t.Errorf("memory ratio %.3f > 0.25", ratio)
	}
	// Bytes must be an honest account of the heap (within 10%).
	if r := float64(accounted) / oursBytes; r < 0.9 || r > 1.1 {
		t.Errorf("Bytes()+BinsSize accounts %d bytes, heap grew %.0f (ratio %.3f)", accounted, oursBytes, r)
	}
}
