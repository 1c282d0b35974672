package sketch

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// Bins are invertible bucket counts keyed by an Indexer's bin index. The
// window ring keeps one Bins per non-empty slot and one window aggregate,
// maintained with the sliding-sum trick: aggregate.AddBins(newSlot) when a
// slot enters the window, aggregate.SubBins(leavingSlot) when it leaves. A
// 5-minute p95 is then one Quantile scan of the aggregate, not a merge of 30
// sketches.
//
// The zero value is empty and ready to use. Bins are not safe for concurrent
// use; the caller owns locking. Every call on one Bins must pass the same
// Indexer (Bins do not store it, to stay pointer-free and small).
//
// Values <= ix.MinIndexableValue() in magnitude (including 0) go to a zero
// count; negative values go to a mirrored range allocated on first use.
// Counts are dense over the index range in use, 1, 2, 4 or 8 bytes wide
// (promoted on overflow), with no per-bin pointers; see Bytes.
//
// Cost: Add is O(1) and allocation-free once the range covers the value.
// AddBins and SubBins are O(bins of the argument). Quantile is O(bins in use).
// A Bins never spans more than MaxSpan bins; values beyond collapse into the
// edge bin (no real Indexer reaches this: DDSketch at 1% spans about 72k bins
// from the smallest to the largest float64).
type Bins struct {
	pos  counts
	neg  *counts // mirrored negative range, nil until the first negative value
	zero uint64  // values with |v| <= MinIndexableValue
}

// MaxSpan is the largest number of bins one side (positive or negative) of a
// Bins may span.
const MaxSpan = 1 << 23

// counts is a dense run of bin counts for indices [off, off+n), stored
// little-endian in data with 1<<shift bytes per count. All of data is in use
// (len == cap), so Bytes is exact and growth rounds up to the allocator's size
// classes for free.
type counts struct {
	data  []byte
	off   int    // bin index of data's first count
	sum   uint64 // total of all counts
	shift uint8  // log2 of the count width in bytes: 0..3
}

func (c *counts) n() int { return len(c.data) >> c.shift }

// get returns the count at position j (not index), which must be in range.
func (c *counts) get(j int) uint64 {
	switch c.shift {
	case 0:
		return uint64(c.data[j])
	case 1:
		return uint64(binary.LittleEndian.Uint16(c.data[j<<1:]))
	case 2:
		return uint64(binary.LittleEndian.Uint32(c.data[j<<2:]))
	default:
		return binary.LittleEndian.Uint64(c.data[j<<3:])
	}
}

// set stores x at position j; x must fit the current width.
func (c *counts) set(j int, x uint64) {
	switch c.shift {
	case 0:
		c.data[j] = uint8(x)
	case 1:
		binary.LittleEndian.PutUint16(c.data[j<<1:], uint16(x))
	case 2:
		binary.LittleEndian.PutUint32(c.data[j<<2:], uint32(x))
	default:
		binary.LittleEndian.PutUint64(c.data[j<<3:], x)
	}
}

// shiftFor returns the smallest width (as log2 bytes) that holds x.
func shiftFor(x uint64) uint8 {
	switch {
	case x <= math.MaxUint8:
		return 0
	case x <= math.MaxUint16:
		return 1
	case x <= math.MaxUint32:
		return 2
	}
	return 3
}

// alloc returns a zeroed byte slice of at least n bytes whose len is its
// capacity rounded up to the allocator's size class (the rounding is free).
func alloc(n int) []byte {
	b := append([]byte(nil), make([]byte, n)...)
	return b[:cap(b)]
}

// widen re-encodes the counts with 1<<shift bytes each.
func (c *counts) widen(shift uint8) {
	n := c.n()
	nc := counts{data: alloc(n << shift), off: c.off, sum: c.sum, shift: shift}
	// Capacity rounding may leave room for more bins; keep the range exact in
	// bins by trimming to a whole number of counts.
	nc.data = nc.data[:len(nc.data)>>shift<<shift]
	for j := 0; j < n; j++ {
		nc.set(j, c.get(j))
	}
	*c = nc
}

// cover grows the range so that index i is in it and returns i's position.
// Growth adds a quarter of the span (at least 8 bins) on the side that grew,
// so a slot filling up with new extremes reallocates O(log span) times.
func (c *counts) cover(i int) int {
	if c.data == nil {
		c.data = alloc(16 << c.shift)
		c.data = c.data[:len(c.data)>>c.shift<<c.shift]
		c.off = i - c.n()/2
		return i - c.off
	}
	n := c.n()
	lo, hi := c.off, c.off+n // half-open
	slack := max(n/4, 8)
	var nlo, nhi int
	if i < lo {
		nlo, nhi = i-slack, hi
	} else {
		nlo, nhi = lo, i+1+slack
	}
	if nhi-nlo > MaxSpan {
		// Collapse into the edge bin rather than allocate without bound.
		if i < lo {
			return 0
		}
		return n - 1
	}
	data := alloc((nhi - nlo) << c.shift)
	data = data[:len(data)>>c.shift<<c.shift]
	if i >= hi {
		// Spare capacity from size-class rounding goes to the growing side.
		nhi = nlo + len(data)>>c.shift
	} else {
		nlo = nhi - len(data)>>c.shift
	}
	copy(data[(lo-nlo)<<c.shift:], c.data)
	c.data, c.off = data, nlo
	return i - nlo
}

