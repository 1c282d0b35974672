package event

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The recent series: a cache in front of SpanDecoder.seen, so that a span of a series seen
// lately costs neither writing its parts (appendRaw) nor the map's lookup of them, which were
// a third of a span's decoding. A span's slot is picked by a cheap hash of its parts read
// where they lie in the body, and taken when the parts the slot's series was written from
// equal the span's, compared part by part against the body: the same test as the map's, so a
// span gets the series it would get from seen. A collision, whoever chose the parts, costs
// only the map lookup the cache saves otherwise. (Hashing or comparing the written parts
// instead reads back bytes just stored one by one, which the processor forwards slowly.)

// seenSeries is a series string (key) and the parts it was written from (raw, appendRaw's).
type seenSeries struct{ raw, key string }

// recentBits is log2 of the number of slots of SpanDecoder.recent.
const recentBits = 9

// recentKey is span f's series string from its slot of recent, which it sets in
// s.recentSlot; ok false when the slot holds another series.
func (s *SpanDecoder) recentKey(f *spanFields) (string, bool) {
	h := partHash(uint64(f.kind)<<8|uint64(f.status), &s.res[0])
	h = partHash(h, &f.name)
	for i := range s.dims {
		v := &f.dims[i]
		if v.kind == valAbsent {
			v = &s.res[1+i]
		}
		h = partHash(h, v)
	}
	h *= 0x9E3779B97F4A7C15
	s.recentSlot = uint(h >> (64 - recentBits))
	c := &s.recent[s.recentSlot]
	r, ok := rawHas(c.raw, &s.res[0])
	if !ok || len(r) < 2 || r[0] != byte(f.kind) || r[1] != byte(f.status) {
		return "", false
	}
	if r, ok = rawHas(r[2:], &f.name); !ok {
		return "", false
	}
	for i := range s.dims {
		v := &f.dims[i]
		if v.kind == valAbsent {
			v = &s.res[1+i]
		}
		if r, ok = rawHas(r, v); !ok {
			return "", false
		}
	}
	return c.key, len(r) == 0
}

// partHash mixes part v into h: its type, its length and, for a string, its first and last
// eight bytes (fewer when it is shorter, read in one load where the body's bytes allow).
func partHash(h uint64, v *attrVal) uint64 {
	x := uint64(v.kind)<<32 | uint64(len(v.b))
	if v.esc {
		x |= 1 << 40
	}
	switch v.kind {
	case valString:
		b := v.b
		switch n := len(b); {
		case n >= 8:
			x ^= binary.LittleEndian.Uint64(b) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(b[n-8:]), 29)
		case cap(b) >= 8:
			x ^= binary.LittleEndian.Uint64(b[:8]) & (1<<(8*n) - 1)
		default:
			for _, c := range b {
				x = x<<8 ^ uint64(c)
			}
		}
	case valInt, valBool:
		x ^= uint64(v.i)
	case valDouble:
		x ^= math.Float64bits(v.f)
	}
	return bits.RotateLeft64(h, 23) ^ x*0xC2B2AE3D27D4EB4F
}

// rawHas reports whether r starts with part v as appendRaw writes it, and the rest of r.
func rawHas(r string, v *attrVal) (string, bool) {
	t := v.kind << 1
	if v.esc {
		t |= 1
	}
	if len(r) == 0 || r[0] != t {
		return "", false
	}
	r = r[1:]
	switch v.kind {
	case valString:
		n := len(v.b)
		if n < 0x80 {
			if len(r) < 1+n || r[0] != byte(n) || r[1:1+n] != string(v.b) {
				return "", false
			}
			return r[1+n:], true
		}
		var l [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(l[:], uint64(n))
		if len(r) < k+n || r[:k] != string(l[:k]) || r[k:k+n] != string(v.b) {
			return "", false
		}
		return r[k+n:], true
	case valInt, valBool, valDouble:
		x := uint64(v.i)
		if v.kind == valDouble {
			x = math.Float64bits(v.f)
		}
		if len(r) < 8 || binary.LittleEndian.Uint64([]byte(r[:8])) != x {
			return "", false
		}
		return r[8:], true
	}
	return r, true
}
