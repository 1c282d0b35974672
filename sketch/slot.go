package sketch

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"
)

// Slot holds the bins of one ring slot in one pointer-sized word, in one of two forms:
//
//   - open: a Bins that Add fills (the current slot, and a past slot that took a late event);
//   - packed: the same counts, read-only, Rice-coded in one allocation of about 3 bits per
//     bin in the range (a slot of 1,000 lognormal latencies at 1%: ~100 bytes, against ~280
//     for its compacted open Bins), for a slot that no longer receives values (issue #19).
//
// Packing loses nothing: a packed slot adds into, subtracts from and reads as the open one
// did, to the count. The zero Slot is empty. A Slot is not safe for concurrent use.
//
// Layout: the word is an unsafe.Pointer to either an openSlot (whose first byte is 0) or
// the packed bytes (whose first byte, the first of a uvarint length of at least 3, is never
// 0), so telling the forms apart costs one byte read and no extra field.
type Slot struct{ p unsafe.Pointer }

// openSlot is the open form: a tag byte, always 0, then the Bins.
type openSlot struct {
	tag  byte
	bins Bins
}

// SlotOf returns an open Slot holding b's counts; b is taken over (its arrays are shared,
// not copied) and must not be used after.
func SlotOf(b *Bins) Slot {
	o := &openSlot{bins: *b}
	return Slot{unsafe.Pointer(o)}
}

// Empty reports whether s holds no bins at all (the zero Slot).
func (s Slot) Empty() bool { return s.p == nil }

// IsPacked reports whether s is in the packed form.
func (s Slot) IsPacked() bool { return s.p != nil && *(*byte)(s.p) != 0 }

// Bins returns the open Bins of s, or nil when s is empty or packed.
func (s Slot) Bins() *Bins {
	if s.p == nil || *(*byte)(s.p) != 0 {
		return nil
	}
	return &(*openSlot)(s.p).bins
}

// Open returns s's Bins for adding, first allocating them when s is empty or unpacking them
// when s is packed (O(bins)).
func (s *Slot) Open() *Bins {
	if b := s.Bins(); b != nil {
		return b
	}
	o := new(openSlot)
	if s.p != nil {
		s.AddTo(&o.bins)
	}
	s.p = unsafe.Pointer(o)
	return &o.bins
}

