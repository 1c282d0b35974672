// Package rfc3339 parses the common RFC 3339 timestamp shape to unix milliseconds without
// allocating, for the event decoder and the batch readers alike.
package rfc3339

// Millis parses "2006-01-02T15:04:05[.frac](Z|±hh:mm)" to unix milliseconds, truncated
// toward the past as time.Time.UnixMilli does. It applies time.Parse's checks: fields in
// range, the day valid for its month, offsets below 24 h; a fraction may have any number of
// digits, of which the first three count. Any other shape returns false; callers that want
// time.Parse's looser forms fall back to it.
func Millis(b []byte) (int64, bool) {
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
