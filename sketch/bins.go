// This file is over 600 lines: the invertible bins (add, subtract, merge, quantile, encode)
// are one data structure whose methods share its layout invariants.

package sketch

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"unsafe"

	"github.com/DataDog/sketches-go/ddsketch/mapping"
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

// addCounts adds o's counts into c.
func (c *counts) addCounts(o *counts) {
	if o.sum == 0 {
		return
	}
	first, last := o.nonZeroRange()
	lo, hi := o.off+first, o.off+last
	c.add(lo, 0) // cover both ends before the loop so it does not reallocate
	c.add(hi, 0)
	if lo < c.off || hi >= c.off+c.n() {
		// Beyond MaxSpan: add bin by bin, collapsing into the edges.
		for j := first; j <= last; j++ {
			if x := o.get(j); x > 0 {
				c.add(o.off+j, x)
			}
		}
		return
	}
	from := lo
	if o.shift == 0 {
		// Fast paths for one-byte source counts (a slot's usual width), one
		// loop per destination width; an overflow hands over to the slow
		// path, which widens.
		src := o.data[first : last+1]
		base := lo - c.off
		var done int
		var added uint64
		switch c.shift {
		case 0:
			done, added = addRun8(c.data[base:base+len(src)], src)
		case 1:
			done, added = addRun16(c.data[base<<1:(base+len(src))<<1], src)
		case 2:
			done, added = addRun32(c.data[base<<2:(base+len(src))<<2], src)
		}
		c.sum += added
		from += done
	}
	if from <= hi {
		c.sum += addCountsSlow(c, o, from, hi)
	}
}

// addRun8 adds src into dst (both one byte per count) until a sum would
// overflow; it returns how many counts it added and their total.
func addRun8(dst, src []byte) (int, uint64) {
	dst = dst[:len(src)]
	var added uint64
	for j, x := range src {
		s := uint16(dst[j]) + uint16(x)
		if s > math.MaxUint8 {
			return j, added
		}
		dst[j] = uint8(s)
		added += uint64(x)
	}
	return len(src), added
}

// addRun16 is addRun8 into two-byte counts.
func addRun16(dst, src []byte) (int, uint64) {
	dst = dst[:2*len(src)]
	var added uint64
	for j, x := range src {
		if x == 0 {
			continue
		}
		p := dst[2*j : 2*j+2]
		s := uint32(binary.LittleEndian.Uint16(p)) + uint32(x)
		if s > math.MaxUint16 {
			return j, added
		}
		binary.LittleEndian.PutUint16(p, uint16(s))
		added += uint64(x)
	}
	return len(src), added
}

// addRun32 is addRun8 into four-byte counts.
func addRun32(dst, src []byte) (int, uint64) {
	dst = dst[:4*len(src)]
	var added uint64
	for j, x := range src {
		if x == 0 {
			continue
		}
		p := dst[4*j : 4*j+4]
		s := uint64(binary.LittleEndian.Uint32(p)) + uint64(x)
		if s > math.MaxUint32 {
			return j, added
		}
		binary.LittleEndian.PutUint32(p, uint32(s))
		added += uint64(x)
	}
	return len(src), added
}

// addCountsSlow adds o's counts for indices [from, to] into c, widening as
// needed, and returns the total added. c must already cover [from, to].
func addCountsSlow(c, o *counts, from, to int) uint64 {
	var added uint64
	for i := from; i <= to; i++ {
		x := o.get(i - o.off)
		if x == 0 {
			continue
		}
		j := i - c.off
		s, carry := bits.Add64(c.get(j), x, 0)
		if carry != 0 {
			s = math.MaxUint64
			x = s - c.get(j)
		}
		if w := shiftFor(s); w > c.shift {
			c.widen(w)
		}
		c.set(j, s)
		added += x
	}
	return added
}

// subCounts removes o's counts from c, clamping at zero. It returns whether
// every count of o was present in c.
func (c *counts) subCounts(o *counts) bool {
	if o.sum == 0 {
		return true
	}
	first, last := o.nonZeroRange()
	lo, hi := o.off+first, o.off+last
	if o.shift == 0 && c.shift <= 1 && lo >= c.off && hi < c.off+c.n() {
		// Fast paths for a one-byte slot leaving a one- or two-byte aggregate.
		src := o.data[first : last+1]
		base := lo - c.off
		var removed uint64
		ok := true
		if c.shift == 0 {
			dst := c.data[base : base+len(src)]
			for j, x := range src {
				d := dst[j]
				if d < x {
					x, ok = d, false
				}
				dst[j] = d - x
				removed += uint64(x)
			}
		} else {
			dst := c.data[base<<1 : (base+len(src))<<1]
			for j, x := range src {
				if x == 0 {
					continue
				}
				p := dst[2*j : 2*j+2]
				d := binary.LittleEndian.Uint16(p)
				y := uint16(x)
				if d < y {
					y, ok = d, false
				}
				binary.LittleEndian.PutUint16(p, d-y)
				removed += uint64(y)
			}
		}
		c.sum -= removed
		return ok
	}
	ok := true
	for j := first; j <= last; j++ {
		x := o.get(j)
		if x == 0 {
			continue
		}
		if got := c.sub(o.off+j, x); got != x {
			ok = false
		}
	}
	return ok
}

