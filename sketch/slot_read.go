package sketch

import (
	"math"
	"math/bits"
	"sort"
	"sync"

	"github.com/DataDog/sketches-go/ddsketch/mapping"
)

// Reading quantiles straight out of a packed Slot, for range reads (issue #15): a one-slot
// point of a range read asks p50/p95/p99 of a slot the ring has moved past, and decoding
// its counts into a Bins (clearing it, covering the range, adding run by run) only to scan
// them once cost more than the scan.

// slotStack is how many counts of a side Slot.Quantiles decodes on the stack (4 KiB, a
// multiple of riceBatch); wider packed sides go through pooled scratch Bins.
const slotStack = 8 * riceBatch

// slotScratch holds the Bins Slot.Quantiles decodes the packed forms it does not read
// directly into.
var slotScratch = sync.Pool{New: func() any { return new(Bins) }}

// Quantiles appends to dst the value at each quantile of qs (NaN for an invalid q or an
// empty s) and returns the extended slice: exactly what s.View(scratch).Quantiles(ix, qs,
// dst) answers. A packed s without negative counts is read from its encoding: the counts
// of its positive side are decoded once into a buffer on the stack and scanned, with no
// Bins filled or cleared. O(bins), no allocation.
func (s Slot) Quantiles(ix Indexer, qs, dst []float64) []float64 {
	if s.p == nil {
		for range qs {
			dst = append(dst, math.NaN()) // as Bins.Quantiles of empty Bins
		}
		return dst
	}
	if b := s.Bins(); b != nil {
		return b.Quantiles(ix, qs, dst)
	}
	d := packedReader{b: s.packed()}
	zero := d.uvarint()
	if d.uvarint() != 0 {
		return s.quantilesScratch(ix, qs, dst) // negative values: rare for latencies
	}
	n := int(d.uvarint())
	if n > slotStack {
		return s.quantilesScratch(ix, qs, dst)
	}
	var stack [slotStack]uint64
	var off int
	var sum, carry uint64
	if n > 0 {
		rs, o := d.side(n)
		off = o
		for i := 0; rs.left > 0; {
			m := rs.next((*[riceBatch]uint64)(stack[i : i+riceBatch]))
			for _, x := range stack[i : i+m] {
				var c uint64
				sum, c = bits.Add64(sum, x, 0)
				carry |= c
			}
			i += m
		}
	}
	count, c := bits.Add64(zero, sum, 0)
	if carry|c != 0 {
		// Counts near 2^64: Bins saturate where this sum would wrap, so answer as they do.
		return s.quantilesScratch(ix, qs, dst)
	}
	xs := stack[:n]
	if count == 0 {
		for range qs {
			dst = append(dst, math.NaN())
		}
		return dst
	}
	// The same float operations and the same scan as Bins.Quantiles (one pass for sorted
	// qs) and Bins.Quantile (from the start for each q), on a side whose first count sits at
	// index off and whose last, at off+n-1, is the last non-zero one.
	sorted := len(qs) >= 2 && sort.Float64sAreSorted(qs)
	var negCount float64 // no negative side
	j := 0
	var cum uint64
	for _, q := range qs {
		if !(q >= 0 && q <= 1) {
			dst = append(dst, math.NaN())
			continue
		}
		rank := float64(q * float64(count-1))
		if rank < float64(zero)+negCount {
			dst = append(dst, 0)
			continue
		}
		if !sorted {
			j, cum = 0, 0
		}
		target := RankTarget(rank - float64(zero) - negCount)
		for ; j < len(xs); j++ {
			if cum+xs[j] > target {
				break
			}
			cum += xs[j]
		}
		if j >= len(xs) {
			dst = append(dst, ix.Value(off+len(xs)-1)) // rounding: the last bin holding anything
			j, cum = 0, 0
			continue
		}
		dst = append(dst, ix.Value(off+j))
	}
	return dst
}

// quantilesScratch is Quantiles through pooled scratch Bins.
func (s Slot) quantilesScratch(ix Indexer, qs, dst []float64) []float64 {
	b := slotScratch.Get().(*Bins)
	dst = s.View(b).Quantiles(ix, qs, dst)
	b.Clear()
	slotScratch.Put(b)
	return dst
}

// ReadIndexer returns ix for a read that calls Value many times, such as a range read's
// quantiles of every slot: for sketches-go's cubic mapping, whose Value(i) is
// LowerBound(i) * (1 + RelativeAccuracy()) and recomputes the relative accuracy (an exp
// and a log, most of Value's cost) on every call, an Indexer with that factor computed
// once by the same float operations, so every value is bit for bit ix.Value's; any other
// ix as it is. Use it for reading only: Bins.Add takes its fast path for the cubic mapping
// itself.
func ReadIndexer(ix Indexer) Indexer {
	c, ok := ix.(*mapping.CubicallyInterpolatedMapping)
	if !ok {
		return ix
	}
	return &cubicReader{CubicallyInterpolatedMapping: c, f: 1 + c.RelativeAccuracy()}
}

// cubicReader is the cubic mapping with Value's factor computed once.
type cubicReader struct {
	*mapping.CubicallyInterpolatedMapping
	f float64
}

func (c *cubicReader) Value(index int) float64 { return c.LowerBound(index) * c.f }
