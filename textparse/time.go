package textparse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ErrTime is wrapped by ParseTime's errors.
var ErrTime = errors.New("not a timestamp (want unix milliseconds or RFC 3339)")

// ParseTime parses a timestamp into unix milliseconds by the one rule of the package doc:
// an integer count of milliseconds since the epoch ([+-]digits, within int64), or RFC 3339
// text as RFC3339Millis takes it. Nothing else: there is no time.Parse fallback. An integer
// out of range wraps strconv.ErrRange as well as ErrTime. It allocates only for an error.
func ParseTime(b []byte) (int64, error) {
	if ms, ok := Millis(b); ok {
		return ms, nil
	}
	if _, _, isInt := parseInt(b); isInt {
		return 0, fmt.Errorf("%w: %w", ErrTime, strconv.ErrRange)
	}
	return 0, ErrTime
}

// Millis is ParseTime without the error: ok is false for what ParseTime refuses.
func Millis(b []byte) (int64, bool) {
	if ms, ok, isInt := parseInt(b); isInt {
		return ms, ok
	}
	return RFC3339Millis(b)
}

// parseInt parses [+-]digits into an int64; isInt reports the shape, ok that it fits.
func parseInt(b []byte) (v int64, ok, isInt bool) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	n := len(b) - i
	if n == 0 {
		return 0, false, false
	}
	var u uint64
	if n >= 8 && n <= 16 { // two parse8 words; the second overlaps the first, masked off
		hi := binary.LittleEndian.Uint64(b[i:])
		lo := binary.LittleEndian.Uint64(b[len(b)-8:])
		if nonDigits(hi)|nonDigits(lo) != 0 {
			return 0, false, false
		}
		u = parse8(hi)*pow10u[n-8] + parse8(lo&^(1<<(8*(16-n))-1))
	} else {
		for j := i; j < len(b); j++ {
			d := uint64(b[j] - '0')
			if d >= 10 {
				return 0, false, false
			}
			if j-i >= 19 && u > (math.MaxUint64-d)/10 {
				return 0, false, skipDigits(b, j) == len(b) // all digits: out of range
			}
			u = u*10 + d
		}
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), true, true // -(1<<63) wraps to itself, the minimum
	case !neg && u <= math.MaxInt64:
		return int64(u), true, true
	}
	return 0, false, true
}

// RFC3339Millis parses "2006-01-02T15:04:05[.frac](Z|±hh:mm)" to unix milliseconds, truncated
// toward the past as time.Time.UnixMilli does, without allocating. It applies time.Parse's
// checks: fields in range, the day valid for its month, offsets below 24 h; a fraction may
// have any number of digits, of which the first three count. Any other shape (the looser
// forms time.Parse also takes: one-digit fields, comma fractions, offsets of 24 h and more,
// a lower-case t or z) returns false.
func RFC3339Millis(b []byte) (int64, bool) {
	if len(b) < len("2006-01-02T15:04:05Z") || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
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
		if n == 1 {
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
