package textparse

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Fast paths: for a caller that reads one fixed shape of compact object itself (the event
// decoder) and falls back to the Scanner for anything else, these read one token at
// b[i] and convert it in the same pass. Each takes only a subset of what the Scanner and the
// converters take, and on that subset it answers exactly as they do (the same bits); for
// anything else it returns −1 and the caller's fallback decides. None allocates or panics.
// FuzzFast holds them to the Scanner and the converters.

// plainStops flags (high bit of the byte) the bytes of w that end a plain string's run: a
// quote, a backslash, a control byte, DEL or a byte ≥ 0x80. The quote, backslash and control
// tests are scanString's has-zero-byte tricks; 0x7f + 1 sets the high bit of DEL's byte. The
// borrows and carries of these sums only flag bytes above a true stop, so the lowest flag
// is exact.
func plainStops(w uint64) uint64 {
	q, bs := w^(lo8*'"'), w^(lo8*'\\')
	return (((q - lo8) &^ q) | ((bs - lo8) &^ bs) | ((w - lo8*0x20) &^ w) | (w + lo8) | w) & hi8
}

// Quotes flags (high bit of the byte) the quotes among w's bytes; the lowest flag is exact
// (a borrow flags only bytes above a true quote).
func Quotes(w uint64) uint64 {
	q := w ^ (lo8 * '"')
	return (q - lo8) &^ q & hi8
}

// PlainString returns the index of the closing quote of the JSON string whose contents start
// at b[i] (just after its opening quote) when the contents are printable ASCII without
// escapes (bytes 0x20–0x7e but the quote and the backslash), or −1 for any other string or
// an unterminated one. Such a string is valid JSON and valid UTF-8, free of control bytes and
// DEL, and is its own unquoted value. It looks at eight bytes at a time.
func PlainString(b []byte, i int) int {
	for i+8 <= len(b) {
		if stop := plainStops(binary.LittleEndian.Uint64(b[i:])); stop != 0 {
			i += bits.TrailingZeros64(stop) >> 3
			if b[i] == '"' {
				return i
			}
			return -1
		}
		i += 8
	}
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i
		case c < 0x20 || c >= 0x7f || c == '\\':
			return -1
		}
	}
	return -1
}

// PlainName is PlainString for a short string, which it also returns as two words: lo and hi
// are the contents' first eight bytes and the next eight, little-endian, zero past the end
// (so that for contents of at most 16 bytes the words and the length are the contents).
// When b holds 16 bytes from i it reads them as two words and scans both at once; a string
// of more than 16 bytes, or too near the end of b, returns the words as zero, and end as
// PlainString's.
func PlainName(b []byte, i int) (end int, lo, hi uint64) {
	if i < 0 || i+16 > len(b) {
		return PlainString(b, i), 0, 0
	}
	lo, hi = binary.LittleEndian.Uint64(b[i:]), binary.LittleEndian.Uint64(b[i+8:])
	s0, s1 := plainStops(lo), plainStops(hi)
	var n int
	switch {
	case s0 != 0:
		n = bits.TrailingZeros64(s0) >> 3
		lo, hi = lo&(1<<(8*n&63)-1), 0
	case s1 != 0:
		n = bits.TrailingZeros64(s1) >> 3
		hi &= 1<<(8*n&63) - 1
		n += 8
	default:
		return PlainString(b, i+16), 0, 0
	}
	if b[i+n] != '"' {
		return -1, 0, 0
	}
	return i + n, lo, hi
}

// digitRun returns how many of w's bytes, from the lowest, are ASCII digits (8 for all).
func digitRun(w uint64) int {
	return bits.TrailingZeros64(nonDigits(w)) >> 3
}

// load8 returns the eight bytes of b from i as a little-endian word, zero past b's end, for
// 0 ≤ i < len(b) and len(b) ≥ 8: a number at the end of an object ends a few bytes before it.
func load8(b []byte, i int) uint64 {
	if i+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[i:])
	}
	return binary.LittleEndian.Uint64(b[len(b)-8:]) >> (8 * uint(i+8-len(b)) & 63)
}

