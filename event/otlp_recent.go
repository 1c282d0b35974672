package event

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The recent series: a cache in front of SpanDecoder.seen, so that a span of a series seen
// lately costs neither writing its parts (appendRaw) nor the map's lookup of them, which
// were a third of a span's decoding. A span's parts (its key, kind, status, name and
// dimensions as read) are taken as words where they lie in the body, a string of up to 16
// bytes as two words and its length, a number as its bits; the words pick the span's slot by
// a cheap hash and are compared with those of the slot's series, word by word: equal words
// are equal parts, the same test as the map's, so a span gets the series it would get from
// seen. A collision, whoever chose the parts, costs only the map lookup the cache saves
// otherwise. A span with a longer string part, or a decoder of more than maxRecentDims
// dimensions, goes to seen alone. (Hashing or comparing the written parts instead reads
// back bytes just stored one by one, which the processor forwards slowly: no faster.)

// recentBits is log2 of the number of slots of SpanDecoder.recent.
const recentBits = 9

// maxRecentDims is the most dimensions of a decoder whose spans the cache holds.
const maxRecentDims = 4

// recentPart is one part of a span as words: a string's first and last eight bytes (zero
// past its end), a number's bits in lo; meta its type, escaping and length.
type recentPart struct{ lo, hi, meta uint64 }

// recentSlot is a series (key, "" for an empty slot) and the parts it was written from.
type recentSlot struct {
	ks  uint64 // kind and status
	p   [2 + maxRecentDims]recentPart
	key string
}

// recentKey is span f's series string from its slot of recent; ok false when the slot holds
// another series. It leaves the span's words in s.rcur and its slot in s.rslot, −1 when the
// cache does not hold such a span.
func (s *SpanDecoder) recentKey(f *spanFields) (string, bool) {
	s.rslot = -1
	if len(s.dims) > maxRecentDims {
		return "", false
	}
	c := &s.rcur
	c.ks = uint64(f.kind)<<32 | uint64(uint32(f.status))
	h := c.ks * 0x9E3779B97F4A7C15
	n := 2 + len(s.dims)
	for k := range n {
		v, res := &s.res[0], 0 // res: 1 + the resource's part, or 0 for the span's
		switch {
		case k == 0:
			res = 1
		case k == 1:
			v = &f.name
		default:
			if v = &f.dims[k-2]; v.kind == valAbsent {
				v, res = &s.res[k-1], k
			}
		}
		p := &c.p[k]
		var lo, hi, meta uint64
		if r := &s.rres; res > 0 && r.on {
			// A part of the resource's, its words taken once for its spans (takeRes).
			if r.ok&(1<<(res-1)) == 0 {
				return "", false
			}
			*p = r.p[res-1]
			h = bits.RotateLeft64(h, 23) ^ r.term[res-1]
			continue
		}
		if b := v.b; v.kind == valString && len(b) <= 16 && cap(b) >= 16 {
			// The common part, a short string where 16 bytes can be read, taken here: its
			// words masked to its length (recentMasks), in registers until stored.
			l := len(b)
			m := &recentMasks[l&31]
			b = b[:16]
			lo = binary.LittleEndian.Uint64(b) & m[0]
			hi = binary.LittleEndian.Uint64(b[8:]) & m[1]
			meta = uint64(valString)<<32 | uint64(l) | boolBit(v.esc)<<40
			p.lo, p.hi, p.meta = lo, hi, meta
		} else if !partWords(p, v) {
			return "", false
		} else {
			lo, hi, meta = p.lo, p.hi, p.meta
		}
		h = bits.RotateLeft64(h, 23) ^ (lo*0xC2B2AE3D27D4EB4F + hi*0x165667B19E3779F9 + meta)
	}
	h *= 0x9E3779B97F4A7C15
	slot := h >> (64 - recentBits)
	s.rslot = int(slot)
	e := &s.recent[slot]
	if e.key == "" || e.ks != c.ks {
		return "", false
	}
	for k := range n {
		if e.p[k] != c.p[k] {
			return "", false
		}
	}
	return e.key, true
}

// boolBit is 1 for true, 0 for false (without a branch).
func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// recentMasks are by a string's length (to 16) the masks of its two words' bytes.
var recentMasks = func() (m [32][2]uint64) {
	for n := range 17 {
		for i := range n {
			m[n][i/8] |= 0xFF << (8 * (i % 8))
		}
	}
	return m
}()

// recentRes is the resource's parts as words (the key attribute's, then each dimension's),
// taken once for the spans of a ResourceSpans of otlp_proto (takeRes): on while they are
// s.res's, which nothing writes while its spans are read.
type recentRes struct {
	on   bool
	ok   uint8                         // bit k: part k has words (partWords)
	p    [1 + maxRecentDims]recentPart // the words
	term [1 + maxRecentDims]uint64     // what each adds to recentKey's hash
}

// takeRes takes the words of the resource's parts, s.res, for recentKey, until s.rres.on is
// cleared: when the resource's values are all read and before its spans are.
func (s *SpanDecoder) takeRes() {
	r := &s.rres
	r.on, r.ok = len(s.dims) <= maxRecentDims, 0
	if !r.on {
		return
	}
	for k := range 1 + len(s.dims) {
		if p := &r.p[k]; partWords(p, &s.res[k]) {
			r.ok |= 1 << k
			r.term[k] = p.lo*0xC2B2AE3D27D4EB4F + p.hi*0x165667B19E3779F9 + p.meta
		}
	}
}

// remember puts series key, of the span whose words recentKey left, into its slot.
func (s *SpanDecoder) remember(key string) {
	if s.rslot >= 0 {
		s.rcur.key = key
		s.recent[s.rslot&(len(s.recent)-1)] = s.rcur
	}
}

// partWords sets p to part v's words; false for a string longer than 16 bytes.
func partWords(p *recentPart, v *attrVal) bool {
	p.meta = uint64(v.kind) << 32 // and a string's length and escaping, below
	p.lo, p.hi = 0, 0
	switch v.kind {
	case valString:
		b := v.b
		n := len(b)
		p.meta |= uint64(n) | boolBit(v.esc)<<40
		if n > 16 {
			return false
		}
		if cap(b) < 16 { // near the end of what it was read from: copied
			var t [16]byte
			copy(t[:], b)
			b = t[:]
		}
		b = b[:16]
		lo, hi := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		switch {
		case n < 8:
			lo &= 1<<(8*n) - 1
			hi = 0
		case n < 16:
			hi &= 1<<(8*(n-8)) - 1
		}
		p.lo, p.hi = lo, hi
	case valInt, valBool:
		p.lo = uint64(v.i)
	case valDouble:
		p.lo = math.Float64bits(v.f)
	}
	return true
}