// add adds x to the count of bin index i.
func (c *counts) add(i int, x uint64) {
	j := i - c.off
	if uint(j) >= uint(c.n()) {
		j = c.cover(i)
	}
	// Fast paths per width while the sum fits (the ingest path).
	switch c.shift {
	case 0:
		if s := uint64(c.data[j]) + x; x <= math.MaxUint8 && s <= math.MaxUint8 {
			c.data[j] = uint8(s)
			c.sum += x
			return
		}
	case 1:
		p := c.data[2*j : 2*j+2]
		if s := uint64(binary.LittleEndian.Uint16(p)) + x; x <= math.MaxUint16 && s <= math.MaxUint16 {
			binary.LittleEndian.PutUint16(p, uint16(s))
			c.sum += x
			return
		}
	case 2:
		p := c.data[4*j : 4*j+4]
		if s := uint64(binary.LittleEndian.Uint32(p)) + x; x <= math.MaxUint32 && s <= math.MaxUint32 {
			binary.LittleEndian.PutUint32(p, uint32(s))
			c.sum += x
			return
		}
	}
	c.addSlow(j, x)
}

// addSlow adds x at position j, widening the counts or saturating at
// MaxUint64.
func (c *counts) addSlow(j int, x uint64) {
	s, carry := bits.Add64(c.get(j), x, 0)
	if carry != 0 {
		s = math.MaxUint64 // saturate: 2^64 events in one bin is not a real workload
		x = s - c.get(j)
	}
	if w := shiftFor(s); w > c.shift {
		c.widen(w)
	}
	c.set(j, s)
	c.sum += x
}

// sub removes up to x from bin index i and returns how much it removed.
func (c *counts) sub(i int, x uint64) uint64 {
	j := i - c.off
	if uint(j) >= uint(c.n()) {
		return 0
	}
	cur := c.get(j)
	if cur < x {
		x = cur
	}
	c.set(j, cur-x)
	c.sum -= x
	return x
}

// Add records n occurrences of v. NaN and ±Inf are ignored (callers reject
// them first, see CheckValue); n == 0 is a no-op. O(1), no allocation once the
// range covers v.
func (b *Bins) Add(ix Indexer, v float64, n uint64) {
	// The ingest path, in one call: the DDSketch indexer's table (cubicIndexer.Index) into
	// a bin in range. Everything else takes add.
	if c, ok := ix.(*cubicIndexer); ok && c.table && v > c.MinIndexableValue() && v <= math.MaxFloat64 && n != 0 {
		bits := math.Float64bits(v)
		if o := c.octaves[bits>>52].Load(); o != nil {
			if off := o.off[bits>>(52-cubicBits)&(1<<cubicBits-1)]; off != cubicFallback {
				c := &b.pos
				j := int(o.base) + int(off) - c.off
				// counts.add's in-range cases, inline: one-, two- and four-byte counts
				// that do not overflow.
				switch c.shift {
				case 0:
					if uint(j) < uint(len(c.data)) {
						if s := uint64(c.data[j]) + n; s <= math.MaxUint8 && n <= math.MaxUint8 {
							c.data[j] = uint8(s)
							c.sum += n
							return
						}
					}
				case 1:
					if uint(j) < uint(len(c.data)>>1) {
						p := c.data[2*j:]
						if s := uint64(binary.LittleEndian.Uint16(p)) + n; s <= math.MaxUint16 && n <= math.MaxUint16 {
							binary.LittleEndian.PutUint16(p, uint16(s))
							c.sum += n
							return
						}
					}
				case 2:
					if uint(j) < uint(len(c.data)>>2) {
						p := c.data[4*j:]
						if s := uint64(binary.LittleEndian.Uint32(p)) + n; s <= math.MaxUint32 && n <= math.MaxUint32 {
							binary.LittleEndian.PutUint32(p, uint32(s))
							c.sum += n
							return
						}
					}
				}
				c.add(int(o.base)+int(off), n)
				return
			}
		}
	}
	b.add(ix, v, n)
}

