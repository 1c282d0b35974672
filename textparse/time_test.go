package textparse

import (
	"regexp"
	"testing"
	"time"
)

// strict is the shape RFC3339Millis takes; time.Parse also accepts looser forms (one-digit
// hours, comma fractions, offsets of 24 h and more) that the package refuses.
var strict = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$`)

func check(t *testing.T, s string) {
	ms, ok := RFC3339Millis([]byte(s))
	tm, err := time.Parse(time.RFC3339Nano, s)
	if ok && (err != nil || tm.UnixMilli() != ms) {
		t.Fatalf("RFC3339Millis(%q) = %d; time.Parse = %d, %v", s, ms, tm.UnixMilli(), err)
	}
	if !ok && err == nil && strict.MatchString(s) {
		t.Fatalf("RFC3339Millis(%q) refused a strict RFC 3339 time that time.Parse reads as %v", s, tm)
	}
}

func TestRFC3339Millis(t *testing.T) {
	for _, s := range []string{
		"2025-11-30T08:00:00Z", "2025-11-30T08:00:00.123Z", "2025-11-30T08:00:00.1Z", "2025-11-30T08:00:00.123456789123Z",
		"2025-11-30T15:00:00+07:00", "2025-11-30T01:00:00-07:00", "1969-12-31T23:59:59.999Z", "0000-01-01T00:00:00Z",
		"9999-12-31T23:59:59.999999999Z", "2024-02-29T00:00:00Z", "2025-02-29T00:00:00Z", "2025-13-01T00:00:00Z",
		"2025-11-30T24:00:00Z", "2025-11-30T08:00:00.Z", "2025-11-30T08:00:00+24:00", "2025-11-30 08:00:00Z", "x",
	} {
		check(t, s)
	}
	if ms, ok := RFC3339Millis([]byte("1969-12-31T23:59:59.9995Z")); !ok || ms != -1 {
		t.Fatalf("a time before the epoch truncates toward the past: %d %v, want -1", ms, ok)
	}
}

func FuzzRFC3339Millis(f *testing.F) {
	for _, s := range []string{"2025-11-30T08:00:00.123Z", "2025-11-30T15:00:00+07:00", "0000-01-01T00:00:00Z", "2025-02-29T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(check)
}
