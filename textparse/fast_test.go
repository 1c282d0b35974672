package textparse

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// refNumber is what the Scanner says of the token at b[i]: the end of a JSON number there
// (−1 if none) and whether it is an integer literal.
func refNumber(b []byte, i int) (end int, integer bool) {
	if i >= len(b) || (b[i] != '-' && b[i]-'0' >= 10) {
		return -1, false
	}
	return scanNumber(b, i)
}

// checkFast holds Integer, Decimal, Float, PlainString and PlainName at b[i] to the scanner's
// own number and string scans and to ParseInt, ParseUint, Millis and ParseFloat: whatever a
// fast reader takes, it takes as they do; -1 only where the caller's fallback must decide.
func checkFast(t *testing.T, b []byte, i int) {
	t.Helper()
	end, integer := refNumber(b, i)
	// A number the Scanner would report: scanNumber's end, and no digit right after (the
	// Scanner then fails with "expected , or }", as after a leading zero).
	numOK := end >= 0 && !(end < len(b) && b[end]-'0' < 10)
	if v, j := Integer(b, i); j >= 0 {
		if !numOK || j != end || !integer {
			t.Fatalf("Integer(%q, %d) = %d, %d; scanner: end %d integer %v", b, i, v, j, end, integer)
		}
		lit := b[i:j]
		if want, ok := ParseInt(lit); !ok || want != v {
			t.Fatalf("Integer(%q) = %d, ParseInt %d %v", lit, v, want, ok)
		}
		if want, ok := Millis(lit); !ok || want != v {
			t.Fatalf("Integer(%q) = %d, Millis %d %v", lit, v, want, ok)
		}
		if u, ok := ParseUint(lit); (v >= 0 && lit[0] != '-') != ok || (ok && int64(u) != v) {
			t.Fatalf("Integer(%q) = %d, ParseUint %d %v", lit, v, u, ok)
		}
	}
	for _, fast := range []struct {
		name string
		fn   func([]byte, int) (float64, int)
	}{{"Decimal", Decimal}, {"Float", Float}} {
		f, j := fast.fn(b, i)
		if j < 0 {
			continue
		}
		if !numOK || j != end {
			t.Fatalf("%s(%q, %d) = %v, %d; scanner: end %d", fast.name, b, i, f, j, end)
		}
		want, err := ParseFloat(b[i:j])
		if err != nil || math.Float64bits(want) != math.Float64bits(f) {
			t.Fatalf("%s(%q) = %v (%#x), ParseFloat %v (%#x) %v", fast.name, b[i:j], f, math.Float64bits(f), want, math.Float64bits(want), err)
		}
	}
	if _, j := Float(b, i); j < 0 && numOK {
		if _, err := ParseFloat(b[i:end]); err == nil {
			t.Fatalf("Float(%q, %d) refused %q, which ParseFloat takes", b, i, b[i:end])
		}
	}
	// Digits16 and Decimal8 on the words at i: they take what the Scanner and ParseFloat take.
	var buf [24]byte
	copy(buf[:], b[min(i, len(b)):])
	w0, w1 := binary.LittleEndian.Uint64(buf[:8]), binary.LittleEndian.Uint64(buf[8:16])
	if v, n := Digits16(w0, w1); n > 0 && n < 16 {
		if want, ok := ParseUint(buf[:n]); !ok || want != v || skipDigits(buf[:], 0) != n {
			t.Fatalf("Digits16(%q) = %d, %d; ParseUint %d %v", buf[:16], v, n, want, ok)
		}
	} else if n == 0 && buf[0]-'0' < 10 || n == 16 && skipDigits(buf[:], 0) < 16 {
		t.Fatalf("Digits16(%q) = %d, %d", buf[:16], v, n)
	}
	for l := 1; l <= 8; l++ {
		f, ok := Decimal8(w0, l)
		if !ok {
			continue
		}
		lit := buf[:l]
		if e, _ := refNumber(lit, 0); e != l {
			t.Fatalf("Decimal8(%q) = %v: not one JSON number", lit, f)
		}
		want, err := ParseFloat(lit)
		if err != nil || math.Float64bits(want) != math.Float64bits(f) {
			t.Fatalf("Decimal8(%q) = %v, ParseFloat %v %v", lit, f, want, err)
		}
	}
	sEnd, esc := scanString(b, i)
	plain := sEnd >= 0 && !esc && !bytes.ContainsFunc(b[i:sEnd], func(r rune) bool { return r == 0x7f })
	if j := PlainString(b, i); j >= 0 != plain || (plain && j != sEnd) {
		t.Fatalf("PlainString(%q, %d) = %d; scanString %d escaped %v", b, i, j, sEnd, esc)
	}
	j, lo, hi := PlainName(b, i)
	if j != PlainString(b, i) {
		t.Fatalf("PlainName(%q, %d) = %d, PlainString %d", b, i, j, PlainString(b, i))
	}
	if j >= 0 && lo != 0 {
		var buf [16]byte
		if j-i > 16 {
			t.Fatalf("PlainName(%q, %d): words for %d bytes", b, i, j-i)
		}
		copy(buf[:], b[i:j])
		if lo != binary.LittleEndian.Uint64(buf[:8]) || hi != binary.LittleEndian.Uint64(buf[8:]) {
			t.Fatalf("PlainName(%q, %d): words %#x %#x", b, i, lo, hi)
		}
	}
}

var fastSeeds = []string{
	`1764489600123,"key"`, `27.431}`, `-0}`, `-0.0}`, `0.001,`, `01}`, `00.5}`, `1.}`, `1.5e3}`,
	`123456.7}`, `1234567.8}`, `12345678}`, `9999999999999999,`, `99999999999999999,`, `-9007199254740993.0}`,
	`0.30000000000000004}`, `1e400}`, `-}`, `tenant-42","metric"`, `latency_ms","value":`,
	"a\x7fb\"", "t\u00e9\"", `a\"b"`, `0123456789abcdef"x"`, `0123456789abcdefg"`, `"`, `x`, `12`,
}

