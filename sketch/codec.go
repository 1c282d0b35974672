package sketch

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// binsVersion is the first byte of a Bins encoding.
const binsVersion = 1

// MarshalBinary encodes b compactly: a version byte, the zero count, then for
// the positive and the negative side the number of bins in use, the index of
// the first, and each count, all as varints (one byte per count below 128).
// The encoding does not name the Indexer; sender and receiver agree on the
// Kind (ship ToSketch output when they might not). Equal Bins encode to equal
// bytes.
func (b *Bins) MarshalBinary() ([]byte, error) {
	return b.AppendBinary(make([]byte, 0, 16+len(b.pos.data)))
}

// AppendBinary appends MarshalBinary's encoding of b to out (encoding.BinaryAppender), so a
// caller encoding many Bins (a window snapshot) reuses one buffer.
func (b *Bins) AppendBinary(out []byte) ([]byte, error) {
	out = append(out, binsVersion)
	out = binary.AppendUvarint(out, b.zero)
	out = b.pos.appendTo(out)
	if b.neg != nil {
		out = b.neg.appendTo(out)
	} else {
		out = binary.AppendUvarint(out, 0)
	}
	return out, nil
}

func (c *counts) appendTo(out []byte) []byte {
	if c.sum == 0 {
		return binary.AppendUvarint(out, 0)
	}
	first, last := c.nonZeroRange()
	out = binary.AppendUvarint(out, uint64(last-first+1))
	out = binary.AppendVarint(out, int64(c.off+first))
	for j := first; j <= last; j++ {
		out = binary.AppendUvarint(out, c.get(j))
	}
	return out
}

// UnmarshalBinary replaces b's contents with the Bins encoded in p. It never
// panics and allocates at most a small multiple of len(p); on error, wrapping
// ErrCorrupt, b is unchanged.
func (b *Bins) UnmarshalBinary(p []byte) error {
	if len(p) == 0 {
		return fmt.Errorf("%w: bins: empty input", ErrCorrupt)
	}
	if p[0] != binsVersion {
		return fmt.Errorf("%w: bins: version %d, want %d", ErrCorrupt, p[0], binsVersion)
	}
	d := decoder{p: p[1:]}
	var nb Bins
	nb.zero = d.uvarint("zero count")
	nb.pos = d.counts("positive")
	if neg := d.counts("negative"); neg.sum > 0 {
		nb.neg = &neg
	}
	if d.err == nil && len(d.p) > 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.p))
	}
	if d.err == nil {
		total, c1 := bits.Add64(nb.zero, nb.pos.sum, 0)
		var negSum uint64
		if nb.neg != nil {
			negSum = nb.neg.sum
		}
		if _, c2 := bits.Add64(total, negSum, 0); c1|c2 != 0 {
			d.err = fmt.Errorf("total count overflows uint64")
		}
	}
	if d.err != nil {
		return fmt.Errorf("%w: bins: %v", ErrCorrupt, d.err)
	}
	*b = nb
	return nil
}

type decoder struct {
	p   []byte
	err error
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.err = fmt.Errorf("reading %s: bad varint", what)
		return 0
	}
	d.p = d.p[n:]
	return x
}

// varint is binary.Varint's zig-zag decoding of uvarint.
func (d *decoder) varint(what string) int64 { return unzigzag(d.uvarint(what)) }

// unzigzag turns the unsigned varint of a signed one back, as binary.Varint does: the
// decoders read signed varints through their unsigned reader, errors and all.
func unzigzag(u uint64) int64 {
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) counts(side string) counts {
	n := d.uvarint("bin count")
	if d.err != nil || n == 0 {
		return counts{}
	}
	// Each count takes at least one byte: this bounds the allocation by the
	// input size.
	if n > uint64(len(d.p)) || n > MaxSpan {
		d.err = fmt.Errorf("%s: %d bins in %d bytes (max %d)", side, n, len(d.p), MaxSpan)
		return counts{}
	}
	off := d.varint("first index")
	if off < math.MinInt32 || off > math.MaxInt32 {
		d.err = fmt.Errorf("%s: first index %d outside int32", side, off)
		return counts{}
	}
	if c, ok := d.byteCounts(int(n)); ok {
		c.off = int(off)
		return c
	}
	// Two passes: find the width, then fill.
	start := d.p
	var sum, maxc uint64
	for i := uint64(0); i < n; i++ {
		x := d.uvarint("count")
		if d.err != nil {
			d.err = fmt.Errorf("%s side: %w", side, d.err)
			return counts{}
		}
		if (i == 0 || i == n-1) && x == 0 {
			d.err = fmt.Errorf("%s: edge bin %d is empty (non-canonical)", side, i)
			return counts{}
		}
		var carry uint64
		sum, carry = bits.Add64(sum, x, 0)
		if carry != 0 {
			d.err = fmt.Errorf("%s: counts overflow uint64", side)
			return counts{}
		}
		maxc = max(maxc, x)
	}
	c := counts{off: int(off), sum: sum, shift: shiftFor(maxc)}
	c.data = alloc(int(n) << c.shift)
	c.data = c.data[:len(c.data)>>c.shift<<c.shift]
	for j := 0; j < int(n); j++ {
		x, k := binary.Uvarint(start)
		start = start[k:]
		c.set(j, x)
	}
	return c
}

// byteCounts decodes n counts that are each one byte (every count below 128, the usual
// case of a window slot's bins) in one pass and a copy, which a window snapshot's restore
// spends most of its time on otherwise; ok is false, and nothing is consumed, when a count
// takes more than a byte or an edge bin is empty (the general path says why).
func (d *decoder) byteCounts(n int) (counts, bool) {
	if n > len(d.p) {
		return counts{}, false
	}
	src := d.p[:n]
	if src[0] == 0 || src[n-1] == 0 {
		return counts{}, false
	}
	var sum uint64
	var or byte
	for _, x := range src {
		or |= x
		sum += uint64(x)
	}
	if or >= 0x80 {
		return counts{}, false
	}
	c := counts{off: 0, sum: sum, data: alloc(n)}
	copy(c.data, src)
	d.p = d.p[n:]
	return c, true
}
