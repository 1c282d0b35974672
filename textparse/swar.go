package textparse

import (
	"encoding/binary"
	"math/bits"
)

// SWAR helpers: eight bytes of the input read as one little-endian word, the first byte in
// the lowest bits.

// nonDigits flags (high bit of the byte) the bytes of w that are not ASCII digits, exactly:
// t = c ^ '0' is 0…9 for a digit, and (t & 0x7f) + 0x76 cannot carry out of its byte.
func nonDigits(w uint64) uint64 {
	t := w ^ (lo8 * '0')
	return (((t &^ hi8) + lo8*0x76) | t) & hi8
}

// skipDigits returns the index of the first byte at or after i that is not an ASCII digit.
func skipDigits(b []byte, i int) int {
	for i+8 <= len(b) {
		if nd := nonDigits(binary.LittleEndian.Uint64(b[i:])); nd != 0 {
			return i + bits.TrailingZeros64(nd)>>3
		}
		i += 8
	}
	for i < len(b) && b[i]-'0' < 10 {
		i++
	}
	return i
}

// parse8 converts eight ASCII digits (or zero bytes standing for leading zeros) to their
// value with three multiplications instead of eight dependent ones: pairs, then quads, then
// the two halves.
func parse8(w uint64) uint64 {
	w = (w & 0x0F0F0F0F0F0F0F0F) * (10<<8 + 1) >> 8
	w = (w & 0x00FF00FF00FF00FF) * (100<<16 + 1) >> 16
	return (w & 0x0000FFFF0000FFFF) * (10000<<32 + 1) >> 32
}

// digitsValue returns the value of b, which must be all ASCII digits, and whether it fits
// a uint64. Runs of 8 to 16 digits take two parse8 words (the second overlapping the first,
// its already counted bytes masked off).
func digitsValue(b []byte) (uint64, bool) {
	n := len(b)
	if n >= 8 && n <= 16 {
		hi := binary.LittleEndian.Uint64(b)
		lo := binary.LittleEndian.Uint64(b[n-8:])
		if nonDigits(hi)|nonDigits(lo) != 0 {
			return 0, false
		}
		lo &^= 1<<(8*(16-n)) - 1 // the bytes hi holds already, as leading zeros
		return parse8(hi)*pow10u[n-8] + parse8(lo), true
	}
	var u uint64
	for i, c := range b {
		d := uint64(c - '0')
		if d >= 10 || (i >= 19 && u > (1<<64-1-d)/10) {
			return 0, false
		}
		u = u*10 + d
	}
	return u, n > 0
}

// pow10u holds 10^0 … 10^19 as integers.
var pow10u = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13,
	1e14, 1e15, 1e16, 1e17, 1e18, 1e19}