// nonZeroRange returns the first and last positions holding a non-zero
// count; c.sum must be > 0. It skips zero bytes a word at a time: a count's
// bytes are all zero exactly when the count is.
func (c *counts) nonZeroRange() (first, last int) {
	d := c.data
	i := 0
	for i+8 <= len(d) && binary.LittleEndian.Uint64(d[i:]) == 0 {
		i += 8
	}
	for i < len(d) && d[i] == 0 {
		i++
	}
	k := len(d) - 1
	for k-7 > i && binary.LittleEndian.Uint64(d[k-7:]) == 0 {
		k -= 8
	}
	for k > i && d[k] == 0 {
		k--
	}
	return i >> c.shift, k >> c.shift
}

// keyAtRank returns the bin index of the first bin whose cumulative count
// exceeds rank, as sketches-go's stores do (DenseStore.KeyAtRank). c.sum must
// be > 0.
func (c *counts) keyAtRank(rank float64) int {
	j, _ := c.scan(0, 0, rankTarget(rank))
	if j >= c.n() {
		_, j = c.nonZeroRange() // rounding: the last bin holding anything
	}
	return c.off + j
}

// rankTarget converts a rank to the integer a cumulative count must exceed:
// cum > rank <=> cum > floor(rank) for an integer cum. Negative ranks count
// as 0 (as in sketches-go) and ranks beyond uint64 saturate, since the
// float-to-integer conversion is undefined there.
func rankTarget(rank float64) uint64 {
	switch {
	case !(rank > 0):
		return 0
	case rank >= 1<<64:
		return math.MaxUint64
	}
	return uint64(rank)
}

// scan moves from position j, where cum is the total of the counts before j,
// to the first position whose inclusive cumulative count exceeds target. It
// returns that position (c.n() if none) and the total before it.
func (c *counts) scan(j int, cum, target uint64) (int, uint64) {
	d := c.data
	switch c.shift {
	case 0:
		// The 5-minute read is this loop: skip 8 one-byte counts at a time,
		// summed as 4 lanes of 16 bits (SWAR), while the target lies beyond.
		for ; j+8 <= len(d); j += 8 {
			x := binary.LittleEndian.Uint64(d[j:])
			y := x&0x00ff00ff00ff00ff + x>>8&0x00ff00ff00ff00ff
			s := y * 0x0001000100010001 >> 48
			if cum+s > target {
				break
			}
			cum += s
		}
		for ; j < len(d); j++ {
			if cum+uint64(d[j]) > target {
				return j, cum
			}
			cum += uint64(d[j])
		}
	case 1:
		// 4 two-byte counts at a time, as 2 lanes of 32 bits.
		for ; 2*j+8 <= len(d); j += 4 {
			x := binary.LittleEndian.Uint64(d[2*j:])
			y := x&0x0000ffff0000ffff + x>>16&0x0000ffff0000ffff
			s := y&0xffffffff + y>>32
			if cum+s > target {
				break
			}
			cum += s
		}
		for ; 2*j+2 <= len(d); j++ {
			x := uint64(binary.LittleEndian.Uint16(d[2*j:]))
			if cum+x > target {
				return j, cum
			}
			cum += x
		}
	default:
		for n := c.n(); j < n; j++ {
			x := c.get(j)
			if cum+x > target {
				return j, cum
			}
			cum += x
		}
	}
	return c.n(), cum
}

