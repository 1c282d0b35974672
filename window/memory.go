package window

// Bytes per series, for sizing StoreConfig.MaxSeries from a memory budget (issue #19), and
// what StoreConfig.MaxBytes weighs each series by (TieredSeriesBytes of its ring). Heap
// after GC, key, index entry and series header included, DDSketch at 1%:
//
//   - a sparse series (at most RawEvents events in its retention) keeps them raw: about
//     0.4–0.45 KB with 1–3 events, 0.75 KB with 10 (TestSparseSeriesMemoryBudget);
//   - a busy series keeps its slots, the one being filled open and the others packed
//     (sketch.Slot), and the window aggregate: 6.1 KB with 30 full slots of 1,000
//     latencies (TestDenseSeriesMemoryBudget), 0.097× what 30 sketches-go sketches take.
//
// DenseSeriesBytes is the busy figure as a rule for any ring: 1,200 bytes of header, index
// entry and aggregate, plus 170 per slot (the slot and its packed bins). It gives 6,300
// bytes for the default 30 slots, a little over the measurement, so a cap derived from it
// holds even when every series is busy. Slots holding far more than 1,000 values, or a
// finer sketch, cost more bits per bin.
func DenseSeriesBytes(slots int) int { return 1200 + 170*slots }

// TieredSeriesBytes is DenseSeriesBytes for a ring of config c with its tiers, every slot
// full (issue #29): the ring's slots at 170 bytes (48 without a sketch), and 32 bytes per
// tier slot plus 150 for its packed bins when c has a sketch, plus 200 for the tiers' header.
func TieredSeriesBytes(c RingConfig) int {
	d := c.withDefaults()
	n := DenseSeriesBytes(d.Slots)
	if d.NoSketch {
		n = 1200 + 48*(d.Slots+int(d.aheadSlots()))
	}
	if len(d.Tiers) > 0 {
		n += 200
	}
	for _, t := range d.Tiers {
		per := 32
		if !d.NoSketch {
			per += 150
		}
		n += per * t.Slots
	}
	return n
}