// Integer reads the JSON integer literal at b[i], -?(0|[1-9][0-9]*) with at most 16 digits
// and not followed by a fraction, an exponent or another digit, and returns its value and
// the index after it; end is −1 for anything else (not JSON, or longer: ParseInt's). On what
// it takes it agrees with ParseInt, ParseUint (when not negative) and Millis. Two words of
// digits are converted by parse8 each.
func Integer(b []byte, i int) (v int64, end int) {
	if i >= len(b) || len(b) < 8 {
		return 0, -1
	}
	neg := b[i] == '-'
	if neg {
		if i++; i >= len(b) {
			return 0, -1
		}
	}
	w := load8(b, i)
	n := digitRun(w)
	var u uint64
	if n < 8 {
		if n == 0 {
			return 0, -1
		}
		u = parse8(w << (8 * uint(8-n) & 63)) // the digits high, zero bytes as leading zeros
	} else {
		if i+8 >= len(b) {
			return 0, -1
		}
		w2 := load8(b, i+8)
		m := digitRun(w2)
		if m == 8 && i+16 < len(b) && b[i+16]-'0' < 10 {
			return 0, -1 // more than 16 digits
		}
		if m == 0 {
			w2 = 0 // (8 - m) bytes of shift would be 64
		}
		u = parse8(w)*pow10u[m] + parse8(w2<<(8*uint(8-m)&63))
		n += m
	}
	j := i + n
	if (b[i] == '0' && n > 1) || (j < len(b) && (b[j] == '.' || b[j]|0x20 == 'e')) {
		return 0, -1 // a leading zero (not JSON), a fraction or an exponent
	}
	if neg {
		return -int64(u), j
	}
	return int64(u), j
}

// Float reads the JSON number at b[i] and returns ParseFloat's value of it and the index
// after it; end is −1 when b[i:] does not start with a JSON number (or with one that is not
// followed by a delimiter: a digit after a leading zero) or when ParseFloat refuses it (out
// of range). Short decimals take Decimal's word-at-a-time path; the rest are found by the
// Scanner's own number scan and converted by ParseFloat itself, so the bits are the same.
func Float(b []byte, i int) (f float64, end int) {
	if f, end = Decimal(b, i); end >= 0 {
		return f, end
	}
	if i < 0 || i >= len(b) || (b[i] != '-' && b[i]-'0' >= 10) {
		return 0, -1
	}
	j, _ := scanNumber(b, i)
	if j < 0 || (j < len(b) && b[j]-'0' < 10) {
		return 0, -1
	}
	f, err := ParseFloat(b[i:j])
	if err != nil {
		return 0, -1
	}
	return f, j
}

// Decimal reads the JSON number at b[i] when it is short, -?int[.frac] with at most seven
// digits and no exponent, and returns its value, bit for bit ParseFloat's, and the index
// after it; end is −1 for anything else (not JSON, an exponent, or longer: ParseFloat's).
// Its digits form an integer m < 10^7 and the fraction has k ≤ 6 digits, so m and 10^k are
// exact float64s and m ÷ 10^k is the one correctly rounded division that ParseFloat's exact
// path also computes. The digits are found and converted a word at a time: the integer
// part's bytes and the fraction's are joined into one run of digits for parse8.
func Decimal(b []byte, i int) (f float64, end int) {
	if i >= len(b) || len(b) < 8 {
		return 0, -1
	}
	neg := b[i] == '-'
	if neg {
		if i++; i >= len(b) {
			return 0, -1
		}
	}
	w := load8(b, i)
	p := digitRun(w) // the integer part's digits
	if p == 0 || p == 8 || (p > 1 && b[i] == '0') {
		return 0, -1 // not a number, long, or a leading zero (not JSON)
	}
	digits, n, k := w&(1<<(8*uint(p)&63)-1), p, 0
	if i+p < len(b) && b[i+p] == '.' {
		fw := w >> 8 >> (8 * uint(p) & 63) // the fraction's bytes, zero past the word
		if k = digitRun(fw); k == 0 || p+1+k == 8 {
			return 0, -1 // no fraction digits (not JSON), or a fraction that may go on
		}
		digits |= (fw & (1<<(8*uint(k)&63) - 1)) << (8 * uint(p) & 63)
		n += k
		p += 1 + k
	}
	j := i + p
	if j < len(b) && b[j]|0x20 == 'e' {
		return 0, -1
	}
	m := parse8(digits << (8 * uint(8-n) & 63))
	if m == 0 {
		if neg {
			return math.Copysign(0, -1), j
		}
		return 0, j
	}
	f = float64(m) / pow10[k]
	if neg {
		f = -f
	}
	return f, j
}

// Digits16 converts the run of ASCII digits that starts the sixteen bytes w0, w1 (little-endian,
// w0 first): it returns the run's value and length n, 0 for none and 16 when the run fills
// both words and may go on (then v is not set). A caller that knows its number starts there
// (the event decoder's ts at a fixed offset) reads it in a few operations; it checks the
// sign, a leading zero and what follows the run itself.
func Digits16(w0, w1 uint64) (v uint64, n int) {
	if n = digitRun(w0); n < 8 {
		return parse8(w0 << (8 * uint(8-n) & 63)), n // v not set for n = 0
	}
	m := digitRun(w1)
	if m == 8 {
		return 0, 16
	}
	return parse8(w0)*pow10u[m&7] + parse8(w1<<8<<(8*uint(7-m)&63)), 8 + m // two shifts: 64 for m = 0
}