// Pack turns an open s into the packed form (O(bins), one allocation); a packed or empty s
// is left as it is, and an open s holding no count becomes empty.
func (s *Slot) Pack() {
	b := s.Bins()
	if b == nil {
		return
	}
	if b.Count() == 0 {
		s.p = nil
		return
	}
	var stack [512]byte
	body := appendPacked(stack[:0], b)
	var pre [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(pre[:], uint64(len(body)))
	out := make([]byte, n+len(body))
	copy(out, pre[:n])
	copy(out[n:], body)
	s.p = unsafe.Pointer(&out[0])
}

// Reset empties s, releasing its memory.
func (s *Slot) Reset() { s.p = nil }

// packed returns the body of a packed s: the bytes after the length prefix.
func (s Slot) packed() []byte {
	var n uint64
	var shift uint
	i := 0
	for {
		// Byte by byte: every byte read lies inside the allocation Pack made.
		c := *(*byte)(unsafe.Add(s.p, i))
		i++
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
		shift += 7
	}
	return unsafe.Slice((*byte)(unsafe.Add(s.p, i)), int(n))
}

// Bytes returns the heap bytes s holds: the open Bins with their header, or the packed
// encoding (before the allocator's size-class rounding).
func (s Slot) Bytes() int {
	switch {
	case s.p == nil:
		return 0
	case !s.IsPacked():
		return int(unsafe.Sizeof(openSlot{})) + s.Bins().Bytes()
	}
	b := s.packed()
	return len(b) + len(binary.AppendUvarint(nil, uint64(len(b))))
}

// Clone returns a deep copy of s, in the same form.
func (s Slot) Clone() Slot {
	switch {
	case s.p == nil:
		return Slot{}
	case !s.IsPacked():
		return SlotOf(s.Bins().Clone())
	}
	b := s.packed()
	var pre [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(pre[:], uint64(len(b)))
	out := make([]byte, n+len(b))
	copy(out, pre[:n])
	copy(out[n:], b)
	return Slot{unsafe.Pointer(&out[0])}
}

// Count returns the number of values s holds. O(bins) when packed.
func (s Slot) Count() uint64 {
	if s.p == nil {
		return 0
	}
	if b := s.Bins(); b != nil {
		return b.Count()
	}
	var tmp Bins
	s.AddTo(&tmp)
	return tmp.Count()
}

// View returns the open Bins of s, or, when s is packed, scratch cleared and filled with
// s's counts. Read the result, do not keep it.
func (s Slot) View(scratch *Bins) *Bins {
	if b := s.Bins(); b != nil {
		return b
	}
	scratch.Clear()
	s.AddTo(scratch)
	return scratch
}

// AddTo adds s's counts to dst, as dst.AddBins of the open form would.
func (s Slot) AddTo(dst *Bins) {
	switch {
	case s.p == nil:
		return
	case !s.IsPacked():
		dst.AddBins(s.Bins())
		return
	}
	d := packedReader{b: s.packed()}
	zero := d.uvarint()
	if n := int(d.uvarint()); n > 0 {
		if dst.neg == nil {
			dst.neg = new(counts)
		}
		d.addSide(dst.neg, n)
	}
	if n := int(d.uvarint()); n > 0 {
		d.addSide(&dst.pos, n)
	}
	z, carry := bits.Add64(dst.zero, zero, 0)
	if carry != 0 {
		z = math.MaxUint64
	}
	dst.zero = z
}

// SubFrom subtracts s's counts from dst, as dst.SubBins of the open form would, with the
// same result and the same compaction of dst.
func (s Slot) SubFrom(dst *Bins) bool {
	switch {
	case s.p == nil:
		return true
	case !s.IsPacked():
		return dst.SubBins(s.Bins())
	}
	d := packedReader{b: s.packed()}
	zero := d.uvarint()
	ok := true
	if n := int(d.uvarint()); n > 0 {
		if dst.neg == nil {
			d.skipSide(n)
			ok = false
		} else {
			ok = d.subSide(dst.neg, n)
		}
	}
	if n := int(d.uvarint()); n > 0 {
		ok = d.subSide(&dst.pos, n) && ok
	}
	if dst.zero < zero {
		dst.zero, ok = 0, false
	} else {
		dst.zero -= zero
	}
	dst.afterSub()
	return ok
}

// appendPacked appends the packed body of b: the zero count, then the negative and the
// positive side, each as the number of bins of its non-zero range (0: none), the index of
// the first (zigzag varint) and every count Rice-coded.
func appendPacked(out []byte, b *Bins) []byte {
	out = binary.AppendUvarint(out, b.zero)
	if b.neg != nil && b.neg.sum > 0 {
		out = b.neg.appendRice(out)
	} else {
		out = append(out, 0)
	}
	if b.pos.sum > 0 {
		out = b.pos.appendRice(out)
	} else {
		out = append(out, 0)
	}
	return out
}

// The counts of a side are Rice-coded against a prediction, as lossless audio codecs code
// residuals: the prediction p is a running mean of the counts before (neighbouring bins of
// a latency distribution hold similar counts), the residual x−p is zigzag-mapped to z ≥ 0,
// and z is split at k bits, the quotient z>>k in unary (ones ended by a zero) and the k low
// bits as they are, where k follows a running mean of the residuals. The long runs of
// empty bins in the tails cost one bit each. A quotient of riceEscape or more is written
// as riceEscape ones, the bit length of z in 6 bits and z below its top bit, so no count
// costs more than 86 bits. Arithmetic wraps modulo 2^64 on both sides, so every uint64
// count round-trips.
const riceEscape = 16

// riceMean updates the running mean m (4 × mean) with x. Counts above 2^60 count as 2^60,
// so m stays below 2^62 without an overflow check (they take the escape instead).
func riceMean(m, x uint64) uint64 { return m - m>>2 + min(x, 1<<60) }

// riceK returns the Rice parameter for a running mean kept as m = 4 × mean.
// Branch-free (max is a conditional move): k follows the data, and a branch on it is
// mispredicted often enough to cost the decoder a tenth of its time.
func riceK(m uint64) uint { return uint(max(bits.Len64(m>>2), 1) - 1) }

func (c *counts) appendRice(out []byte) []byte {
	first, last := c.nonZeroRange()
	out = binary.AppendUvarint(out, uint64(last-first+1))
	out = binary.AppendVarint(out, int64(c.off+first))
	w := bitWriter{out: out}
	var r riceState
	for j := first; j <= last; j++ {
		w.rice(r.zigzag(c.get(j)), r.k())
		r.update(c.get(j))
	}
	return w.flush()
}

// riceState is the adaptive state both sides of the coder keep: pm and zm are 4 × the
// running means of the counts and of the zigzagged residuals.
type riceState struct{ pm, zm, z uint64 }

// zigzag returns x's residual against the prediction, zigzag-mapped (and remembers it).
func (r *riceState) zigzag(x uint64) uint64 {
	d := x - r.pm>>2
	r.z = d<<1 ^ uint64(int64(d)>>63)
	return r.z
}

// unzigzag is the inverse of zigzag: the count whose residual is z.
func (r *riceState) unzigzag(z uint64) uint64 {
	r.z = z
	return r.pm>>2 + (z>>1 ^ -(z & 1))
}

func (r *riceState) k() uint { return riceK(r.zm) }

// update moves the means past count x, whose residual was the last zigzag'ed.
func (r *riceState) update(x uint64) {
	r.pm = riceMean(r.pm, x)
	r.zm = riceMean(r.zm, r.z)
}

// rice appends z Rice-coded with parameter k.
func (w *bitWriter) rice(z uint64, k uint) {
	if q := z >> k; q < riceEscape {
		w.write(1<<q-1, uint(q)+1) // q ones, then a zero
		w.writeLong(z&(1<<k-1), k)
		return
	}
	w.write(1<<riceEscape-1, riceEscape)
	l := uint(bits.Len64(z))
	w.write(uint64(l-1), 6)
	w.writeLong(z&(1<<(l-1)-1), l-1)
}

// bitWriter appends bits to out, least significant first.
type bitWriter struct {
	out []byte
	acc uint64
	n   uint // bits in acc, < 8 between calls
}

// write appends the n ≤ 56 low bits of v (v < 1<<n).
func (w *bitWriter) write(v uint64, n uint) {
	w.acc |= v << w.n
	w.n += n
	for w.n >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

// writeLong is write for n ≤ 64.
func (w *bitWriter) writeLong(v uint64, n uint) {
	if n > 32 {
		w.write(v&(1<<32-1), 32)
		v, n = v>>32, n-32
	}
	w.write(v, n)
}

func (w *bitWriter) flush() []byte {
	if w.n > 0 {
		w.out = append(w.out, byte(w.acc))
	}
	w.acc, w.n = 0, 0
	return w.out
}

// packedReader reads a packed body. Packed bytes are only ever made by Pack, so the reader
// trusts them; reading past the end yields zeros rather than a panic.
type packedReader struct {
	b []byte
	i int
}

func (d *packedReader) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.i = len(d.b)
		return 0
	}
	d.i += n
	return v
}

func (d *packedReader) varint() int64 { return unzigzag(d.uvarint()) }

// riceBatch is how many counts a side decodes at a time.
const riceBatch = 64

// riceSide decodes the counts of one side, a batch at a time.
type riceSide struct {
	b    []byte
	i    int    // next byte of b to load into acc
	acc  uint64 // bits loaded, least significant first
	nb   uint   // valid bits in acc
	left int    // counts not yet decoded
	r    riceState
}

// side starts reading a side of n counts here; it returns the index of its first bin.
func (d *packedReader) side(n int) (riceSide, int) {
	off := int(d.varint())
	return riceSide{b: d.b, i: d.i, left: n}, off
}

// done moves d past a side whose counts rs has all decoded: to the byte after its last bit.
func (d *packedReader) done(rs *riceSide) {
	d.i = rs.i - int(rs.nb/8) // whole bytes loaded ahead belong to what follows
}

// refill loads bytes until acc holds at least 57 bits or b is exhausted: one 8-byte load
// while 8 bytes remain (the usual case), byte by byte near the end.
func (rs *riceSide) refill() {
	if rs.i+8 <= len(rs.b) {
		rs.acc |= binary.LittleEndian.Uint64(rs.b[rs.i:]) << rs.nb
		adv := (63 - rs.nb) >> 3
		rs.i += int(adv)
		rs.nb |= 56
		return
	}
	for rs.nb <= 56 && rs.i < len(rs.b) {
		rs.acc |= uint64(rs.b[rs.i]) << rs.nb
		rs.i++
		rs.nb += 8
	}
}

// take consumes n ≤ 56 bits, which refill has loaded.
func (rs *riceSide) take(n uint) uint64 {
	v := rs.acc & (1<<n - 1)
	rs.acc >>= n
	rs.nb -= min(n, rs.nb)
	return v
}

// takeLong consumes n ≤ 64 bits, refilling as needed.
func (rs *riceSide) takeLong(n uint) uint64 {
	if n > 32 {
		rs.refill()
		lo := rs.take(32)
		rs.refill()
		return lo | rs.take(n-32)<<32
	}
	if n > rs.nb {
		rs.refill()
	}
	return rs.take(n)
}

// next decodes up to len(dst) counts into dst and returns how many. The loop keeps the bit
// buffer in locals and refills it with one 8-byte load (the trick of fast Huffman
// decoders) only when the next count is not wholly loaded, which a count of a few bits
// rarely is: the load stays off the loop's chain of dependent steps, so a count costs a
// few nanoseconds, and a run of empty bins in the tails costs one step.
func (rs *riceSide) next(dst *[riceBatch]uint64) int {
	n := min(rs.left, riceBatch)
	b, i, acc, nb := rs.b, rs.i, rs.acc, rs.nb
	pm, zm := rs.r.pm, rs.r.zm // riceState's fields as locals, so they stay in registers
	out := dst[:n]
	for j := 0; j < len(out); j++ {
		if pm|zm < 4 {
			// Both means round to 0 (a tail, or the empty bins between small integer
			// values): a loaded 0 bit is a count of 0 that leaves them as they are, so a
			// run of them is a run of empty bins, taken at once.
			if r := min(uint(bits.TrailingZeros64(acc)), nb, uint(len(out)-j)); r > 0 {
				clear(out[j : j+int(r)])
				acc >>= r
				nb -= r
				j += int(r) - 1
				continue
			}
		}
		k := riceK(zm)
		// The unary quotient's ones. Bits of acc above nb are 0 or the stream's own (a
		// refill loads whole words), so a quotient, its 0 and k bits that fit in nb are
		// the count's.
		q := uint(bits.TrailingZeros64(^acc))
		if q+1+k > nb {
			if i+8 <= len(b) {
				acc |= binary.LittleEndian.Uint64(b[i:]) << nb
				i += int((63 - nb) >> 3)
				nb |= 56
			} else {
				rs.i, rs.acc, rs.nb = i, acc, nb
				rs.refill()
				i, acc, nb = rs.i, rs.acc, rs.nb
			}
			q = uint(bits.TrailingZeros64(^acc))
		}
		var z uint64
		if q < riceEscape && k <= 40 {
			// nb ≥ 56 after a refill (but near the end), so the q+1+k ≤ 56 bits are
			// loaded; the masks change no shift (all below 64) but spare Go's check for
			// shifts of 64 or more.
			s := q + 1 + k
			z = uint64(q)<<(k&63) | acc>>((q+1)&63)&(1<<(k&63)-1)
			acc >>= s & 63
			nb -= min(s, nb)
		} else {
			// A long count or an escape: its first q+1 ≥ 17 bits are loaded (or q was
			// read after a refill); slowValue refills for the rest.
			rs.i, rs.acc, rs.nb = i, acc, nb
			z = rs.slowValue(q, k)
			i, acc, nb = rs.i, rs.acc, rs.nb
		}
		x := pm>>2 + (z>>1 ^ -(z & 1))
		pm = riceMean(pm, x)
		zm = riceMean(zm, z)
		out[j] = x
	}
	rs.i, rs.acc, rs.nb = i, acc, nb
	rs.r.pm, rs.r.zm, rs.r.z = pm, zm, 0
	rs.left -= n
	return n
}

// slowValue reads a value with a long k or an escape, whose unary part counted q ones.
func (rs *riceSide) slowValue(q, k uint) uint64 {
	if q < riceEscape {
		rs.take(q + 1)
		return uint64(q)<<k | rs.takeLong(k)
	}
	rs.take(riceEscape)
	l := uint(rs.takeLong(6)) + 1
	return 1<<(l-1) | rs.takeLong(l-1)
}

// addSide adds the n counts of the side starting here into c.
func (d *packedReader) addSide(c *counts, n int) {
	rs, off := d.side(n)
	c.add(off, 0) // cover both ends first, so the loop never reallocates
	c.add(off+n-1, 0)
	var buf [riceBatch]uint64
	for i := off; rs.left > 0; {
		m := rs.next(&buf)
		c.addRun(i, buf[:m])
		i += m
	}
	d.done(&rs)
}

// addRun adds xs to the counts of indices i, i+1, ..., which c covers: one-byte counts
// (a slot's usual width) in one loop while no sum overflows, the rest through add.
func (c *counts) addRun(i int, xs []uint64) {
	if c.shift == 0 {
		d := c.data[i-c.off:]
		d = d[:len(xs)]
		var added uint64
		for j, x := range xs {
			s := uint64(d[j]) + x
			if s > math.MaxUint8 {
				c.sum += added
				for k, y := range xs[j:] {
					if y != 0 {
						c.add(i+j+k, y)
					}
				}
				return
			}
			d[j] = uint8(s)
			added += x
		}
		c.sum += added
		return
	}
	for j, x := range xs {
		if x != 0 {
			c.add(i+j, x)
		}
	}
}

// subSide removes the n counts of the side starting here from c, clamping at zero, and
// reports whether all were present.
func (d *packedReader) subSide(c *counts, n int) bool {
	rs, off := d.side(n)
	ok := true
	var buf [riceBatch]uint64
	for i := off; rs.left > 0; {
		m := rs.next(&buf)
		for j, x := range buf[:m] {
			if x != 0 && c.sub(i+j, x) != x {
				ok = false
			}
		}
		i += m
	}
	d.done(&rs)
	return ok
}

func (d *packedReader) skipSide(n int) {
	rs, _ := d.side(n)
	var buf [riceBatch]uint64
	for rs.left > 0 {
		rs.next(&buf)
	}
	d.done(&rs)
}
