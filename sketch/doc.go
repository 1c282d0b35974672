// Package sketch holds slide's quantile sketches: Bins, the invertible bucket
// counts the window ring keeps per slot, keyed by an Indexer (Kind.Indexer):
// DDSketch's mapping (DataDog/sketches-go, 1% relative accuracy by default),
// HdrHistogram's counts indices (HdrHistogram/hdrhistogram-go), or Prometheus
// native-histogram buckets.
//
// The exported surface is the seam the engine uses: Kind (parse, validate,
// Indexer), Indexer, Bins and their binary encoding (snapshots, cluster
// partials). An earlier layer that wrapped the libraries' own sketch types
// (a Sketch interface, DDSketch, HDR, Decode, Bins.ToSketch) was removed in
// round 2: no product code called it. The libraries stay as the oracles of
// the tests (TestBinsQuantileMatchesDDSketch, TestHDRIndexerMatchesHdrHistogram).
//
// # Which type to use
//
// The window ring keeps one Bins per non-empty slot and one Bins aggregate for
// the whole retention, all keyed by one Indexer (Kind.Indexer). Ingest calls
// slot.Add; when the ring advances it calls aggregate.AddBins(newSlot) and
// aggregate.SubBins(leavingSlot); a 5-minute p95 is aggregate.Quantile.
// Shorter windows use Quantile/QuantilesOf over their slots. A slot the ring has
// moved past is packed (Slot); a range read's one-slot point asks Slot.Quantiles,
// which reads the packed counts straight from their encoding, and a read that calls
// Value many times takes ReadIndexer(ix), the same values without recomputing the
// cubic mapping's relative accuracy in each.
//
// # The choice: invertible bins, not Two-Stacks or DABA
//
// A 5-minute p95 must not merge 30 slot sketches per query. Two designs
// avoid it:
//
//   - Invertible bins (chosen). Bucket counts can be subtracted, so the
//     window aggregate is a sliding sum: add the slot that enters, subtract
//     the slot that leaves. sketches-go's stores hold float64 counts and
//     refuse negative ones (ddsketch.ErrNegativeCount), so Bins are our own
//     store; the bin boundaries are the library's mapping.IndexMapping, and
//     the accuracy guarantee lives in the mapping, not the store. Bins answer
//     bit-for-bit what sketches-go answers for the same mapping and data
//     (TestBinsQuantileMatchesDDSketch).
//   - Two-Stacks (or DABA) over sketches-go slot sketches: merges only, no
//     subtraction; amortized one merge per slide, but a query still merges
//     two sketches, and the front stack keeps up to 30 suffix-merged sketches
//     besides the 30 slot sketches.
//
// Cost model, for a slot of s bins and a window aggregate of w bins (about
// 350 and 430 for 1,000 lognormal latencies per slot): Add is O(1); a slot
// boundary is O(s) (SubBins + AddBins: two linear passes over byte arrays);
// a quantile read is O(w), scanning 8 one-byte (or 4 two-byte) counts per
// step; memory is one byte per bin in a slot's range while counts stay
// below 256. Two-Stacks pays O(w) per slide plus a flip of 30 copies and
// merges every 30 slides, and allocates two sketches' worth per query.
//
// Measured on the CI machine (2 cores, shared; go test -bench
// 'WindowP95|Add|Slide' -benchmem -count 5 ./sketch/; medians):
//
//	5-minute p95 read       ours  ~300 ns, 0 allocs   anchor (merge 30 default sketches) ~29 µs, 22 allocs  ~95x
//	slide + p95 read        ours ~1.2 µs, 0 allocs   Two-Stacks over sketches-go        ~6.6 µs, 15 allocs   ~5x
//	Add (ingest)            ours  ~15 ns, 0 allocs   sketches-go default sketch Add      ~43 ns              ~0.35x
//
// Memory (TestMemoryBudget: runtime.MemStats deltas over 2,000 series of 30
// slots x 1,000 lognormal latencies):
//
//	ours: 30 slot Bins + 1 aggregate   16,352 B per series (505 B per slot incl. the 64-byte struct)
//	30 default sketches-go sketches    97,701 B per series (3,257 B per slot)          ratio 0.167
//	Two-Stacks after a flip            +111,264 B per series on top of those sketches  12.8x ours
//
// So the invertible bins win on every axis the ring cares about; their cost
// is code we own (a store, fuzzed and tested against the library) and the
// rule that a leaving slot must be subtracted exactly once.
//
// # Accuracy
//
// DDSketch kinds use sketches-go's CubicallyInterpolatedMapping: no math.Log
// on the hot path, and every value's bin representative within the relative
// accuracy (TestIndexerAccuracy checks it over e^-700..e^700 and at every bin
// edge). Their Index is a table lookup: per octave (float exponent), 1,024
// buckets of the mantissa's top bits, each holding the one index all its
// values get, or marked when it holds a bin boundary, whose values take the
// mapping's formula (about 5% at 1%). The index is bit-identical to the
// mapping's for every float64 (TestCubicIndexMatchesMapping sweeps every
// bucket edge of every octave, the mapping's bin boundaries and the special
// values; FuzzCubicIndex), so snapshots, packed slots and the oracle tests see
// the same bins; an octave's 1 KiB table is built on its first value, and
// accuracies finer than about 0.14% keep the formula alone. Quantile returns the representative of the bin holding the sample of
// rank floor(q*(n-1)), so p50/p95/p99 are within 1% of the exact quantile of
// the raw samples; counts are integers, so subtraction never drifts.
// TestWindowAccuracy checks both over 90 slides of a 30-slot ring on
// lognormal, Pareto, bimodal and constant data.
//
// HDR kinds index Bins with HdrHistogram's own counts indices at SigFigs
// (TestHDRIndexerMatchesHdrHistogram), so Bins export to an HDR histogram
// without loss. Values are truncated to integers, as HdrHistogram records
// int64s, and a bin reports its highest equivalent value, as HdrHistogram
// does: relative error at most 1/2^(ceil(log2(2*10^SigFigs))-1) (0.78% at 2
// significant figures) for integer data with Lowest = 1.
//
// Native kinds ("native:SCHEMA", schema 1..8, default 5) index Bins with
// Prometheus native-histogram buckets: bucket i holds (base^(i-1), base^i]
// with base = 2^(2^-schema), found as client_golang finds it (math.Frexp and
// a search of the octave's bounds), with client_golang's zero threshold 2^-128
// (TestNativeBinsAreClientGolangBuckets checks bucket for bucket against a
// client_golang histogram). It is the DDSketch logarithmic mapping with gamma
// = base, so a bin's representative 2·base^i/(1+base) is within
// (base-1)/(base+1) of every value in it: 1.08% at schema 5, about what the
// default DDSketch gives. A window of such bins exports as a native histogram
// with no re-bucketing (query's --export-histograms).
//
// A sketch's p100 is a bin representative, not the exact maximum. Callers
// that track exact min and max beside the sketch (the window ring does)
// clamp quantiles into [min, max]; this package does not.
//
// # Memory
//
// Bins hold dense counts over the index range in use, 1 byte each, promoted
// to 2, 4 or 8 bytes when a count overflows, with no per-bin pointers; the
// negative range is allocated only for negative values. Growth adds a
// quarter of the span on the side that grew, and SubBins compacts an
// aggregate once its bins in use span less than half its storage. Compact
// trims a slot that stops receiving values (333 B instead of 449 B of counts
// on average for the slots above). Reset, or a SubBins that empties the aggregate, releases
// everything. Bytes reports the heap bytes held, exactly (TestMemoryBudget).
//
// A slot that no longer receives values can be packed (Slot.Pack): its counts Rice-coded
// against a running prediction, about 3 bits per bin, ~100 bytes for a slot of 1,000
// lognormal latencies at 1% against ~280 for its compacted Bins (TestSlotPackedSize). A
// packed Slot adds into and subtracts from an aggregate exactly as its Bins did, for every
// kind (TestSlotPackRoundTrip), at a few nanoseconds per bin.
//
// # Concurrency
//
// Nothing here locks: Bins values are owned by one goroutine at a
// time (the window store's shard locks). Indexers are immutable and shared.
package sketch