// add is Add off its fast path.
func (b *Bins) add(ix Indexer, v float64, n uint64) {
	if n == 0 {
		return
	}
	cubic, _ := ix.(*cubicIndexer)
	var minIdx float64
	if cubic != nil {
		minIdx = cubic.MinIndexableValue() // devirtualized: the default Indexer inlines
	} else {
		minIdx = ix.MinIndexableValue()
	}
	switch {
	case v > minIdx:
		if v > math.MaxFloat64 {
			return
		}
		if cubic != nil {
			b.pos.add(cubic.Index(v), n)
		} else {
			b.pos.add(ix.Index(v), n)
		}
	case v < -minIdx:
		if v < -math.MaxFloat64 {
			return
		}
		if b.neg == nil {
			b.neg = new(counts)
		}
		b.neg.add(ix.Index(-v), n)
	case v == v: // not NaN
		s, carry := bits.Add64(b.zero, n, 0)
		if carry != 0 {
			s = math.MaxUint64
		}
		b.zero = s
	}
}

func errValue(v float64) error {
	return fmt.Errorf("%w: %v", ErrValue, v)
}

// CheckValue returns an error wrapping ErrValue when Bins.Add would ignore v
// (NaN, ±Inf).
func CheckValue(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errValue(v)
	}
	return nil
}

// Remove removes n occurrences of v, the inverse of Add; batch time windows
// remove each row as it leaves. It clamps at zero and returns false when
// fewer than n occurrences of v's bin were present. It never allocates.
func (b *Bins) Remove(ix Indexer, v float64, n uint64) bool {
	if n == 0 {
		return true
	}
	minIdx := ix.MinIndexableValue()
	var got uint64
	switch {
	case v > minIdx:
		if v > math.MaxFloat64 {
			return true // Add ignored it too
		}
		got = b.pos.sub(ix.Index(v), n)
	case v < -minIdx:
		if v < -math.MaxFloat64 {
			return true
		}
		if b.neg != nil {
			got = b.neg.sub(ix.Index(-v), n)
		}
	case v == v:
		got = min(b.zero, n)
		b.zero -= got
	default:
		return true
	}
	return got == n
}

// Count returns the number of values recorded (the sum of all counts). O(1).
func (b *Bins) Count() uint64 {
	n := b.zero + b.pos.sum
	if b.neg != nil {
		n += b.neg.sum
	}
	return n
}

// Reset empties b and releases its memory (an empty slot holds no bins).
func (b *Bins) Reset() { *b = Bins{} }

// Clear empties b but keeps its count arrays, for a scratch Bins reused across reads. O(bins
// held).
func (b *Bins) Clear() {
	clear(b.pos.data)
	b.pos.sum = 0
	if b.neg != nil {
		clear(b.neg.data)
		b.neg.sum = 0
	}
	b.zero = 0
}

// Bytes returns the heap bytes b holds (its count arrays and the negative
// range header), not counting the Bins struct itself, which lives wherever
// the caller put it. See BinsSize.
func (b *Bins) Bytes() int {
	n := cap(b.pos.data)
	if b.neg != nil {
		n += int(unsafe.Sizeof(counts{})) + cap(b.neg.data)
	}
	return n
}

// BinsSize is the size of the Bins struct itself, for callers that account
// for memory per slot: a slot's cost is BinsSize plus Bytes.
const BinsSize = int(unsafe.Sizeof(Bins{}))

// Clone returns a deep copy of b, trimmed to the bins in use.
func (b *Bins) Clone() *Bins {
	c := &Bins{zero: b.zero}
	c.pos = b.pos.clone()
	if b.neg != nil && b.neg.sum > 0 {
		n := b.neg.clone()
		c.neg = &n
	}
	return c
}

func (c *counts) clone() counts {
	if c.sum == 0 {
		return counts{}
	}
	first, last := c.nonZeroRange()
	shift := uint8(0)
	for j := first; j <= last; j++ {
		shift = max(shift, shiftFor(c.get(j)))
	}
	n := counts{off: c.off + first, sum: c.sum, shift: shift}
	n.data = alloc((last - first + 1) << shift)
	n.data = n.data[:len(n.data)>>shift<<shift]
	for j := first; j <= last; j++ {
		n.set(j-first, c.get(j))
	}
	return n
}

// Compact trims b's storage to the bins in use at the narrowest width that
// holds its counts. The ring calls it when a slot stops receiving values; a
// compacted Bins costs exactly one byte per bin in its range for counts below
// 256. Compact allocates; it is a no-op when nothing would shrink.
func (b *Bins) Compact() {
	b.pos.compact()
	if b.neg != nil {
		if b.neg.sum == 0 {
			b.neg = nil
		} else {
			b.neg.compact()
		}
	}
}

func (c *counts) compact() {
	if c.sum == 0 {
		*c = counts{}
		return
	}
	n := c.clone()
	if len(n.data) < len(c.data) {
		*c = n
	}
}
