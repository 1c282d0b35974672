package event

import (
	"cmp"
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
// otherwise. A resource's string part longer than 16 bytes is taken as a number given to its
// bytes (longPart). A span with another longer string part, or a decoder of more than
// maxRecentDims dimensions, goes to seen alone. (Hashing or comparing the written parts instead reads
// back bytes just stored one by one, which the processor forwards slowly: no faster.)

// recentBits is log2 of the number of slots of SpanDecoder.recent.
const recentBits = 9

// maxRecentDims is the most dimensions of a decoder whose spans the cache holds.
const maxRecentDims = 4

// recentPart is one part of a span as words: a string's first and last eight bytes (zero
// past its end), a number's bits in lo. Its type, escaping and length are its meta in
// recentHead (partMeta).
type recentPart struct{ lo, hi uint64 }

// recentHead is what a slot's parts are besides their words: the span's kind and status,
// and each part's meta.
type recentHead struct {
	ks   uint32 // kind<<8 | status (event checked both before recentKey: they fit)
	meta [2 + maxRecentDims]uint16
}

// recentSlot is a series (key, "" for an empty slot) and the parts it was written from,
// 128 bytes: the key, the head and the first two parts in its first 64.
type recentSlot struct {
	key  string
	head recentHead
	p    [2 + maxRecentDims]recentPart
}

// partMeta is a part's meta: its type, a string's escaping and length (at most 16).
func partMeta(kind uint8, esc bool, n int) uint16 {
	return uint16(kind)<<8 | uint16(boolBit(esc))<<7 | uint16(n)
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
	c.head.ks = uint32(f.kind)<<8 | uint32(f.status)
	h := uint64(c.head.ks) * 0x9E3779B97F4A7C15
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
		var lo, hi uint64
		var meta uint16
		if r := &s.rres; res > 0 && r.on {
			// A part of the resource's, its words taken once for its spans (takeRes).
			if r.ok&(1<<(res-1)) == 0 {
				return "", false
			}
			c.p[k], c.head.meta[k] = r.p[res-1], r.meta[res-1]
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
			meta = partMeta(valString, v.esc, l)
		} else if v.kind == valInt {
			lo, meta = uint64(v.i), partMeta(valInt, false, 0)
		} else {
			var ok bool
			if lo, hi, meta, ok = partWords(v); !ok {
				return "", false
			}
		}
		c.p[k], c.head.meta[k] = recentPart{lo, hi}, meta
		h = bits.RotateLeft64(h, 23) ^ partTerm(lo, hi, meta)
	}
	h *= 0x9E3779B97F4A7C15
	slot := h >> (64 - recentBits)
	s.rslot = int(slot)
	e := &s.recent[slot]
	if e.head != c.head || e.key == "" {
		return "", false
	}
	for k := range n {
		if e.p[k] != c.p[k] {
			return "", false
		}
	}
	return e.key, true
}

// partTerm is what a part's words add to recentKey's hash.
func partTerm(lo, hi uint64, meta uint16) uint64 {
	return lo*0xC2B2AE3D27D4EB4F + hi*0x165667B19E3779F9 + uint64(meta)
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
	ok   uint8 // bit k: part k has words (partWords, longPart)
	p    [1 + maxRecentDims]recentPart
	meta [1 + maxRecentDims]uint16
	term [1 + maxRecentDims]uint64 // what each adds to recentKey's hash

	long     map[string]uint64 // the numbers longPart gave, by the bytes given them
	longLast uint64            // the last number given: never given again
	longMax  int               // how many long holds at most (maxLongParts; tests lower it)
}

// A resource's string part of 17 to maxLongPart bytes (a service.name of more than 16, as
// many are) is taken as a number given to its bytes (longPart), at most maxLongParts of
// them remembered; longer parts leave the resource's spans to seen.
const (
	maxLongPart  = 256
	maxLongParts = 1024
	longPartLen  = 0x7F // partMeta's length of a part taken as a number, no string's
)

// longPart is the words of v, a resource's string part of 17 to maxLongPart bytes: lo the
// number given to its bytes, which no other bytes are ever given (a forgotten part gets a new
// one), and a meta no string's words have; ok false for any other part. Giving a number
// allocates (the bytes' copy, and a new map when maxLongParts are remembered): once for a
// resource's part while it is remembered, never per span.
func (r *recentRes) longPart(v *attrVal) (lo uint64, meta uint16, ok bool) {
	if v.kind != valString || len(v.b) <= 16 || len(v.b) > maxLongPart {
		return 0, 0, false
	}
	lo, ok = r.long[string(v.b)]
	if !ok {
		if r.long == nil || len(r.long) >= cmp.Or(r.longMax, maxLongParts) {
			r.long = make(map[string]uint64)
		}
		r.longLast++
		lo = r.longLast
		r.long[string(v.b)] = lo
	}
	return lo, partMeta(valString, v.esc, longPartLen), true
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
		lo, hi, meta, ok := partWords(&s.res[k])
		if !ok {
			lo, meta, ok = r.longPart(&s.res[k])
		}
		if ok {
			r.ok |= 1 << k
			r.p[k], r.meta[k], r.term[k] = recentPart{lo, hi}, meta, partTerm(lo, hi, meta)
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

// partWords is part v's words and meta; ok false for a string longer than 16 bytes.
func partWords(v *attrVal) (lo, hi uint64, meta uint16, ok bool) {
	switch v.kind {
	case valString:
		b := v.b
		n := len(b)
		if n > 16 {
			return 0, 0, 0, false
		}
		if cap(b) < 16 { // near the end of what it was read from: copied
			var t [16]byte
			copy(t[:], b)
			b = t[:]
		}
		b = b[:16]
		m := &recentMasks[n]
		return binary.LittleEndian.Uint64(b) & m[0], binary.LittleEndian.Uint64(b[8:]) & m[1], partMeta(valString, v.esc, n), true
	case valInt, valBool:
		lo = uint64(v.i)
	case valDouble:
		lo = math.Float64bits(v.f)
	}
	return lo, 0, partMeta(v.kind, false, 0), true
}
