package sketch

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Adding and subtracting whole Bins: the sliding-sum trick of the window ring.

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

// addRun16 is addRun8 into two-byte counts. (One loop per count width on purpose: each
// loads and stores its width with no switch per count.)
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
	b.afterSub()
	return ok
}

// afterSub releases b's memory once it is empty and compacts its sides once their bins in
// use span less than half their storage (SubBins and Slot.SubFrom).
func (b *Bins) afterSub() {
	if b.Count() == 0 {
		b.Reset()
		return
	}
	b.pos.shrink()
	if b.neg != nil {
		if b.neg.sum == 0 {
			b.neg = nil
		} else {
			b.neg.shrink()
		}
	}
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
