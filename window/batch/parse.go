package batch

import (
	"errors"
	"fmt"
	"strconv"
	"time"
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
	if ms, ok := parseRFC3339(b); ok {
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

// parseRFC3339 parses YYYY-MM-DDTHH:MM:SS[.f…]Z or …±HH:MM with the field ranges time.Parse
// enforces; anything else returns false and is left to time.Parse.
func parseRFC3339(b []byte) (int64, bool) {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	year, ok1 := num(b[0:4])
	month, ok2 := num(b[5:7])
	day, ok3 := num(b[8:10])
	hour, ok4 := num(b[11:13])
	minute, ok5 := num(b[14:16])
	sec, ok6 := num(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	rest := b[19:]
	var ms int64
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n]-'0' < 10 {
			if n <= 3 {
				ms = ms*10 + int64(rest[n]-'0')
			}
			n++
		}
		if n == 1 || n > 10 { // 1–9 fraction digits
			return 0, false
		}
		for d := n - 1; d < 3; d++ {
			ms *= 10
		}
		rest = rest[n:]
	}
	var off int64
	switch {
	case len(rest) == 1 && rest[0] == 'Z':
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := num(rest[1:3])
		om, ok2 := num(rest[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		off = (oh*60 + om) * 60
		if rest[0] == '-' {
			off = -off
		}
	default:
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + hour*3600 + minute*60 + sec - off
	return secs*1000 + ms, true
}

// num parses a run of ASCII digits.
func num(b []byte) (int64, bool) {
	var v int64
	for _, c := range b {
		if c-'0' >= 10 {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

func daysIn(month, year int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian date (Howard
// Hinnant's algorithm), valid for years 0–9999.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
