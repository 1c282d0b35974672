package batch

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
)

// Count-window sums and averages run in decimal fixed point: each value v becomes the integer
// M with v = RN(M / 10^F) (RN: round to nearest float64, which is what parsing "M/10^F" written
// as a decimal gives), the window sum is the exact int64 sum of the Ms, and a window's value is
// RN(S / 10^F), converted once per window that is printed. Adding and subtracting integers
// never drifts and costs one instruction, and comparing windows compares exact sums.
//
// F comes from the first data row (its digits after the point, at least 2, at most 6). A value
// that has no such M (more fraction digits than F, an exponent that makes it so, or |M| beyond
// fixedLimit) switches the job, from that row on, to the compensated float64 sum
// (window.SumWindow) seeded with the window so far. The rule depends on the values alone, never
// on how the input was cut into chunks or batches, so every path gives the same bits.
const (
	minFixedScale = 2
	maxFixedScale = 6
	// |M| < 2^52 makes M unique: float64 spacing at |v| < 2^52/10^F is below 10^-F, so two
	// decimals with F places never round to the same float64.
	maxFixedMant = 1<<52 - 1
)

// fixedSpec is the fixed-point format of one job: F digits after the point and the largest
// |M| a value may have so that a window of k values cannot overflow int64.
type fixedSpec struct {
	scale int     // F
	pow   float64 // 10^F
	lim   int64   // max |M|
	mul   [maxFixedScale + 1]int64
}

// newFixedSpec returns the spec for windows of k values whose first value is first (the raw
// field text).
func newFixedSpec(first []byte, k int) fixedSpec {
	f := minFixedScale
	b := trimSpace(first)
	if i := bytes.IndexByte(b, '.'); i >= 0 {
		d := 0
		for _, c := range b[i+1:] {
			if c-'0' >= 10 {
				break
			}
			d++
		}
		f = min(max(f, d), maxFixedScale)
	}
	s := fixedSpec{scale: f, pow: pow10[f], lim: min(maxFixedMant, math.MaxInt64/int64(max(k, 1)))}
	for d := range s.mul {
		if d <= f {
			s.mul[d] = int64(pow10[f-d])
		}
	}
	return s
}

// toFixed returns M with v = RN(M / 10^F) and |M| ≤ lim, if there is one. Such an M is unique
// (see maxFixedMant), so the answer depends on v alone.
func (s *fixedSpec) toFixed(v float64) (int64, bool) {
	x := v * s.pow
	if !(math.Abs(x) < maxFixedMant+2) { // NaN too
		return 0, false
	}
	m := int64(math.Round(x))
	for _, c := range [3]int64{m, m - 1, m + 1} { // x is rounded: M may be a neighbour of m
		if c >= -s.lim && c <= s.lim && float64(c)/s.pow == v {
			return c, true
		}
	}
	return 0, false
}

// toFloat returns RN(m / 10^F): one exact conversion and one IEEE division when |m| ≤ 2^53
// (both operands exact), else the decimal m·10^-F correctly rounded by strconv.
func (s *fixedSpec) toFloat(m int64) float64 {
	if m >= -1<<53 && m <= 1<<53 {
		return float64(m) / s.pow
	}
	var buf [32]byte
	b := strconv.AppendInt(buf[:0], m, 10)
	b = append(b, 'e', '-', byte('0'+s.scale))
	f, _ := strconv.ParseFloat(string(b), 64) // cannot fail: |m| < 2^63, exponent ≥ -6
	return f
}

// parseFixed parses a value field into M: the plain decimal shapes ([+-]digits[.digits], at
// most 8 digits, at most F after the point) in a few word operations, anything else through
// parseValue (the float64 the float path would see) and toFixed. ok is false when the field is
// not a number (err set, as parseValue) or the number has no M (err nil). buf[vs:ve] is the
// field; bytes past ve are read but not used, so 8 bytes from vs must be in buf for the word
// path.
func (s *fixedSpec) parseFixed(buf []byte, vs, ve int) (int64, bool, error) {
	if vs+8 <= len(buf) && ve > vs && ve-vs <= 8 {
		if m, ok := s.parseWord(binary.LittleEndian.Uint64(buf[vs:]), ve-vs); ok {
			return m, true, nil
		}
	}
	v, err := parseValue(buf[vs:ve])
	if err != nil {
		return 0, false, err
	}
	m, ok := s.toFixed(v)
	return m, ok, nil
}

const (
	hiBits = 0x8080808080808080
	zeros  = 0x3030303030303030
)

// parseWord parses the first n (1–8) bytes of w (little endian: the field's first byte is the
// lowest) as [+-]digits[.digits] with at most F fraction digits, or returns false.
func (s *fixedSpec) parseWord(w uint64, n int) (int64, bool) {
	neg := false
	if c := byte(w); c == '-' || c == '+' {
		neg = c == '-'
		w >>= 8
		n--
	}
	if n == 0 {
		return 0, false
	}
	keep := uint64(math.MaxUint64) >> (64 - 8*n)
	w &= keep
	// Digit flags: the byte is ASCII, ≥ '0' and ≤ '9'. No carries cross bytes: every byte is
	// below 0x80 once the ASCII test passes.
	if w&hiBits != 0 {
		return 0, false
	}
	ge0 := ((w | hiBits) - zeros) & hiBits
	gt9 := (w + 0x4646464646464646) & hiBits
	other := (^(ge0 &^ gt9)) & hiBits & keep
	frac := 0
	if other != 0 {
		// Exactly one '.' is allowed.
		if other&(other-1) != 0 {
			return 0, false
		}
		k := bits.TrailingZeros64(other) >> 3
		if byte(w>>(8*k)) != '.' {
			return 0, false
		}
		frac = n - k - 1
		if frac > s.scale || n == 1 {
			return 0, false
		}
		low := uint64(1)<<(8*k) - 1
		w = w&low | (w>>8)&^low // drop the point
		n--
	}
	// n digits (1–8) in the low bytes, first digit lowest: shift them to the top so the low
	// bytes read as leading zeros, then combine pairs, quads, octets (three multiplies).
	v := (w - zeros&(uint64(math.MaxUint64)>>(64-8*n))) << (64 - 8*n)
	v = (v * 10) + (v >> 8)
	v = (((v & 0x000000FF000000FF) * (100 + (1000000 << 32))) +
		(((v >> 16) & 0x000000FF000000FF) * (1 + (10000 << 32)))) >> 32
	m := int64(v) * s.mul[frac]
	if m > s.lim {
		return 0, false
	}
	if neg {
		m = -m
	}
	return m, true
}