// FuzzFast holds the fast readers to the Scanner and the converters at every offset of the
// input (scripts/fuzz-short.sh runs it: the event decoder trusts them with hostile lines).
func FuzzFast(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
		f.Add([]byte(`{"value":` + s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range len(b) + 1 {
			checkFast(t, b, i)
		}
	})
}

func TestFast(t *testing.T) {
	for _, s := range fastSeeds {
		for _, in := range []string{s, `{"value":` + s, strings.Repeat(" ", 20) + s} {
			b := []byte(in)
			for i := range len(b) + 1 {
				checkFast(t, b, i)
			}
		}
	}
	// The common tokens are taken, not left to the fallback.
	b := []byte(`{"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":27.431}`)
	if v, j := Integer(b, 6); v != 1764489600123 || j != 19 {
		t.Errorf("Integer: %d %d", v, j)
	}
	if v, j := Decimal(b, len(b)-7); v != 27.431 || j != len(b)-1 {
		t.Errorf("Decimal: %v %d", v, j)
	}
	if j, lo, _ := PlainName(b, 27); j != 36 || lo == 0 {
		t.Errorf("PlainName: %d %#x", j, lo)
	}
	if v, ok := Decimal8(binary.LittleEndian.Uint64([]byte("27.431}\x00")), 6); !ok || v != 27.431 {
		t.Errorf("Decimal8: %v %v", v, ok)
	}
	if n := testing.AllocsPerRun(100, func() {
		Integer(b, 6)
		Float(b, len(b)-7)
		PlainName(b, 27)
	}); n != 0 {
		t.Errorf("%v allocs", n)
	}
}

// checkMembers walks b as an object with MemberName and SkipValue, the way ingest's fast path
// walks the members it does not know, and holds every step to Next on the same input: the
// same field, the same value end, and where the walk stops, the Scanner stops too (a member
// Next refuses is one the walk refuses, and the reverse).
func checkMembers(t *testing.T, b []byte) {
	t.Helper()
	names := []string{"key", "metric", "value", "ts", "count"}
	var sc, ref Scanner
	sc.SetNames(names...)
	ref.SetNames(names...)
	ref.Reset(b)
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' || len(b) >= math.MaxInt32 {
		return
	}
	i = SkipSpace(b, i+1)
	for {
		field, v := sc.MemberName(b, i)
		end := -1
		if v >= 0 {
			end = sc.SkipValue(b, v)
		}
		ok := ref.Next()
		if end < 0 {
			// Next must refuse this member, unless it is a NaN the walk refuses by design
			// (ref has no AllowNaN, so it refuses those too) or the object ended here.
			if ok {
				t.Fatalf("%q at %d: MemberName/SkipValue refused (%d, %d), Next took %q", b, i, v, end, ref.Value.Bytes(b))
			}
			return
		}
		if !ok {
			t.Fatalf("%q at %d: Next refused (%v), the walk took a member ending at %d", b, i, ref.Err(), end)
		}
		vend := int(ref.Value.End)
		if ref.Value.Kind == String {
			vend++ // the closing quote
		}
		if field != ref.Field || end != vend || sc.Name != ref.Name {
			t.Fatalf("%q at %d: walk field %d end %d name %+v, Next field %d end %d name %+v", b, i, field, end, sc.Name, ref.Field, vend, ref.Name)
		}
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return // the end of the object (or an error), which the walk leaves to its caller
		}
		i = SkipSpace(b, i+1)
	}
}

var memberSeeds = []string{
	`{"host":"a","key":"k"}`, `{"k\u0065y":1,"ts" : 2}`, `{"tags":{"region":"eu","az":[1,2,{"x":null}]},"value":1}`,
	`{"a":[],"b":{},"c":true,"d":false,"e":null,"f":-1.5e3}`, `{"a":NaN}`, `{"a":-Infinity}`, `{"a":01}`,
	`{"a":"\ud800","b":"\u00e9"}`, "{\"a\":\"x\ty\"}", `{"a":[1,2`, `{"a" 1}`, `{"a":}`, `{"\q":1}`,
	`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	`{"a":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, 100) + "1" + strings.Repeat("}", 100) + `}`,
	"{ \"metric\"\t:\r\n\"m\" , \"x\" : [ 1 , { } ] }",
}

// FuzzMembers holds MemberName and SkipValue to Next (scripts/fuzz-short.sh does not run it:
// FuzzDecodeFast reaches them through the decoder).
func FuzzMembers(f *testing.F) {
	for _, s := range memberSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkMembers(t, b) })
}

func TestMembers(t *testing.T) {
	for _, s := range memberSeeds {
		checkMembers(t, []byte(s))
		for i := range min(len(s), 200) { // and prefixes: each refusal where Next refuses
			checkMembers(t, []byte(s[:i]))
		}
	}
	var sc Scanner
	sc.SetNames("key", "metric")
	b := []byte(`{"k\u0065y" : {"a":[1]}, "x":2}`)
	if f, v := sc.MemberName(b, 1); f != 0 || v != 14 || sc.SkipValue(b, v) != 23 {
		t.Errorf("MemberName %d %d, SkipValue %d", f, v, sc.SkipValue(b, v))
	}
	if n := testing.AllocsPerRun(100, func() {
		_, v := sc.MemberName(b, 1)
		sc.SkipValue(b, v)
	}); n != 0 {
		t.Errorf("%v allocs", n)
	}
}
