package batch

import (
	"fmt"

	"github.com/slide-metrics/slide/textparse"
)

// pow10 is textparse's table of the powers of ten that float64 represents exactly (the one
// table, shared: read only).
var pow10 = textparse.Pow10Table()

// ParseFloat parses b as a decimal or hexadecimal floating-point number with exactly the
// semantics of strconv.ParseFloat(string(b), 64): same accepted inputs, same bits, same errors
// (wrapping strconv.ErrSyntax or strconv.ErrRange). It is textparse.ParseFloat: the common
// decimal shapes take a fast path that allocates nothing; the rest goes to strconv.
func ParseFloat(b []byte) (float64, error) { return textparse.ParseFloat(b) }

// ErrTime is wrapped by ParseTime errors.
var ErrTime = textparse.ErrTime

// ParseTime parses a row timestamp into unix milliseconds by textparse's one rule: either an
// integer count of milliseconds since the epoch ([+-]digits) or RFC 3339 text in the strict
// shape ("2025-11-30T08:00:00.123Z", "…+07:00"), truncated to the millisecond toward the past
// (as time.Time.UnixMilli). Nothing else: the looser forms time.Parse also takes are refused,
// as the event decoder refuses them. It allocates nothing but for an error.
//
// A time outside the years 0000 to 9999 is refused too (ErrTimeRange): a column of unix
// microseconds or nanoseconds, as many exports write, read as milliseconds would put every
// row tens of thousands of years ahead and every window a row or two wide, a wrong answer
// with no error (and start_time/end_time RFC 3339 cannot write).
func ParseTime(b []byte) (int64, error) {
	ms, err := textparse.ParseTime(b)
	if err == nil && (ms < minMillis || ms > maxMillis) {
		return 0, ErrTimeRange
	}
	return ms, err
}

// The unix ms of 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: RFC 3339's years.
const minMillis, maxMillis = -62_167_219_200_000, 253_402_300_799_999

// ErrTimeRange wraps ErrTime for a time outside RFC 3339's years.
var ErrTimeRange = fmt.Errorf("%w: outside the years 0000-9999 as unix ms (microseconds or nanoseconds?)", ErrTime)
