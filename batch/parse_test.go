package batch

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

// floatSeeds are also the fixed-point parser's seeds; textparse holds ParseFloat's own tests
// and fuzz target, these check batch's use of it.
var floatSeeds = []string{
	"0", "-0", "+0", "1", "500500", "774.62", "-12.5", ".5", "5.", ".", "", "-", "+",
	"0.1", "0.2", "0.3", "123456789012345678", "9007199254740993", "9007199254740992",
	"12345678901234567890", "1.7976931348623157e308", "1e400", "-1e400", "4.9e-324", "1e-400",
	"NaN", "nan", "Inf", "-Inf", "+infinity", "0x1p-2", "0x1.8p1", "1_000", "1e5", "1E5",
	"00012.50", "0.0000000000000000000001", "0.00000000000000000000001", "1..2", "1.2.3",
	" 1", "1 ", "abc", "1,5", "−1",
}

func sameFloat(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}

// checkFloat asserts ParseFloat agrees with strconv.ParseFloat: same acceptance, same bits.
func checkFloat(t *testing.T, s string) {
	t.Helper()
	got, gerr := ParseFloat([]byte(s))
	want, werr := strconv.ParseFloat(s, 64)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("ParseFloat(%q) err = %v, strconv err = %v", s, gerr, werr)
	}
	if werr == nil && !sameFloat(got, want) {
		t.Fatalf("ParseFloat(%q) = %v (%#x), strconv = %v (%#x)", s, got, math.Float64bits(got), want, math.Float64bits(want))
	}
	if werr != nil && !errors.Is(gerr, strconv.ErrSyntax) && !errors.Is(gerr, strconv.ErrRange) {
		t.Fatalf("ParseFloat(%q) err = %v, want a strconv error", s, gerr)
	}
}

func TestParseFloatMatchesStrconv(t *testing.T) {
	for _, s := range floatSeeds {
		checkFloat(t, s)
	}
	// Every cents value and many decimals of the shapes the fast path takes.
	for c := 0; c < 100_000; c++ {
		checkFloat(t, strconv.Itoa(c/100)+"."+strconv.Itoa(c/10%10)+strconv.Itoa(c%10))
	}
}

func TestParseFloatAllocatesNothing(t *testing.T) {
	b := []byte("774.62")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseFloat(b) }); n != 0 {
		t.Fatalf("ParseFloat fast path: %v allocs", n)
	}
}

func TestParseTime(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1764489600123", 1764489600123, true},
		{"-5", -5, true},
		{"+7", 7, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"9223372036854775808", 0, false},
		{"2025-11-30T08:00:00Z", 1764489600000, true},
		{"2025-11-30T08:00:00.123Z", 1764489600123, true},
		{"2025-11-30T08:00:00.1239Z", 1764489600123, true},
		{"2025-11-30T15:00:00.5+07:00", 1764489600500, true},
		{"2025-11-30T03:30:00-04:30", 1764489600000, true},
		{"1969-12-31T23:59:59.999Z", -1, true},
		{"2024-02-29T00:00:00Z", 1709164800000, true},
		{"2023-02-29T00:00:00Z", 0, false},
		{"2025-11-30 08:00:00Z", 0, false},
		{"2025-11-30T24:00:00Z", 0, false},
		{"yesterday", 0, false},
		{"", 0, false},
		{"1.5", 0, false},
	}
	for _, c := range cases {
		got, err := ParseTime([]byte(c.in))
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseTime(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrTime) {
			t.Errorf("ParseTime(%q) err %v does not wrap ErrTime", c.in, err)
		}
	}
}
