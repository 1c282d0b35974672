package window

import (
	"hash/maphash"
	"math/bits"
)

// The series hash is on the ingest hot path: one per event. maphash.Bytes of metric NUL key
// cost a copy into a buffer and an AES hash call, about a third of an event's cost (issue
// #19), so the store hashes the two strings in place with a multiply-mix in the style of
// wyhash, seeded per store. Collisions of the full 64 bits still resolve correctly (series
// chain on equal hashes and compare metric and key); the seed keeps chains unpredictable.

const (
	hm1 = 0xa0761d6478bd642f
	hm2 = 0xe7037ed1a0b428db
	hm3 = 0x8ebc6af09c88c6e3
	hm4 = 0x589965cc75374cc3
)

func hmix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// hashString mixes s into h as wyhash does: 16 bytes per round, the tail read as one
// (overlapping) pair of words; the caller has mixed in the length.
func hashString(h uint64, s string) uint64 {
	n := len(s)
	var a, b uint64
	switch {
	case n > 16:
		t := s
		for len(t) > 16 {
			h = hmix(le64(t)^hm1, le64(t[8:])^h)
			t = t[16:]
		}
		a, b = le64(s[n-16:]), le64(s[n-8:])
	case n >= 8:
		a, b = le64(s), le64(s[n-8:])
	case n >= 4:
		a, b = le32(s), le32(s[n-4:])
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return hmix(a^hm2, b^h^hm3)
}

// seriesHash hashes (metric, key); the lengths go in first, so ("ab", "c") and ("a", "bc")
// differ. It is two multiply-mixes for a metric and a key of up to 16 bytes each: the seed's
// own mix is a constant of the store (seedMix), and the map and the shard mask take the last
// mix's output as it is (the map hashes its keys again).
func seriesHash(seed uint64, metric, key string) uint64 {
	return seriesHashMixed(seedMix(seed), metric, key)
}

// seedMix is the part of seriesHash that depends on the seed alone.
func seedMix(seed uint64) uint64 { return hmix(seed^hm1, hm2) }

func seriesHashMixed(sm uint64, metric, key string) uint64 {
	h := sm ^ (uint64(len(metric))<<32 | uint64(len(key)))
	if nm, nk := len(metric), len(key); nm >= 8 && nm <= 16 && nk >= 8 && nk <= 16 {
		// The common case (latency_ms, tenant-42) in one call: hashString's tail of each.
		h = hmix(le64(metric)^hm2, le64(metric[nm-8:])^h^hm3)
		return hmix(le64(key)^hm2, le64(key[nk-8:])^h^hm4^hm3)
	}
	h = hashString(h, metric)
	return hashString(h^hm4, key)
}

// newSeed returns a random hash seed.
func newSeed() uint64 {
	return maphash.Comparable(maphash.MakeSeed(), 0)
}
