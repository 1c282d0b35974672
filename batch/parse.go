package batch

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/slide-metrics/slide/internal/rfc3339"
)

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// ParseFloat parses b as a decimal or hexadecimal floating-point number with exactly the
// semantics of strconv.ParseFloat(string(b), 64): same accepted inputs, same bits, same errors
// (wrapping strconv.ErrSyntax or strconv.ErrRange). Plain decimals, [+-]digits[.digits] whose
// digits form an integer up to 2^53 with at most 22 of them after the point, take a fast path
// that allocates nothing; everything else (exponents, long mantissas, inf, nan, hex) goes to
// strconv.
func ParseFloat(b []byte) (float64, error) {
	if f, ok := parseDecimal(b); ok {
		return f, nil
	}
	return strconv.ParseFloat(string(b), 64)
}

// parseDecimal is Clinger's fast path: when the digits form an integer m ≤ 2^53 and there are
// d ≤ 22 of them after the point, both m and 10^d are exact float64 values, so the one IEEE
// division m / 10^d is the correctly rounded result, which is what strconv returns too.
func parseDecimal(b []byte) (float64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, b = b[0] == '-', b[1:]
	}
	if len(b) == 0 || len(b) > 20 { // > 19 digits could overflow uint64: leave it to strconv
		return 0, false
	}
	var m uint64
	dot := -1
	for i, c := range b {
		if d := c - '0'; d < 10 {
			m = m*10 + uint64(d)
		} else if c == '.' && dot < 0 {
			dot = i
		} else {
			return 0, false
		}
	}
	frac := 0
	if dot >= 0 {
		frac = len(b) - dot - 1
		if len(b) == 1 || len(b) == 20 { // "." alone, or 20 digits
			return 0, false
		}
	} else if len(b) == 20 {
		return 0, false
	}
	if m > 1<<53 || frac >= len(pow10) {
		return 0, false
	}
	f := float64(m) / pow10[frac]
	if neg {
		f = -f
	}
	return f, true
}

// ErrTime is wrapped by ParseTime errors.
var ErrTime = errors.New("not a timestamp (want unix milliseconds or RFC 3339)")

// ParseTime parses a row timestamp into unix milliseconds: either an integer count of
// milliseconds since the epoch ([+-]digits) or an RFC 3339 time ("2025-11-30T08:00:00.123Z",
// "…+07:00"), truncated to the millisecond toward the past (as time.Time.UnixMilli). The common
// RFC 3339 shape is parsed by hand without allocating; other shapes go through
// time.Parse(time.RFC3339Nano), so the accepted set is exactly unix ms plus what time.Parse
// accepts.
func ParseTime(b []byte) (int64, error) {
	if ms, ok := parseUnixMilli(b); ok {
		return ms, nil
	}
	if isInteger(b) { // too long for the fast path
		ms, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrTime, strconv.ErrRange)
		}
		return ms, nil
	}
	if ms, ok := rfc3339.Millis(b); ok {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return 0, ErrTime
	}
	return t.UnixMilli(), nil
}

// isInteger reports whether b is [+-]digits.
func isInteger(b []byte) bool {
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		b = b[1:]
	}
	for _, c := range b {
		if c-'0' >= 10 {
			return false
		}
	}
	return len(b) > 0
}

// parseUnixMilli parses [+-]digits that fit an int64.
func parseUnixMilli(b []byte) (int64, bool) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	if i == len(b) || len(b)-i > 18 { // 18 digits always fit; longer ones go the slow way
		return 0, false
	}
	var v int64
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c >= 10 {
			return 0, false
		}
		v = v*10 + int64(c)
	}
	if neg {
		v = -v
	}
	return v, true
}
