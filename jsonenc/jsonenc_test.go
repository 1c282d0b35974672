package jsonenc

import (
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "tenant-42", `quo"te`, `back\slash`, "new\nline\ttab\rcr", "\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "héllo wörld 日本", "\u2028\u2029", "bad\xffutf8\xc3", "emoji 🙂",
	} {
		got := AppendString(nil, s)
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.5, 87.5, 1e-7, 1.5e-9, 123456789, 1e20, 1e21, 1.7976931348623157e308, 5e-324, -3.25e-8} {
		got := AppendFloat(nil, f)
		want, _ := json.Marshal(f)
		if string(got) != string(want) {
			t.Errorf("AppendFloat(%v) = %s, want %s", f, got, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := string(AppendFloat(nil, f)); got != "null" {
			t.Errorf("AppendFloat(%v) = %s, want null", f, got)
		}
	}
}

// TestAppendFloatIntegers: the integer path writes what the shortest-float path does, at
// and around its bounds (±2^53) and for every magnitude of integers below them.
func TestAppendFloatIntegers(t *testing.T) {
	cases := []float64{1, -1, 2, 10, 999, 1e15, 1e15 + 1, -1e15, 1 << 52, 1<<53 - 1, -(1<<53 - 1), 1 << 53, 1<<53 + 2, -(1 << 53), 1e20, 123456789012345, math.Copysign(0, -1), 0.5, -7.25}
	for v := 1.0; v < 1<<53; v = v*3 + 1 {
		cases = append(cases, v, -v, v-1)
	}
	for _, f := range cases {
		got := AppendFloat(nil, f)
		want, _ := json.Marshal(f)
		if string(got) != string(want) {
			t.Errorf("AppendFloat(%v) = %s, encoding/json %s", f, got, want)
		}
	}
}

// FuzzAppendString checks that any string is written as valid JSON that reads back as the
// same string (after the U+FFFD replacement of invalid UTF-8 that encoding/json also does).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"tenant-42", "latency_ms", `a"b\c`, "\x00\n", "bad\xff", "日本\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, b, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("round trip of %q gave %q", s, back)
		}
		want, _ := json.Marshal(s)
		if string(b) != string(want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json says %s", s, b, want)
		}
	})
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, 87.5, 1e-7, 1e21, -2.5e-300, 15050, 1<<53 - 1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		b := AppendFloat(nil, v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if string(b) != "null" {
				t.Fatalf("AppendFloat(%v) = %s, want null", v, b)
			}
			return
		}
		var back float64
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Fatalf("AppendFloat(%v) = %s, read back %v, %v", v, b, back, err)
		}
		if want, _ := json.Marshal(v); string(b) != string(want) {
			t.Fatalf("AppendFloat(%v) = %s, encoding/json %s", v, b, want)
		}
	})
}