// Decimal8 converts the text that is exactly the first n bytes of w (1 ≤ n ≤ 8, little-endian,
// the bytes above ignored) when it is a JSON number -?int[.frac] without exponent, bit for bit
// as ParseFloat: at most eight digits, so the one division m ÷ 10^k is exact as in Decimal.
// ok is false for any other text (not such a number, or not JSON: a leading zero, a lone
// point): the caller's fallback decides. A caller that knows where its number ends (the
// event decoder: the value before the line's closing brace) reads it as one word.
func Decimal8(w uint64, n int) (f float64, ok bool) {
	if n < 1 || n > 8 {
		return 0, false
	}
	neg := byte(w) == '-'
	if neg {
		w >>= 8
		n--
	}
	keep := ^uint64(0) >> ((64 - 8*uint(n)) & 63) // n bytes; (n = 0 is refused below)
	w &= keep
	nd := nonDigits(w) & hi8 & keep
	if n == 0 || byte(w) == '.' {
		return 0, false
	}
	k := 0 // fraction digits
	if nd != 0 {
		dot := bits.TrailingZeros64(nd) >> 3
		if nd&(nd-1) != 0 || byte(w>>(8*uint(dot)&63)) != '.' || dot == n-1 {
			return 0, false // two non-digits, one that is not a point, or no fraction digits
		}
		if dot > 1 && byte(w) == '0' {
			return 0, false // a leading zero
		}
		k = n - 1 - dot
		w = w&(1<<(8*uint(dot)&63)-1) | w>>(8*uint(dot+1)&63)<<(8*uint(dot)&63) // the point taken out (dot ≤ 6)
		n--
	} else if n > 1 && byte(w) == '0' {
		return 0, false // a leading zero
	}
	m := parse8(w << (8 * uint(8-n) & 63))
	f = float64(m) / pow10[k&31] // 0 ÷ 10^k is +0, and −0 once negated, as ParseFloat says
	if neg {
		f = -f
	}
	return f, true
}

// Resume continues a scan of b at b[i], just after a member's value, for a caller that read
// the object's opening and its members before i itself and found them valid (as the event
// decoder's fast path does before it hands a line over): the next Next reads the separator
// there as after a member of its own. b must be shorter than 2 GiB.
func (s *Scanner) Resume(b []byte, i int) {
	s.b, s.i, s.state, s.what = b, i, stMembers, ""
	s.Name, s.Value, s.Field = Value{}, Value{}, -1
}

// ScanString validates the JSON string whose contents start at b[i] (just after its opening
// quote) as the Scanner does and returns the index of its closing quote, or −1, and whether
// it has escapes or non-ASCII bytes (Value.Escaped: Unquote decodes it).
func ScanString(b []byte, i int) (end int, escaped bool) {
	if i < 0 || i > len(b) {
		return -1, false
	}
	return scanString(b, i)
}

// MemberName reads the member name at b[i] (its opening quote) and the colon after it as
// Next reads them, for a caller that walks an object itself: it returns the name's index in
// the names given to SetNames (matched exactly, after unescaping, as Field) or −1, and the
// index of the member's value, whitespace skipped; end is −1 when b[i:] does not start with
// a valid name and a colon. It leaves the name in Name.
func (s *Scanner) MemberName(b []byte, i int) (field, end int) {
	if i < 0 || i >= len(b) || b[i] != '"' || len(b) >= math.MaxInt32 {
		return -1, -1
	}
	j, esc := scanString(b, i+1)
	if j < 0 {
		return -1, -1
	}
	s.Name = Value{Start: int32(i + 1), End: int32(j), Kind: String, Escaped: esc}
	field = s.field(b)
	if i = j + 1; i < len(b) && b[i] <= ' ' {
		i = SkipSpace(b, i)
	}
	if i >= len(b) || b[i] != ':' {
		return -1, -1
	}
	if i++; i < len(b) && b[i] <= ' ' {
		i = SkipSpace(b, i)
	}
	return field, i
}

// SkipValue validates the JSON value at b[i] as Next validates a member's value (strings
// with their escapes, numbers, literals, nested objects and arrays to MaxNesting, the object
// being walked counted as one level) and returns the index after it, or −1 for anything
// that is not a JSON value; the NaN and Infinity tokens are refused whatever AllowNaN says.
func (s *Scanner) SkipValue(b []byte, i int) int {
	s.tooDeep = false
	if i < 0 || i >= len(b) || len(b) >= math.MaxInt32 {
		return -1
	}
	switch c := b[i]; {
	case c == '"': // the common unknown member: a string or a number, inline
		j, _ := scanString(b, i+1)
		if j < 0 {
			return -1
		}
		return j + 1
	case c-'0' < 10:
		j, _ := scanNumber(b, i)
		return j
	}
	_, j, _ := s.value(b, i, false)
	return j
}
