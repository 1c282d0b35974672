package batch

import (
	"errors"
	"math"
	"testing"

	"github.com/slide-metrics/slide/textparse"
)

// floatSeeds are also the fixed-point parser's seeds (fixed_test.go). ParseFloat and
// ParseTime are textparse's, whose tests and fuzz targets hold them to strconv and RFC 3339;
// here batch's names are held to answer exactly as textparse does.
var floatSeeds = []string{
	"0", "-0", "+0", "1", "500500", "774.62", "-12.5", ".5", "5.", ".", "", "-", "+",
	"0.1", "0.2", "0.3", "123456789012345678", "9007199254740993", "9007199254740992",
	"12345678901234567890", "1.7976931348623157e308", "1e400", "-1e400", "4.9e-324", "1e-400",
	"NaN", "nan", "Inf", "-Inf", "+infinity", "0x1p-2", "0x1.8p1", "1_000", "1e5", "1E5",
	"00012.50", "0.0000000000000000000001", "0.00000000000000000000001", "1..2", "1.2.3",
	" 1", "1 ", "abc", "1,5", "−1",
}

func TestParseIsTextparse(t *testing.T) {
	for _, s := range floatSeeds {
		got, gerr := ParseFloat([]byte(s))
		want, werr := textparse.ParseFloat([]byte(s))
		if (gerr == nil) != (werr == nil) || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("ParseFloat(%q) = %v, %v; textparse %v, %v", s, got, gerr, want, werr)
		}
	}
	for _, s := range []string{"1764489600123", "2025-11-30T15:00:00.5+07:00", "2025-11-30 08:00:00Z", "1.5", ""} {
		got, gerr := ParseTime([]byte(s))
		want, werr := textparse.ParseTime([]byte(s))
		if (gerr == nil) != (werr == nil) || got != want {
			t.Errorf("ParseTime(%q) = %d, %v; textparse %d, %v", s, got, gerr, want, werr)
		}
		if gerr != nil && !errors.Is(gerr, ErrTime) {
			t.Errorf("ParseTime(%q) err %v does not wrap ErrTime", s, gerr)
		}
	}
}
