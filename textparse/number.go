package textparse

import (
	"math"
	"strconv"
)

// MaxPow10 is the largest n for which 10^n is an exact float64.
const MaxPow10 = 22

// pow10 holds the powers of ten that float64 represents exactly: the package's one table.
var pow10 = [MaxPow10 + 1]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// Pow10 returns 10^n, exactly, for 0 ≤ n ≤ MaxPow10.
func Pow10(n int) float64 { return pow10[n] }

// Pow10Table returns the table itself, 10^0 … 10^MaxPow10, for callers that index it in a
// hot loop (batch's fixed-point and Parquet DECIMAL paths). It is shared: do not modify it.
func Pow10Table() []float64 { return pow10[:] }

// ParseFloat parses b as a floating-point number with exactly the semantics of
// strconv.ParseFloat(string(b), 64): the same accepted inputs, the same bits, the same
// errors (wrapping strconv.ErrSyntax or strconv.ErrRange). A JSON number literal is one of
// its inputs, with encoding/json's value. The common shapes ([+-]digits[.digits][e±digits]
// with at most 19 significant digits) take Clinger's fast path: when the digits form an
// integer m ≤ 2^53 and the decimal exponent e has |e| ≤ 22, m and 10^|e| are exact float64
// values and the one IEEE multiplication or division is the correctly rounded result, which
// is what strconv returns too. The fast path allocates nothing; the rest goes to strconv.
func ParseFloat(b []byte) (float64, error) {
	if f, ok := parseFloatFast(b); ok {
		return f, nil
	}
	return strconv.ParseFloat(string(b), 64)
}

func parseFloatFast(b []byte) (float64, bool) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	var mant uint64
	nd, nf := 0, 0 // digits, and digits after the point
	for ; i < len(b) && b[i]-'0' < 10; i++ {
		mant = mant*10 + uint64(b[i]-'0')
		nd++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i]-'0' < 10; i++ {
			mant = mant*10 + uint64(b[i]-'0')
			nf++
		}
	}
	if nd+nf == 0 || nd+nf > 19 { // no digits, or a mantissa that may have wrapped
		return 0, false
	}
	exp := -nf
	if i < len(b) {
		if b[i] != 'e' && b[i] != 'E' {
			return 0, false
		}
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		if i == len(b) {
			return 0, false
		}
		e := 0
		for ; i < len(b); i++ {
			c := b[i] - '0'
			if c >= 10 || e > 10000 {
				return 0, false
			}
			e = e*10 + int(c)
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if mant == 0 {
		if neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	if mant > 1<<53 || exp < -MaxPow10 || exp > MaxPow10 {
		return 0, false
	}
	f := float64(mant)
	if exp < 0 {
		f /= pow10[-exp]
	} else {
		f *= pow10[exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// ParseUint parses digits (no sign) into a uint64; ok is false for any other shape or a
// value out of range. A JSON integer literal that is not negative is one of its inputs.
func ParseUint(b []byte) (uint64, bool) { return digitsValue(b) }

// ParseInt parses [+-]digits into an int64; ok is false for any other shape or a value out
// of range. A JSON integer literal is one of its inputs.
func ParseInt(b []byte) (int64, bool) {
	v, ok, _ := parseInt(b)
	return v, ok
}