// Add records n occurrences of v. NaN and ±Inf are ignored (callers reject
// them first, see CheckValue); n == 0 is a no-op. O(1), no allocation once the
// range covers v.
func (b *Bins) Add(ix Indexer, v float64, n uint64) {
	if n == 0 {
		return
	}
	cubic, _ := ix.(*mapping.CubicallyInterpolatedMapping)
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

// AddBins adds o's counts to b. o is not modified. b and o must use the same
// Indexer.
func (b *Bins) AddBins(o *Bins) {
	if o == nil || o == b && b.Count() == 0 {
		return
	}
	if o == b {
		o = b.Clone()
	}
	b.pos.addCounts(&o.pos)
	if o.neg != nil && o.neg.sum > 0 {
		if b.neg == nil {
			b.neg = new(counts)
		}
		b.neg.addCounts(o.neg)
	}
	s, carry := bits.Add64(b.zero, o.zero, 0)
	if carry != 0 {
		s = math.MaxUint64
	}
	b.zero = s
}

// SubBins subtracts o's counts from b, the inverse of AddBins, and reports
// whether o was contained in b. o's counts must be contained in b (o was
// added earlier and not removed since). If they are not, SubBins clamps each
// bin at zero and returns false; b then no longer equals the sum of its parts
// and the caller should rebuild it. When b becomes empty its memory is
// released, as by Reset; when the bins in use span less than half its
// storage, b is compacted. O(bins of o), amortized.
func (b *Bins) SubBins(o *Bins) bool {
	if o == nil {
		return true
	}
	if o == b {
		b.Reset()
		return true
	}
	ok := b.pos.subCounts(&o.pos)
	if o.neg != nil && o.neg.sum > 0 {
		if b.neg == nil {
			ok = false
		} else {
			ok = b.neg.subCounts(o.neg) && ok
		}
	}
	if b.zero < o.zero {
		b.zero, ok = 0, false
	} else {
		b.zero -= o.zero
	}
	if b.Count() == 0 {
		b.Reset()
		return ok
	}
	b.pos.shrink()
	if b.neg != nil {
		if b.neg.sum == 0 {
			b.neg = nil
		} else {
			b.neg.shrink()
		}
	}
	return ok
}

// shrink compacts c once the bins in use span less than half of its storage,
// so that a long-lived aggregate does not keep the widest range it ever saw.
// Compacting only after the range halves keeps the cost amortized O(1) per
// subtracted bin.
func (c *counts) shrink() {
	n := c.n()
	if n <= 64 {
		return
	}
	if c.sum == 0 {
		*c = counts{}
		return
	}
	first, last := c.nonZeroRange()
	if 2*(last-first+1) < n {
		c.compact()
	}
}

// Count returns the number of values recorded (the sum of all counts). O(1).
func (b *Bins) Count() uint64 {
	n := b.zero + b.pos.sum
	if b.neg != nil {
		n += b.neg.sum
	}
	return n
}

// Quantile returns the value at quantile q in [0, 1] with DDSketch rank
// semantics: rank = q*(count-1), the answer is the representative value
// ix.Value of the first bin whose cumulative count exceeds rank (identical to
// sketches-go's GetValueAtQuantile for the same mapping). It returns NaN when
// b is empty or q is outside [0, 1]. The result is within
// ix.RelativeAccuracy of an exact quantile of the recorded values; callers
// that track the exact min and max clamp the result into [min, max]
// (a sketch's p100 is a bin's value, not the exact max). O(bins in use), no
// allocation.
func (b *Bins) Quantile(ix Indexer, q float64) float64 {
	count := b.Count()
	if count == 0 || !(q >= 0 && q <= 1) {
		return math.NaN()
	}
	rank := float64(q * float64(count-1)) // explicit conversion: no FMA, as sketches-go
	var negCount float64
	if b.neg != nil {
		negCount = float64(b.neg.sum)
	}
	switch {
	case rank < negCount:
		return -ix.Value(b.neg.keyAtRank(negCount - 1 - rank))
	case rank < float64(b.zero)+negCount:
		return 0
	}
	return ix.Value(b.pos.keyAtRank(rank - float64(b.zero) - negCount))
}

// Quantiles appends to dst the value at each quantile of qs (NaN for an
// invalid q or an empty b) and returns the extended slice. When qs is sorted
// ascending, positive-range quantiles are answered in a single scan. It
// allocates only if dst lacks capacity.
func (b *Bins) Quantiles(ix Indexer, qs []float64, dst []float64) []float64 {
	count := b.Count()
	if count == 0 || len(qs) < 2 || !sort.Float64sAreSorted(qs) {
		for _, q := range qs {
			dst = append(dst, b.Quantile(ix, q))
		}
		return dst
	}
	var negCount float64
	if b.neg != nil {
		negCount = float64(b.neg.sum)
	}
	below := negCount + float64(b.zero)
	c := &b.pos
	j, n := 0, c.n()
	var cum uint64
	for _, q := range qs {
		if !(q >= 0 && q <= 1) {
			dst = append(dst, math.NaN())
			continue
		}
		rank := float64(q * float64(count-1))
		if rank < below {
			dst = append(dst, b.Quantile(ix, q))
			continue
		}
		// Ranks are non-decreasing: continue the scan where the previous
		// quantile stopped.
		// Same float operations as Quantile, so both agree at any magnitude.
		j, cum = c.scan(j, cum, rankTarget(rank-float64(b.zero)-negCount))
		if j >= n {
			_, last := c.nonZeroRange()
			dst = append(dst, ix.Value(c.off+last))
			j, cum = 0, 0
			continue
		}
		dst = append(dst, ix.Value(c.off+j))
	}
	return dst
}

// Quantile returns the value at quantile q of the union of bins (nil entries
// are skipped), with the semantics of Bins.Quantile, without allocating or
// modifying them. It sums the bins chunk by chunk into a buffer on the stack
// and scans the sums: O(total bins of the arguments). Use it for windows
// shorter than the retention, where no aggregate is kept; for several
// quantiles use QuantilesOf, which makes one pass.
func Quantile(ix Indexer, q float64, bins ...*Bins) float64 {
	var one [1]float64
	return QuantilesOf(ix, []float64{q}, one[:0], bins...)[0]
}

// QuantilesOf appends to dst the value at each quantile of qs for the union
// of bins (nil entries skipped), as Quantile does, and returns the extended
// slice. When qs is sorted ascending, the positive range is summed and
// scanned once for all of them. It allocates only if dst lacks capacity.
func QuantilesOf(ix Indexer, qs []float64, dst []float64, bins ...*Bins) []float64 {
	var count, zero, negCount uint64
	for _, b := range bins {
		if b == nil {
			continue
		}
		count += b.Count()
		zero += b.zero
		if b.neg != nil {
			negCount += b.neg.sum
		}
	}
	sorted := sort.Float64sAreSorted(qs)
	u := unionScan{bins: bins}
	for _, q := range qs {
		if count == 0 || !(q >= 0 && q <= 1) {
			dst = append(dst, math.NaN())
			continue
		}
		rank := float64(q * float64(count-1))
		switch {
		case rank < float64(negCount):
			n := unionScan{bins: bins, negative: true}
			dst = append(dst, -ix.Value(n.keyAtRank(float64(negCount)-1-rank)))
			continue
		case rank < float64(zero+negCount):
			dst = append(dst, 0)
			continue
		}
		if !sorted {
			u = unionScan{bins: bins} // restart: ranks may go backwards
		}
		dst = append(dst, ix.Value(u.keyAtRank(rank-float64(zero)-float64(negCount))))
	}
	return dst
}

// unionChunk is how many bin indices unionScan sums at a time (8 KiB of
// stack).
const unionChunk = 1024

// unionScan finds ranks in the union of one side of several Bins. Successive
// keyAtRank calls with non-decreasing ranks continue where the last stopped.
type unionScan struct {
	bins     []*Bins
	negative bool
	started  bool
	lo, hi   int    // union index range
	start    int    // first index of the current chunk
	j        int    // position in the current chunk
	cum      uint64 // total of the counts before start+j
	last     int    // last index seen holding a count
	acc      [unionChunk]uint64
}

func (u *unionScan) side(b *Bins) *counts {
	if b == nil {
		return nil
	}
	if u.negative {
		return b.neg
	}
	return &b.pos
}

// keyAtRank is counts.keyAtRank over the union.
func (u *unionScan) keyAtRank(rank float64) int {
	if !u.started {
		u.started = true
		u.lo, u.hi = math.MaxInt, math.MinInt
		for _, b := range u.bins {
			if c := u.side(b); c != nil && c.sum > 0 {
				first, last := c.nonZeroRange()
				u.lo = min(u.lo, c.off+first)
				u.hi = max(u.hi, c.off+last)
			}
		}
		if u.lo > u.hi {
			return 0
		}
		u.last = u.lo
		u.fill(u.lo)
	}
	target := rankTarget(rank)
	for {
		n := min(unionChunk, u.hi-u.start+1)
		for ; u.j < n; u.j++ {
			x := u.acc[u.j]
			if x == 0 {
				continue
			}
			u.last = u.start + u.j
			if u.cum+x > target {
				return u.start + u.j
			}
			u.cum += x
		}
		if u.start+n > u.hi {
			return u.last // rounding: the last bin holding anything
		}
		u.fill(u.start + n)
	}
}

// fill sums the counts of every Bins for indices [start, start+unionChunk).
func (u *unionScan) fill(start int) {
	u.start, u.j = start, 0
	end := min(start+unionChunk-1, u.hi)
	acc := u.acc[:end-start+1]
	clear(acc)
	for _, b := range u.bins {
		c := u.side(b)
		if c == nil || c.sum == 0 {
			continue
		}
		from, to := max(start, c.off), min(end, c.off+c.n()-1)
		if from > to {
			continue
		}
		c.addTo(acc[from-start:to-start+1], from-c.off)
	}
}

// addTo adds the counts at positions j, j+1, ... into dst, one per element.
func (c *counts) addTo(dst []uint64, j int) {
	switch c.shift {
	case 0:
		src := c.data[j : j+len(dst)]
		for i, x := range src {
			dst[i] += uint64(x)
		}
	case 1:
		src := c.data[2*j : 2*(j+len(dst))]
		for i := range dst {
			dst[i] += uint64(binary.LittleEndian.Uint16(src[2*i:]))
		}
	default:
		for i := range dst {
			dst[i] += c.get(j + i)
		}
	}
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
