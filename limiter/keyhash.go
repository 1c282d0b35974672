package limiter

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// keyHasher is a seeded 64-bit hash of limiter keys. A store hashes a key once per
// decision: the hash picks the shard and keys the shard's map (a map[string] hashed the
// key a second time, and compared key bytes on every probe).
//
// Keys up to 16 bytes (tenant ids, IPs, most keys) take wyhash's short-input path inline,
// two multiplies, where maphash.String costs a call and a few times as much; longer keys
// go to maphash. Both are seeded at random per store, so which keys share a shard (each
// shard has its own share of the key budget) cannot be chosen from outside.
type keyHasher struct {
	s0, s1, seed uint64
	long         maphash.Seed
}

func newKeyHasher() keyHasher {
	h := keyHasher{s0: rand.Uint64() | 1, s1: rand.Uint64() | 1, long: maphash.MakeSeed()}
	h.seed = rand.Uint64()
	h.seed ^= mix(h.seed^h.s0, h.s1)
	return h
}

// mix folds the 128-bit product of a and b into 64 bits (wyhash's mum).
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func (h *keyHasher) hash(key string) uint64 {
	n := len(key)
	if n > 16 {
		return maphash.String(h.long, key)
	}
	b := unsafe.Slice(unsafe.StringData(key), n)
	var x, y uint64
	switch {
	case n >= 8: // two overlapping 8-byte loads cover 8..16 bytes
		x, y = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		x, y = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		x = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	hi, lo := bits.Mul64(x^h.s1, y^h.seed)
	return mix(lo^h.s0^uint64(n), hi^h.s1)
}

// sameKey is a == b. Keys of 8 to 16 bytes compare as two overlapping words inline,
// where == calls memequal: it is on every decision (the hot entry's check).
func sameKey(a, b string) bool {
	n := len(a)
	if n != len(b) {
		return false
	}
	if n < 8 || n > 16 {
		return a == b
	}
	x, y := unsafe.Slice(unsafe.StringData(a), n), unsafe.Slice(unsafe.StringData(b), n)
	return binary.LittleEndian.Uint64(x) == binary.LittleEndian.Uint64(y) &&
		binary.LittleEndian.Uint64(x[n-8:]) == binary.LittleEndian.Uint64(y[n-8:])
}
